#!/usr/bin/env bash
# Installs the build BUILD into a fresh prefix under WORK and builds the seeds' example against
# it as a project outside the tree does: with CMake's find_package(devdl) (a host library that
# carries the library's image, and the application linked with it), and with pkg-config and a
# Makefile; each program must print the seeds' output. The manual pages must be installed.
# Usage: run.sh SOURCE BUILD WORK
set -euo pipefail
source=$1 build=$2 work=$3
rm -rf "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > /dev/null
expected="0 2 4 6 8 10 12 14"
for page in man1/devdl-nm.1 man1/devdl-pack.1 man1/devdl-cache.1 man3/devdl.3 man7/devdl.7; do
  grep -q '^\.SH NAME' "$prefix/share/man/$page" || { echo "no manual page $page" >&2; exit 1; }
done

cmake -S "$source/tests/install" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DSEED_EXAMPLE="$source/samples/seed-example" > /dev/null
cmake --build "$work/cmake" > /dev/null
out=$("$work/cmake/app" "$work/cmake" | tail -n 1)
echo "find_package: $out"
grep -qx "$expected" <<< "$out"

libdir=$(dirname "$(find "$prefix" -name devdl.pc)")
PKG_CONFIG_PATH=$libdir make -s -C "$work" -f "$source/tests/install/Makefile" SEED="$source/samples/seed-example"
out=$(LD_LIBRARY_PATH=$(dirname "$libdir") "$work/app-dlopen" "$work/cmake")
echo "pkg-config: $out"
grep -qx "$expected" <<< "$out"
