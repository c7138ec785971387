#!/usr/bin/env bash
# NVIDIA's cuda-samples with devdl: the programs of 0_Introduction, 2_Concepts_and_Techniques,
# 3_CUDA_Features and 6_Performance that set CUDA_SEPARABLE_COMPILATION ON and need no library the
# GPU machine lacks (OpenGL, GLUT, EGL, MPI, Vulkan, X11, NVRTC, NVVM, cuBLAS, cuFFT, cuRAND,
# cuSPARSE, cuSOLVER, NPP, nvJPEG), built twice from one checkout, unchanged: as shipped (nvcc
# -dlink at build time, the static CUDA runtime) and with devdl's link at load time
# (CMAKE_PROJECT_INCLUDE=devdlCudaLinkAtLoad.cmake: no CMakeLists.txt edited). A sample of several
# .cu files is built a third way, with devdl: those without main() a shared library of its own.
# Then each program runs both ways, one line a sample, and a total.
#
# The checkout is not devdl's (github.com/NVIDIA/cuda-samples; docs/backends.md says how to get
# it); nothing of it is copied into devdl's tree.
#
#   scripts/cuda-samples.sh build CHECKOUT WORK DEVDL_DIR [--arch N] [--jobs N] [--only NAME,...]
#       DEVDL_DIR: devdl's CMake package (<prefix>/lib/cmake/devdl, or python3 -m devdl --cmake-dir).
#       --arch: the GPU architectures built (default 90; the samples' own list is 9 of them).
#   scripts/cuda-samples.sh run WORK [--only NAME,...]
#       On the GPU machine, with libdevdl where the programs find it (LD_LIBRARY_PATH). Exits 1
#       where a sample that passes as shipped fails with devdl.
#   scripts/cuda-samples.sh list CHECKOUT
set -uo pipefail

usage() { sed -n '/^#   scripts/,/^#   scripts.*list/p' "$0" >&2; exit 2; }

# The samples: NAME CATEGORY, one a line.
select_samples() {
  local checkout=$1 dir name excluded
  for dir in "$checkout"/Samples/{0_Introduction,2_Concepts_and_Techniques,3_CUDA_Features,6_Performance}/*/; do
    name=$(basename "$dir")
    [ -f "$dir/CMakeLists.txt" ] || continue
    grep -q "CUDA_SEPARABLE_COMPILATION ON" "$dir/CMakeLists.txt" || continue
    excluded=$(grep -v '^[[:space:]]*#' "$dir/CMakeLists.txt" |
      grep -oE 'find_package\((OpenGL|GLUT|EGL|MPI|Vulkan|X11|FreeImage)|CUDA::(nvrtc|nvvm|cublas|cufft|curand|cusparse|cusolver|npp[a-z]*|nvjpeg)' |
      head -n 1)
    [ -z "$excluded" ] && echo "$name $(basename "$(dirname "$dir")")"
  done
}

only_filter() {  # keeps the lines whose first word --only names (all without it)
  if [ -z "$1" ]; then cat; else grep -E "^(${1//,/|}) "; fi
}

# A shared-library variant of a sample of several .cu files: those without main() one library.
write_shared_variant() {
  local dir=$1 name=$2 out=$3
  cat > "$out" << EOF
# $name, its .cu files but the one with main() as a shared library (devdl links its device code
# with the program's at load time; nvcc -dlink cannot, across a shared library).
cmake_minimum_required(VERSION 3.20)
project(${name}_shared LANGUAGES C CXX CUDA)
find_package(CUDAToolkit REQUIRED)
file(GLOB cu "$dir/*.cu")
file(GLOB cpp "$dir/*.cpp")
set(library_sources)
set(program_sources \${cpp})
foreach(source \${cu})
  file(STRINGS \${source} mains REGEX "(^|[ *])main[ ]*\\\\(")
  if(mains)
    list(APPEND program_sources \${source})
  else()
    list(APPEND library_sources \${source})
  endif()
endforeach()
add_library(${name}_device SHARED \${library_sources})
add_executable(${name}_shared \${program_sources})
target_link_libraries(${name}_shared PRIVATE ${name}_device)
foreach(target ${name}_device ${name}_shared)
  target_include_directories(\${target} PRIVATE "$dir" "$dir/../../../Common")
  target_link_libraries(\${target} PRIVATE CUDA::cudart)
  target_compile_features(\${target} PRIVATE cxx_std_17 cuda_std_17)
  target_compile_options(\${target} PRIVATE \$<\$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>)
  set_target_properties(\${target} PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
endforeach()
EOF
}

build() {
  local checkout=$1 work=$2 devdl_dir=$3; shift 3
  local arch=90 jobs only=""
  jobs=$(nproc)
  while [ $# -gt 0 ]; do
    case $1 in
      --arch) arch=$2; shift 2 ;;
      --jobs) jobs=$2; shift 2 ;;
      --only) only=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  [ -f "$devdl_dir/devdlCudaLinkAtLoad.cmake" ] || { echo "cuda-samples: no devdlCudaLinkAtLoad.cmake in $devdl_dir" >&2; exit 2; }
  checkout=$(cd "$checkout" && pwd) work=$(mkdir -p "$work" && cd "$work" && pwd) devdl_dir=$(cd "$devdl_dir" && pwd)
  select_samples "$checkout" | only_filter "$only" > "$work/samples.txt"
  # One tree of the selected samples' folders, configured twice. The samples set their own
  # architectures after project(): the list is replaced once each folder is read.
  mkdir -p "$work/tree"
  {
    echo "cmake_minimum_required(VERSION 3.20)"
    echo "project(devdl_cuda_samples LANGUAGES C CXX CUDA)"
    while read -r name category; do
      echo "add_subdirectory(\"$checkout/Samples/$category/$name\" \"$name\")"
    done < "$work/samples.txt"
    echo "if(DEVDL_SHARED_VARIANTS)"
    while read -r name category; do
      if [ "$(ls "$checkout/Samples/$category/$name"/*.cu | wc -l)" -gt 1 ]; then
        mkdir -p "$work/tree/shared/$name"
        write_shared_variant "$checkout/Samples/$category/$name" "$name" "$work/tree/shared/$name/CMakeLists.txt"
        echo "  add_subdirectory(shared/$name \"${name}_shared\")"
      fi
    done < "$work/samples.txt"
    echo "endif()"
  } > "$work/tree/CMakeLists.txt"
  cat > "$work/arch.cmake" << EOF
function(devdl_samples_architectures)
  get_property(targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target \${targets})
    get_target_property(type \${target} TYPE)
    if(NOT type STREQUAL "UTILITY")
      set_property(TARGET \${target} PROPERTY CUDA_ARCHITECTURES $arch)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL devdl_samples_architectures)
EOF
  printf 'include("%s")\ninclude("%s")\n' "$work/arch.cmake" "$devdl_dir/devdlCudaLinkAtLoad.cmake" > "$work/devdl.cmake"
  # Ninja where there is one; make keeps going (-k) as ninja does with -k 0.
  local generator=(-G Ninja) keep_going=(-k 0)
  command -v ninja > /dev/null || generator=(-G "Unix Makefiles") keep_going=(-k)
  local way status=0
  for way in shipped devdl; do
    local include=$work/arch.cmake variants=OFF
    [ "$way" = devdl ] && include=$work/devdl.cmake variants=ON
    echo "== building the samples $way ($(wc -l < "$work/samples.txt") samples, sm_$arch, $jobs jobs)"
    if ! cmake -S "$work/tree" -B "$work/$way" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PROJECT_INCLUDE="$include" \
         -DDEVDL_SHARED_VARIANTS=$variants > "$work/$way.configure.log" 2>&1; then
      tail -n 30 "$work/$way.configure.log"; exit 1
    fi
    # A sample that does not build is one line of the table, not the end of the run.
    cmake --build "$work/$way" -j "$jobs" -- "${keep_going[@]}" > "$work/$way.build.log" 2>&1 || status=1
    grep -E "^FAILED: |\*\*\* \[" "$work/$way.build.log" | head -n 20
  done
  return $status
}

# The program a target NAME made under DIR.
program() { find "$1/$2" -maxdepth 2 -type f -name "$2" -perm -u+x 2> /dev/null | head -n 1; }

# Runs one program as cuda-samples' own layout runs it, headless, bounded: from a folder three
# below one that holds Samples/ (the checkout's, linked), where "../../../Samples/CATEGORY/NAME/"
# is its sample's folder (its data) and "./" holds what its build made beside it (the kernel files
# the driver API samples load). Prints "pass", "waived" (exit 2: it needs what this machine
# lacks), "fail N" or "missing".
run_one() {
  local exe=$1 checkout=$2 root=$3 place=$3/$4 log=$5 code
  [ -n "$exe" ] || { echo missing; return; }
  mkdir -p "$place"
  [ -e "$root/Samples" ] || ln -s "$checkout/Samples" "$root/Samples"
  find "$(dirname "$exe")" -maxdepth 1 -type f -exec ln -sf {} "$place/" \;
  (cd "$place" && timeout 120 "./$(basename "$exe")" > "$log" 2>&1)
  code=$?
  case $code in 0) echo pass ;; 2) echo waived ;; *) echo "fail $code" ;; esac
}

run() {
  local work=$1; shift
  local only=""
  [ "${1:-}" = --only ] && only=$2
  work=$(cd "$work" && pwd)
  [ -f "$work/samples.txt" ] || { echo "cuda-samples: $work has no samples.txt (build first)" >&2; exit 2; }
  local checkout
  checkout=$(sed -n 's/^add_subdirectory("\(.*\)\/Samples\/.*/\1/p' "$work/tree/CMakeLists.txt" | head -n 1)
  mkdir -p "$work/logs"
  local shipped devdl name category passed=0 failed=0 na=0 status=0
  printf '%-32s %-10s %-10s %s\n' sample shipped devdl "devdl's shared-library variant"
  while read -r name category; do
    shipped=$(run_one "$(program "$work/shipped" "$name")" "$checkout" "$work/run" "shipped/$category/$name" \
      "$work/logs/$name.shipped.log")
    devdl=$(run_one "$(program "$work/devdl" "$name")" "$checkout" "$work/run" "devdl/$category/$name" \
      "$work/logs/$name.devdl.log")
    local variant=""
    if [ -d "$work/devdl/${name}_shared" ]; then
      variant=$(run_one "$(program "$work/devdl" "${name}_shared")" "$checkout" "$work/run" "shared/$category/$name" \
        "$work/logs/$name.shared.log")
    fi
    printf '%-32s %-10s %-10s %s\n' "$name" "$shipped" "$devdl" "$variant"
    if [ "$shipped" != pass ]; then
      na=$((na + 1))
    elif [ "$devdl" = pass ] && { [ -z "$variant" ] || [ "$variant" = pass ]; }; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); status=1
      tail -n 5 "$work/logs/$name.devdl.log" | awk '{ print "    " $0 }'
      [ -f "$work/logs/$name.shared.log" ] && [ "$variant" != pass ] && tail -n 5 "$work/logs/$name.shared.log" | awk '{ print "    " $0 }'
    fi
  done < <(only_filter "$only" < "$work/samples.txt")
  echo "cuda-samples through devdl: $passed passed, $failed failed, $na not applicable (not passing as shipped here)"
  return $status
}

case "${1:-}" in
  build) [ $# -ge 4 ] || usage; shift; build "$@" ;;
  run) [ $# -ge 2 ] || usage; shift; run "$@" ;;
  list) [ $# -eq 2 ] || usage; select_samples "$2" ;;
  *) usage ;;
esac
