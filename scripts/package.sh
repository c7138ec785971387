#!/usr/bin/env bash
# Makes devdl's Debian packages (libdevdl0, devdl-tools, libdevdl-dev, python3-devdl) in
# build/package, from a Release build for /usr, and checks them: unpacked with dpkg -x, the
# seeds' example builds against them outside the tree (find_package and pkg-config) and runs, as
# does the Python sample (tests/install/run.sh).
#   scripts/package.sh             make and check
#   scripts/package.sh --install   then install them for real (apt-get, as root), check the
#                                  installation in /usr the same way, and remove them again
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/package
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DDEVDL_BUILD_TESTS=OFF -DDEVDL_BUILD_SAMPLES=OFF -DDEVDL_BUILD_BENCH=OFF > /dev/null
cmake --build "$build" -j "$(nproc)"
rm -f "$build"/*.deb
(cd "$build" && cpack > /dev/null)
packages=("$build"/*.deb)
for deb in "${packages[@]}"; do
  echo "== $(basename "$deb")"
  dpkg-deb --field "$deb" Package Version Depends Recommends Suggests
done

root=$build/unpacked
rm -rf "$root"
for deb in "${packages[@]}"; do dpkg -x "$deb" "$root"; done
DEVDL_CACHE=0 tests/install/run.sh "$PWD" "$build/check-unpacked" --prefix "$PWD/$root/usr"

if [ "${1:-}" = "--install" ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  names=$(for deb in "${packages[@]}"; do dpkg-deb --field "$deb" Package; done)
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]/#/./}" > /dev/null
  trap '$SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $names > /dev/null' EXIT
  DEVDL_CACHE=0 tests/install/run.sh "$PWD" "$build/check-installed" --prefix /usr
fi
