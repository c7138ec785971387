#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with build/portable/stage made here by
# scripts/gpu-build.sh: the CUDA tests, the CUDA samples (C and Python), and the CUDA benchmarks.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=build/portable/stage
export LD_LIBRARY_PATH=$PWD/$stage/lib
export DEVDL_TEST_IMAGES=$PWD/$stage/images
status=0
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader

echo "== tests"
# The disk cache is off, as under ctest; Cuda.DiskCacheAcrossProcesses gives its processes one.
DEVDL_CACHE=0 "$stage/bin/devdl_cuda_tests" "$@" || status=1

echo "== samples"
s=$stage/samples
run() { echo "\$ $*"; "$@" || status=1; }
run "$stage/bin/cuda-seed" "$s/lib.cubin" "$s/app.cubin"
run "$stage/bin/cuda-seed" "$s/lib.ptx" "$s/app.ptx"
run "$stage/bin/cuda-seed-linked" "$s/app.cubin"
run "$stage/bin/cuda-seed" -k PointerKernel "$s/lib.cubin" "$s/app_pointer.cubin"
# The Python module (python/devdl) over the portable library, launched by CuPy.
if python3 -c "import cupy" 2> /dev/null; then
  PYTHONPATH=$PWD/python DEVDL_LIBRARY=$PWD/$stage/lib/libdevdl.so.0 run python3 samples/python/cuda_seed.py "$s"
else
  echo "python3 has no CuPy here: samples/python/cuda_seed.py not run"; status=1
fi

echo "== OpenCL on the NVIDIA driver (SPIR-V IL + clCompileProgram/clLinkProgram where it has them)"
icd=$(mktemp -d)
echo libnvidia-opencl.so.1 > "$icd/nvidia.icd"
# An attempt, not a check: NVIDIA's OpenCL (driver 580) takes neither SPIR-V nor SPIR, and says so.
echo "\$ seed-dlopen $s"
OCL_ICD_VENDORS=$icd DEVDL_DEVICE=NVIDIA DEVDL_DEBUG=libs,statistics "$stage/bin/seed-dlopen" "$s" ||
  echo "(no OpenCL device here links SPIR-V: not counted as a failure)"

echo "== the disk cache: a cold load stores, the next process loads"
cache=$(mktemp -d)
DEVDL_CACHE_DIR=$cache DEVDL_DEBUG=statistics run "$stage/bin/cuda-seed" "$s/lib.cubin" "$s/app.cubin"
DEVDL_CACHE_DIR=$cache DEVDL_DEBUG=statistics run "$stage/bin/cuda-seed" "$s/lib.cubin" "$s/app.cubin"
run "$stage/bin/devdl-cache" list --dir "$cache"

# DEVDL_GPU_BENCH: all (default), none, or lto (load-time LTO's benchmarks alone).
bench=${DEVDL_GPU_BENCH:-all}
if [ "$bench" != none ]; then
  echo "== benchmarks"
  if [ "$bench" = all ]; then
    "$stage/bin/bench_cuda_first_kernel" --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true || status=1
    "$stage/bin/bench_cache" --benchmark_filter=Cuda || status=1
    # device_dlsym of a linked kernel from 1 to 16 threads, against glibc's dlsym.
    "$stage/bin/bench_threads" --cuda --benchmark_repetitions=3 --benchmark_report_aggregates_only=true || status=1
  else
    "$stage/bin/bench_cache" --benchmark_filter='Cuda(CuLink|Lto|LargeLibraryLto|LargeLibraryNoLto)' || status=1
  fi
  # Kernel time: one source file, cuLink, nvJitLink with and without LTO.
  "$stage/bin/bench_lto" --benchmark_filter=Cuda || status=1
fi
exit $status
