#!/usr/bin/env bash
# Kokkos (4.x) with CUDA and relocatable device code (RDC), built two ways from one checkout:
#   static  as Kokkos supports it: static libraries, nvcc's device link (CMake's) at build time
#   devdl   shared libraries (BUILD_SHARED_LIBS=ON), which Kokkos refuses with RDC since 3.3.00
#           ("Relocatable device code requires static libraries.", cmake/kokkos_enable_options.cmake,
#           kokkos#3332 for kokkos#3328), devdl linking each library's and program's device code
#           as it loads instead (CMAKE_PROJECT_INCLUDE=devdlCudaLinkAtLoad.cmake, no CMakeLists.txt edited)
#   shared  (optional, --ways) shared libraries without RDC, the shared build Kokkos does support
# Then (on the GPU machine) the examples and a subset of the CUDA unit tests run each way.
#
# Kokkos is compiled with CMake's CUDA language (Kokkos_ENABLE_COMPILE_AS_CMAKE_LANGUAGE=ON):
# devdl replaces CMake's CUDA device link rules; with nvcc_wrapper as the C++ compiler (Kokkos'
# default) nvcc links the device code inside the host link, where no CMake rule can reach it.
#
# The checkout is copied (without .git) to WORK/src and patched there, never in place:
#   - the refusal guarded by a cache variable: `if(KOKKOS_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE AND
#     BUILD_SHARED_LIBS AND NOT Kokkos_IMPL_DEVDL_SHARED_RDC)`; only the devdl way sets it
#   - with nvcc >= 13 and a Kokkos without CUDA 13 support (4.6.x): cudaGraphAddDependencies,
#     cudaMemAdvise and cudaMemPrefetchAsync as CUDA 13 declares them (core/src/Cuda/Kokkos_Cuda_Instance.hpp)
#
#   kokkos.sh build CHECKOUT WORK DEVDL_DIR [--arch N] [--jobs N] [--ways static,devdl[,shared]]
#                         [--tests none|small|subset|all] [--targets "T ..."]
#       DEVDL_DIR: devdl's CMake package (<prefix>/lib/cmake/devdl; the directory holding
#       devdlConfig.cmake and devdlCudaLinkAtLoad.cmake). --arch: sm_N (default 90).
#       --tests: small (default: the one- and two-file Cuda tests), subset (small plus
#       IncrementalTest_CUDA, Cuda_ViewSupport and CoreUnitTest_Default), all (every test target:
#       hours on a small machine). --targets: build these targets instead (with the libraries).
#   kokkos.sh run WORK DEVDL_LIB [--ways static,devdl[,shared]] [--only REGEX]
#       On the GPU machine: every program built each way, one line each (pass, fail N, missing),
#       logs in WORK/logs. DEVDL_LIB: the directory of libdevdl.so.0 (the devdl way needs it).
#       Exits 1 where a program that passes static fails through devdl.
set -uo pipefail

usage() { sed -n '/^#   kokkos.sh build/,/^#       Exits 1/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

EXAMPLES="Kokkos_query_device Kokkos_example_relocatable_function Kokkos_tutorial_01_hello_world
  Kokkos_tutorial_01_hello_world_lambda Kokkos_tutorial_02_simple_reduce Kokkos_tutorial_02_simple_reduce_lambda
  Kokkos_tutorial_03_simple_view Kokkos_tutorial_03_simple_view_lambda Kokkos_tutorial_04_simple_memoryspaces
  Kokkos_tutorial_05_simple_atomics Kokkos_tutorial_06_simple_mdrangepolicy
  Kokkos_tutorial_advancedviews_01_data_layouts Kokkos_tutorial_advancedviews_02_memory_traits
  Kokkos_tutorial_advancedviews_03_subviews Kokkos_tutorial_advancedviews_04_dualviews
  Kokkos_tutorial_algorithms_01_random_numbers Kokkos_tutorial_hierarchicalparallelism_01_thread_teams
  Kokkos_tutorial_hierarchical_01_thread_teams_lambda Kokkos_tutorial_hierarchicalparallelism_02_nested_parallel_for
  Kokkos_tutorial_hierarchicalparallelism_03_vectorization Kokkos_launch_bounds_reduce"
# One or two .cpp each. GraphAtomicLocks: desul's lock arrays (__constant__, defined in kokkoscore)
# reached from the program's kernels before any other kernel ran.
TESTS_SMALL="Kokkos_CoreUnitTest_CudaGraphAtomicLocks Kokkos_CoreUnitTest_CudaInterOpInit
  Kokkos_CoreUnitTest_CudaInterOpStreams Kokkos_CoreUnitTest_CudaInterOpGraph"
# IncrementalTest_CUDA: 21 files, parallel_for/reduce/scan over range, MDRange and team policies,
# scratch, deep_copy, atomics (Test17_CompleteAtomic). Cuda_ViewSupport: 4. Default: 17.
TESTS_SUBSET="$TESTS_SMALL Kokkos_IncrementalTest_CUDA Kokkos_CoreUnitTest_Cuda_ViewSupport Kokkos_CoreUnitTest_Default"
# CoreUnitTest_Cuda1 (73 files: atomics of every type incl. complex<double> through the lock
# arrays, reducers, MDRange, scan, graphs), Cuda2 (52: teams, views, subviews), Cuda3 (28),
# ContainersUnitTest_Cuda (16): --tests all, or --targets.

patch_checkout() {  # patch_checkout SRC NVCC
  local src=$1 nvcc=$2
  local options=$src/cmake/kokkos_enable_options.cmake
  local refusal='if(KOKKOS_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE AND BUILD_SHARED_LIBS)'
  if grep -qF "$refusal" "$options"; then
    sed -i "s/^if(KOKKOS_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE AND BUILD_SHARED_LIBS)\$/if(KOKKOS_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE AND BUILD_SHARED_LIBS AND NOT Kokkos_IMPL_DEVDL_SHARED_RDC)/" "$options"
  elif ! grep -q Kokkos_IMPL_DEVDL_SHARED_RDC "$options"; then
    echo "kokkos: no RDC/shared-library refusal found in $options (another Kokkos version?)" >&2
  fi
  local nvcc_major
  nvcc_major=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  local instance=$src/core/src/Cuda/Kokkos_Cuda_Instance.hpp
  if [ "${nvcc_major:-0}" -ge 13 ] && grep -q 'return cudaMemAdvise(devPtr, count, advice, device);' "$instance" &&
     ! grep -q 'CUDART_VERSION >= 13000' "$instance"; then
    python3 - "$instance" << 'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
edits = [
("    return cudaGraphAddDependencies(graph, from, to, numDependencies);",
 "#if CUDART_VERSION >= 13000\n    return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);\n#else\n"
 "    return cudaGraphAddDependencies(graph, from, to, numDependencies);\n#endif"),
("    return cudaMemAdvise(devPtr, count, advice, device);",
 "#if CUDART_VERSION >= 13000\n    cudaMemLocation loc;\n"
 "    loc.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;\n"
 "    loc.id   = device;\n    return cudaMemAdvise(devPtr, count, advice, loc);\n#else\n"
 "    return cudaMemAdvise(devPtr, count, advice, device);\n#endif"),
("    return cudaMemPrefetchAsync(devPtr, count, dstDevice,\n                                get_input_stream(stream));",
 "#if CUDART_VERSION >= 13000\n    cudaMemLocation loc;\n"
 "    loc.type = dstDevice == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;\n"
 "    loc.id   = dstDevice;\n    return cudaMemPrefetchAsync(devPtr, count, loc, 0, get_input_stream(stream));\n#else\n"
 "    return cudaMemPrefetchAsync(devPtr, count, dstDevice,\n                                get_input_stream(stream));\n#endif"),
]
for old, new in edits:
    if s.count(old) != 1:
        sys.exit("kokkos: CUDA 13 patch does not apply to " + p)
    s = s.replace(old, new)
open(p, "w").write(s)
EOF
  fi
}

build() {
  local checkout=$1 work=$2 devdl_dir=$3; shift 3
  local arch=90 jobs ways=static,devdl tests=small targets=""
  jobs=$(nproc)
  while [ $# -gt 0 ]; do
    case $1 in
      --arch) arch=$2; shift 2 ;;
      --jobs) jobs=$2; shift 2 ;;
      --ways) ways=$2; shift 2 ;;
      --tests) tests=$2; shift 2 ;;
      --targets) targets=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  [ -f "$devdl_dir/devdlCudaLinkAtLoad.cmake" ] || { echo "kokkos: no devdlCudaLinkAtLoad.cmake in $devdl_dir" >&2; exit 2; }
  [ -f "$checkout/core/src/Kokkos_Core.hpp" ] || { echo "kokkos: $checkout is no Kokkos checkout" >&2; exit 2; }
  local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [ -x "$nvcc" ] || { echo "kokkos: no nvcc (CUDACXX, PATH, /usr/local/cuda/bin)" >&2; exit 2; }
  checkout=$(cd "$checkout" && pwd) work=$(mkdir -p "$work" && cd "$work" && pwd) devdl_dir=$(cd "$devdl_dir" && pwd)
  mkdir -p "$work/logs"
  rm -rf "$work/src" && mkdir -p "$work/src"
  tar -C "$checkout" --exclude=.git -cf - . | tar -C "$work/src" -xf -
  patch_checkout "$work/src" "$nvcc" || exit 1

  local test_option=OFF test_targets=""
  case $tests in
    none) ;;
    small) test_option=ON test_targets=$TESTS_SMALL ;;
    subset) test_option=ON test_targets=$TESTS_SUBSET ;;
    all) test_option=ON test_targets=all ;;
    *) usage ;;
  esac
  [ -n "$targets" ] && test_option=ON
  local generator=(-G Ninja)
  command -v ninja > /dev/null || generator=(-G "Unix Makefiles")
  local way status=0
  for way in ${ways//,/ }; do
    local options=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
      -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_COMPILE_AS_CMAKE_LANGUAGE=ON -DKokkos_ARCH_HOPPER90=ON
      -DKokkos_ENABLE_EXAMPLES=ON -DKokkos_ENABLE_TESTS=$test_option)
    case $arch in  # Kokkos' name of the architecture
      70) options=("${options[@]/Kokkos_ARCH_HOPPER90/Kokkos_ARCH_VOLTA70}") ;;
      80) options=("${options[@]/Kokkos_ARCH_HOPPER90/Kokkos_ARCH_AMPERE80}") ;;
      89) options=("${options[@]/Kokkos_ARCH_HOPPER90/Kokkos_ARCH_ADA89}") ;;
      90) ;;
      100) options=("${options[@]/Kokkos_ARCH_HOPPER90/Kokkos_ARCH_BLACKWELL100}") ;;
      *) echo "kokkos: --arch $arch: add Kokkos' name for it" >&2; exit 2 ;;
    esac
    case $way in
      static) options+=(-DBUILD_SHARED_LIBS=OFF -DKokkos_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE=ON) ;;
      devdl) options+=(-DBUILD_SHARED_LIBS=ON -DKokkos_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE=ON
                       -DKokkos_IMPL_DEVDL_SHARED_RDC=ON -DCMAKE_PROJECT_INCLUDE="$devdl_dir/devdlCudaLinkAtLoad.cmake") ;;
      shared) options+=(-DBUILD_SHARED_LIBS=ON -DKokkos_ENABLE_CUDA_RELOCATABLE_DEVICE_CODE=OFF) ;;
      *) usage ;;
    esac
    echo "== Kokkos $way (sm_$arch, $jobs jobs)"
    if ! cmake -S "$work/src" -B "$work/$way" "${generator[@]}" "${options[@]}" > "$work/logs/$way.configure.log" 2>&1; then
      tail -n 30 "$work/logs/$way.configure.log"; status=1; continue
    fi
    local what=(kokkoscore kokkoscontainers kokkossimd)
    if [ -n "$targets" ]; then
      what+=($targets)
    else
      what+=($EXAMPLES)
      if [ "$test_targets" = all ]; then what=(all); else what+=($test_targets); fi
    fi
    local start=$SECONDS
    # A program that does not build is one line of the table, not the end of the run.
    cmake --build "$work/$way" -j "$jobs" --target "${what[@]}" -- $([ "${generator[1]}" = Ninja ] && echo -k 0 || echo -k) \
      > "$work/logs/$way.build.log" 2>&1 || status=1
    echo "   built in $((SECONDS - start)) s"
    grep -E "^FAILED: |\*\*\* \[" "$work/logs/$way.build.log" | head -n 20
  done
  printf '%s\n' $EXAMPLES $TESTS_SUBSET > "$work/programs.txt"
  return $status
}

program() { find "$1" -type f -name "$2" -perm -u+x 2> /dev/null | head -n 1; }

run_one() {  # run_one EXE LOG LIBRARY_PATH
  local exe=$1 log=$2 code
  [ -n "$exe" ] || { echo missing; return; }
  (cd "$(dirname "$exe")" && LD_LIBRARY_PATH=$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 600 "$exe" > "$log" 2>&1)
  code=$?
  case $code in 0) echo pass ;; *) echo "fail $code" ;; esac
}

run() {
  local work=$1 devdl_lib=$2; shift 2
  local ways=static,devdl only=""
  while [ $# -gt 0 ]; do
    case $1 in
      --ways) ways=$2; shift 2 ;;
      --only) only=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  work=$(cd "$work" && pwd) devdl_lib=$(cd "$devdl_lib" && pwd)
  mkdir -p "$work/logs"
  local programs
  programs=$( (cat "$work/programs.txt" 2> /dev/null || printf '%s\n' $EXAMPLES $TESTS_SUBSET) | grep -E "${only:-.}")
  local way name status=0 passed=0 failed=0 na=0
  printf '%-60s' program; for way in ${ways//,/ }; do printf ' %-10s' "$way"; done; echo
  for name in $programs; do
    local line result first="" bad=0
    line=$(printf '%-60s' "$name")
    for way in ${ways//,/ }; do
      [ -d "$work/$way" ] || { line+=$(printf ' %-10s' -); continue; }
      # The build tree's own library directories first (the RUNPATH names where they were built).
      local libs
      libs=$(find "$work/$way" -name 'libkokkos*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
      result=$(run_one "$(program "$work/$way" "$name")" "$work/logs/$name.$way.log" "$libs$devdl_lib")
      line+=$(printf ' %-10s' "$result")
      [ -z "$first" ] && first=$result
      [ "$way" = devdl ] && [ "$first" = pass ] && [ "$result" != pass ] && bad=1
    done
    echo "$line"
    if [ "$first" != pass ]; then na=$((na + 1))
    elif [ $bad = 1 ]; then
      failed=$((failed + 1)); status=1
      tail -n 8 "$work/logs/$name.devdl.log" | sed 's/^/    /'
    else passed=$((passed + 1)); fi
  done
  echo "Kokkos through devdl: $passed as the first way, $failed failed, $na not applicable (first way not passing or not built)"
  return $status
}

case "${1:-}" in
  build) [ $# -ge 4 ] || usage; shift; build "$@" ;;
  run) [ $# -ge 3 ] || usage; shift; run "$@" ;;
  *) usage ;;
esac
