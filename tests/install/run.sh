#!/usr/bin/env bash
# Builds the seeds' example against an installed devdl as a project outside the tree does: with
# CMake's find_package(devdl) (a host library that carries the library's image, the application
# linked with it, a bundle of both images) and with pkg-config and a Makefile; each program must
# print the seeds' output. The manual pages must be installed. With Python and PyOpenCL there,
# the Python sample runs with the installed module.
# Usage: run.sh SOURCE WORK --build BUILD     installs BUILD into WORK/prefix first
#        run.sh SOURCE WORK --prefix PREFIX   uses the installation at PREFIX (/usr, dpkg -x's)
set -euo pipefail
source=$1 work=$2
# WORK is emptied: only a folder this script made before (its mark inside), or a new one.
if [ -e "$work" ]; then
  [ -f "$work/.devdl-install-check" ] || { echo "run.sh: $work is not a folder run.sh made; not emptying it" >&2; exit 2; }
  rm -rf "$work"
fi
mkdir -p "$work"
touch "$work/.devdl-install-check"
case "$3" in
  --build) prefix=$work/prefix; cmake --install "$4" --prefix "$prefix" > /dev/null ;;
  --prefix) prefix=$4 ;;
  *) echo "usage: run.sh SOURCE WORK (--build BUILD | --prefix PREFIX)" >&2; exit 2 ;;
esac
expected="0 2 4 6 8 10 12 14"
for page in man1/devdl-nm.1 man1/devdl-pack.1 man1/devdl-cache.1 man3/devdl.3 man7/devdl.7; do
  [ -f "$prefix/share/man/$page" ] || [ -f "$prefix/share/man/$page.gz" ] || {
    echo "no manual page $page under $prefix" >&2; exit 1; }
done
libdir=$(dirname "$(dirname "$(find "$prefix" -name devdl.pc -path '*/pkgconfig/*' | head -n 1)")")

# Its install rules (a bundle for <libdir>/devdl) install into devdl's prefix, in devdl's libdir.
cmake -S "$source/tests/install" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR="${libdir#"$prefix"/}" \
  -DSEED_EXAMPLE="$source/samples/seed-example" > /dev/null
cmake --build "$work/cmake" > /dev/null
out=$(LD_LIBRARY_PATH=$libdir "$work/cmake/app" "$work/cmake" | tail -n 1)
echo "find_package: $out"
grep -qx "$expected" <<< "$out"
# The bundle holds both images: the application's kernel and the library's function.
symbols=$(LD_LIBRARY_PATH=$libdir "$prefix/bin/devdl-nm" "$work/cmake/seed.devdl")
grep -q "AppKernel" <<< "$symbols" && grep -q "LibDeviceFunc" <<< "$symbols" || {
  echo "seed.devdl lacks an image:" >&2; echo "$symbols" >&2; exit 1; }

# The application bundle that needs the library by name, once the library is installed in
# <libdir>/devdl (devdl_add_bundle INSTALL); devdl-pack --check finds it there too.
installed=$libdir/devdl/seedlib.devdl
[ ! -e "$installed" ] || { echo "$installed is there before the test installs it" >&2; exit 1; }
trap 'rm -f "$installed"' EXIT
cmake --install "$work/cmake" --prefix "$prefix" > /dev/null
[ -f "$installed" ] || { echo "devdl_add_bundle(INSTALL) did not install $installed" >&2; exit 1; }
out=$(LD_LIBRARY_PATH=$libdir "$work/cmake/app_needs" "$work/cmake" | tail -n 1)
echo "needed file: $out"
grep -qx "$expected" <<< "$out"
# Captured whole first: grep -q would close the pipe on devdl-pack's next line (pipefail, SIGPIPE).
checked=$(LD_LIBRARY_PATH=$libdir "$prefix/bin/devdl-pack" --check "$work/cmake/app-needs.devdl" 2>&1)
grep -q "needs seedlib.devdl: $installed" <<< "$checked" || {
  echo "devdl-pack --check did not find seedlib.devdl in $libdir/devdl:" >&2; echo "$checked" >&2; exit 1; }
rm -f "$installed"
PKG_CONFIG_PATH=$libdir/pkgconfig make -s -C "$work" -f "$source/tests/install/Makefile" SEED="$source/samples/seed-example"
out=$(LD_LIBRARY_PATH=$libdir "$work/app-dlopen" "$work/cmake")
echo "pkg-config: $out"
grep -qx "$expected" <<< "$out"

for python in python3 /usr/bin/python3; do
  if "$python" -c "import pyopencl" 2> /dev/null; then
    out=$(PYTHONPATH=$prefix/lib/python3/dist-packages "$python" "$source/samples/python/seed.py" "$work/cmake")
    echo "python: $out"
    grep -qx "$expected" <<< "$out"
    exit 0
  fi
done
echo "python: not run (no python3 with PyOpenCL)"
