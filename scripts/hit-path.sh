#!/usr/bin/env bash
# What a disk-cache hit runs in a fresh process (two device_dlopen and a device_dlsym, as
# bench_cache's child does them), followed by valgrind in the portable build (build/portable):
#
#   scripts/hit-path.sh order   rewrites libdevdl/hit_path.order, the functions of libdevdl.so
#                               that a hit runs, which the linker lays out side by side
#   scripts/hit-path.sh count   counts what the seed's hit on CUDA touches for the first time:
#                               instructions, and cache lines of code and data (bench/README.md)
#
# The hits are CUDA's, over a stand-in libcuda.so.1 whose calls do nothing (scripts/libcuda-stand-in.c):
# devdl's own part is what is followed, and no GPU is needed. (PoCL here takes SPIR, which the
# portable build translates to in another process, so OpenCL's hit is not followed; the loader and the cache,
# most of a hit, are the same.) Needs nvcc (/usr/local/cuda) for the test cubins, as
# scripts/gpu-build.sh does; installs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ "$mode" != order ] && [ "$mode" != count ]; then
  echo "usage: scripts/hit-path.sh order | count" >&2
  exit 2
fi
if ! command -v valgrind > /dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends valgrind
fi

build=build/portable
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEVDL_PORTABLE=ON > /dev/null
ninja -C "$build" -j "$(nproc)" devdl bench_cache devdl_test_images > /dev/null
images=$PWD/$build/tests/images
library=$PWD/$build/libdevdl/libdevdl.so.0
if [ ! -f "$images/lib.cubin" ]; then
  echo "hit-path: no CUDA toolkit here (nvcc): no cubins to load" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -shared -fPIC -O2 -o "$work/libcuda.so.1" scripts/libcuda-stand-in.c

# follow OUT BACKEND LIB APP [valgrind's options]: one process fills a fresh cache, then the hit
# runs under callgrind, which counts only inside device_dlopen and device_dlsym.
follow() {
  local out=$1 backend=$2 lib=$3 app=$4
  shift 4
  local cache
  cache=$(mktemp -d -p "$work")
  local environment=("LD_LIBRARY_PATH=$work:$PWD/$build/libdevdl" "DEVDL_CACHE_DIR=$cache")
  local child=("$build/bench/bench_cache" --child "$backend" devdl "$lib" "$app")
  env "${environment[@]}" "${child[@]}" > /dev/null
  env "${environment[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect=device_dlopen \
    --toggle-collect=device_dlsym "$@" "${child[@]}" > /dev/null 2>&1
}

if [ "$mode" = count ]; then
  follow "$work/count.out" cuda "$images/lib.cubin" "$images/app.cubin" \
    --cache-sim=yes --LL=33554432,16,64
  echo "the seed's hit on CUDA (stand-in driver): instructions, first-touched lines of code, of data read, of data written"
  callgrind_annotate --show=Ir,ILmr,DLmr,DLmw "$work/count.out" | grep "PROGRAM TOTALS"
  exit 0
fi

# order: the hits of the seed (cubins, PTX) and of the 800 KB library.
follow "$work/cubin.out" cuda "$images/lib.cubin" "$images/app.cubin" --demangle=no
follow "$work/ptx.out" cuda "$images/lib.ptx" "$images/app.ptx" --demangle=no
follow "$work/large.out" cuda "$images/lib_large.cubin" "$images/app.cubin" --demangle=no
# A name lld cannot place alone is left out: one that several local symbols share (a clone of a
# template in each object) moves every section holding it, some whole files' code.
nm --defined-only "$library" | awk '{ print $3 }' | sort | uniq -d > "$work/shared-names"
python3 - "$work/shared-names" "$work"/{cubin,ptx,large}.out > libdevdl/hit_path.order <<'EOF'
import re, sys
shared = set(open(sys.argv[1]).read().split())
names = set()
for profile in sys.argv[2:]:
    objects, functions, current = {}, {}, None
    for line in open(profile):
        m = re.match(r'(c?ob)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3): objects[m.group(2)] = m.group(3)
            if m.group(1) == 'ob': current = objects[m.group(2)]
            continue
        m = re.match(r'(c?fn)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3): functions[m.group(2)] = m.group(3)
            if m.group(1) == 'fn' and '/libdevdl.so' in current: names.add(functions[m.group(2)])
print("# The functions of libdevdl.so that a disk-cache hit runs in a fresh process (CUDA: the seed as")
print("# cubins and as PTX, the 800 KB library), which lld lays out side by side (--symbol-ordering-file).")
print("# Written by scripts/hit-path.sh order; a name no longer in the library is passed over.")
for name in sorted(names - shared):
    print(name)
EOF
echo "hit-path: libdevdl/hit_path.order: $(grep -vc '^#' libdevdl/hit_path.order) functions"
