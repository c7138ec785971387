#!/usr/bin/env bash
# Builds devdl and its samples and shows the seeds' example: a library's device image exporting
# LibDeviceFunc, an application kernel importing it, the library packed into a host shared
# library, devdl-pack --check resolving the application against it, the application running
# through device_dlopen on the default OpenCL device (PoCL's CPU device here), and the disk
# cache serving a second process.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/demo
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEVDL_BUILD_TESTS=OFF > /dev/null
cmake --build "$build" -j "$(nproc)"

nm=$build/tools/devdl-nm/devdl-nm
pack=$build/tools/devdl-pack/devdl-pack
seed=$build/samples/seed-example
show() { echo; echo "\$ $*"; "$@"; }

echo; echo "== The library's device image exports LibDeviceFunc; the application's kernel imports it"
show "$nm" "$seed/lib.spv"
show "$nm" "$seed/app.spv"
echo; echo "== The host library libdevicelib.so carries the library's image"
show "$nm" --properties "$seed/libdevicelib.so"
echo; echo "== devdl-pack --check resolves the application's imports, like ldd -r"
show "$pack" --check "$seed/app.spv" "$seed/libdevicelib.so"
if show "$pack" --check "$seed/app.spv"; then
  echo "demo: --check should have failed without the library" >&2
  exit 1
fi
echo; echo "== device_dlopen: the application opens the library's image and its own, links, runs"
show "$seed/seed-dlopen" "$seed"
echo; echo "== The application linked with libdevicelib.so opens only its own image"
show "$seed/seed-linked" "$seed"
echo; echo "== LD_PRELOAD of a host library carrying another LibDeviceFunc (it triples) interposes it"
echo; echo "\$ LD_PRELOAD=$build/samples/interposition/libdevicepatch.so $seed/seed-linked $seed"
LD_PRELOAD=$build/samples/interposition/libdevicepatch.so "$seed/seed-linked" "$seed"

echo; echo "== The disk cache: the first process builds and stores the program, the next one loads it"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
for run in first second; do
  echo; echo "\$ DEVDL_CACHE_DIR=$cache DEVDL_DEBUG=statistics $seed/seed-dlopen $seed   # $run"
  DEVDL_CACHE_DIR=$cache DEVDL_DEBUG=statistics "$seed/seed-dlopen" "$seed" 2>&1 | grep -E "program for|cache: [0-9]|^[0-9]"
done
show "$build/tools/devdl-cache/devdl-cache" list --dir "$cache"

echo; echo "== The same in CUDA: cubins linked by the driver's linker through device_dlopen"
cuda=$build/samples/cuda-seed
if [ ! -x "$cuda/cuda-seed" ]; then
  echo "(not built: no CUDA toolkit on this machine)"
elif ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  echo "(built, not run: no NVIDIA driver on this machine; scripts/gpu-run.sh runs it on a GPU)"
else
  show "$cuda/cuda-seed" "$cuda/lib.cubin" "$cuda/app.cubin"
  show "$cuda/cuda-seed-linked" "$cuda/app.cubin"
fi
