#!/usr/bin/env bash
# Records what devdl gives the CUDA driver, without a GPU, to hold a change to the CUDA link
# against the tree before it: each cuLink input (named as devdl labels it) and each module loaded,
# over the stand-in libcuda.so.1 (scripts/libcuda-stand-in.c), for the test images' scenarios
# (the seed, function pointers, instances and statics reached from other programs, interposed
# functions and variables, the toolchain's and the device runtime's symbols, virtual functions,
# chains, loops) in each CUDA format, with DEVDL_CUDA_LINKER unset, =culink and =nvjitlink
# (nvJitLink is a compiler library: it links here, so its cubins are recorded as linked).
#
#   scripts/cuda-link-record.sh BUILD OUT    BUILD: a build folder with tests (build/test), whose
#                                            libdevdl and test images are used; OUT: a new folder
#
# Then `diff -r OUT-before OUT-after`: the same bytes, the same messages. Needs nvcc for the
# images (as scripts/gpu-build.sh does) and nvJitLink in the toolkit.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
  echo "usage: scripts/cuda-link-record.sh BUILD OUT" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=$2
images=$build/tests/images
if [ ! -f "$images/lib.cubin" ]; then
  echo "cuda-link-record: $images has no cubins (no CUDA toolkit where $build was configured)" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -shared -fPIC -O2 -o "$work/libcuda.so.1" scripts/libcuda-stand-in.c
# The opener: each argument NAME[:G][:L] opened in turn, DEVDL_GLOBAL with G, DEVDL_LAZY with L
# (else DEVDL_NOW); what each open says, on a line.
cat > "$work/opener.c" <<'EOF'
#include <devdl.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  for (int i = 3; i < argc; ++i) {
    char name[256], path[4096];
    snprintf(name, sizeof name, "%s", argv[i]);
    int flags = DEVDL_NOW;
    char *options = strchr(name, ':');
    if (options) {
      if (strchr(options, 'G')) flags |= DEVDL_GLOBAL;
      if (strchr(options, 'L')) flags = (flags & ~DEVDL_NOW) | DEVDL_LAZY;
      *options = 0;
    }
    snprintf(path, sizeof path, "%s/%s.%s", argv[1], name, argv[2]);
    printf("%s: %s\n", name, device_dlopen(path, flags) ? "opened" : device_dlerror());
  }
  return 0;
}
EOF
cc -O1 -Iinclude "$work/opener.c" -o "$work/opener" -L"$build/libdevdl" -ldevdl -Wl,-rpath,"$build/libdevdl"

scenario() {  # LINKER FORMAT ITEM...
  local linker=$1 format=$2
  shift 2
  [ -f "$images/${1%%:*}.$format" ] || return 0
  local dir="$out/${linker:-default}/$format/$(echo "$*" | tr ' :' '+.')"
  mkdir -p "$dir"
  env LD_LIBRARY_PATH="$work" DEVDL_STAND_IN_RECORD="$dir" OCL_ICD_VENDORS=/nonexistent DEVDL_CACHE=0 \
    DEVDL_CUDA_LINKER="$linker" DEVDL_BACKEND=cuda "$work/opener" "$images" "$format" "$@" > "$dir/opened" 2>&1
}
for linker in "" culink nvjitlink; do
  for format in cubin ptx fatbin lto.fatbin; do
    scenario "$linker" $format lib:G app
    scenario "$linker" $format lib:G app_pointer
    scenario "$linker" $format gstate_lib:G gstate_read gstate_bump
    scenario "$linker" $format gstatic_lib:G gstatic_read gstatic_bump
    scenario "$linker" $format interpose_var_first:G:L interpose_var_other:G:L interpose_var_app
    scenario "$linker" $format interpose_first:G:L interpose_other:G:L interpose_app
    scenario "$linker" $format toolchain_lib:G toolchain_app
    scenario "$linker" $format counter_lib:G counter_app counter_user
    scenario "$linker" $format static_var_lib:G static_var_app
    scenario "$linker" $format vf_maker:G vf_user
    scenario "$linker" $format kernel_lib:G kernel_app
    scenario "$linker" $format loop_lib:G loop_nested_lib:G loop_app
    scenario "$linker" $format chain_base:G chain_mid:G chain_top
  done
done
echo "cuda-link-record: $(find "$out" -type f -name '[0-9]*' | wc -l) inputs and modules recorded in $out"
