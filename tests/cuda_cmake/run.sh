#!/usr/bin/env bash
# devdl's CMake functions for CUDA runtime programs, against devdl installed from BUILD into
# WORK/prefix: devdl_cuda_link_at_load on targets that use either signature of
# target_link_libraries and on a program linked with a static library of device code, a target
# set back to the static CUDA runtime refused at configure time
# saying why, and a tree that knows nothing of devdl (tree/) configured with
# CMAKE_PROJECT_INCLUDE=devdlCudaLinkAtLoad.cmake, whose device link is devdl-pack's. Each program
# then runs: its main prints the kernel's output where there is a GPU, else the CUDA error its
# calls give (devdl's registration failed, saying so, and the process went on).
# Usage: run.sh SOURCE WORK BUILD      (exit 77: no nvcc, nothing to build)
set -euo pipefail
source=$1 work=$2 build=$3
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "no nvcc (PATH, /usr/local/cuda/bin): the CUDA CMake functions are not built"; exit 77; }
# WORK is emptied: only a folder this script made before (its mark inside), or a new one.
if [ -e "$work" ]; then
  [ -f "$work/.devdl-cuda-cmake" ] || { echo "run.sh: $work is not a folder run.sh made; not emptying it" >&2; exit 2; }
  rm -rf "$work"
fi
mkdir -p "$work"
touch "$work/.devdl-cuda-cmake"
cmake --install "$build" --prefix "$work/prefix" > /dev/null
package=$(dirname "$(find "$work/prefix" -name devdlConfig.cmake | head -n 1)")
libdir=$(dirname "$(dirname "$package")")
configure() {  # SOURCE BUILD [options]: configures, the log in BUILD.log
  local from=$1 to=$2; shift 2
  cmake -S "$from" -B "$to" -G Ninja -DCMAKE_CUDA_COMPILER="$nvcc" -Ddevdl_DIR="$package" "$@" > "$to.log" 2>&1
}
fail() { echo "FAILED: $*" >&2; exit 1; }
# Each target defines its objects' registration (hidden, as nvcc -dlink's object does) and calls
# libdevdl's; it needs the shared CUDA runtime.
# (Each listing read whole first: grep -q leaving a pipe early fails it under pipefail.)
registered_by_devdl() {
  local symbols dynamic needed
  symbols=$(nm "$1") dynamic=$(nm -D "$1") needed=$(readelf -d "$1")
  grep -q " t __cudaRegisterLinkedBinary_" <<< "$symbols" || fail "$1 defines no __cudaRegisterLinkedBinary_*"
  grep -q " U device_dlregister_cuda" <<< "$dynamic" || fail "$1 does not register with libdevdl"
  grep -q "NEEDED.*libcudart\.so" <<< "$needed" || fail "$1 does not need the shared CUDA runtime"
}
ran() {  # PROGRAM: its main ran to the end
  local out
  out=$(LD_LIBRARY_PATH="$libdir" DEVDL_CACHE=0 "$1" 2> "$work/stderr.log") || fail "$1 exited $?: $(cat "$work/stderr.log")"
  grep -qE "^(main ran: cuda|0 2 4 6 8 10 12 14 $)" <<< "$out" || fail "$1 printed: $out"
  echo "$1: $out"
}

# 1. Both signatures of target_link_libraries, the call before and after the project's own.
configure "$source/tests/cuda_cmake" "$work/functions" || { cat "$work/functions.log"; fail "configuring"; }
cmake --build "$work/functions" > "$work/functions.build.log" 2>&1 || { tail -n 30 "$work/functions.build.log"; fail "building"; }
registered_by_devdl "$work/functions/apply"
registered_by_devdl "$work/functions/libtwice.so"
grep -q "NEEDED.*libtwice\.so" <<< "$(readelf -d "$work/functions/apply")" || fail "apply does not need libtwice.so"
ran "$work/functions/apply"
registered_by_devdl "$work/functions/apply_static"
listed=$(LD_LIBRARY_PATH="$libdir" "$work/prefix/bin/devdl-nm" "$work/functions/apply_static")
grep -q "^T _Z5twicei" <<< "$listed" || fail "apply_static does not carry its static library's device code: $listed"
ran "$work/functions/apply_static"

# 2. The static CUDA runtime, set after the call, is refused when the directory is configured.
if configure "$source/tests/cuda_cmake" "$work/static" -DSTATIC_RUNTIME=ON; then fail "a static CUDA runtime was taken"; fi
grep -q "devdl_cuda_link_at_load(apply): CUDA_RUNTIME_LIBRARY is Static, not Shared" "$work/static.log" ||
  { cat "$work/static.log"; fail "the static runtime's refusal does not say why"; }

# 3. A tree that knows nothing of devdl, through CMake's device link step.
configure "$source/tests/cuda_cmake/tree" "$work/tree" -DCMAKE_PROJECT_INCLUDE="$package/devdlCudaLinkAtLoad.cmake" ||
  { cat "$work/tree.log"; fail "configuring the tree"; }
cmake --build "$work/tree" > "$work/tree.build.log" 2>&1 || { tail -n 30 "$work/tree.build.log"; fail "building the tree"; }
commands=$(ninja -C "$work/tree" -t commands sample/apply)
grep -q -- "--cuda-register" <<< "$commands" || fail "the tree's device link is not devdl-pack's"
if grep -q -- " -dlink " <<< "$commands"; then fail "nvcc -dlink still links the tree's device code"; fi
registered_by_devdl "$work/tree/sample/apply"
ran "$work/tree/sample/apply"
echo "the CUDA CMake functions: both signatures, a static library of device code, the static runtime refused, a tree through CMAKE_PROJECT_INCLUDE"
