#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with build-gpu/stage made here by
# scripts/gpu-build.sh: the CUDA tests, the CUDA samples, and the CUDA benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=build-gpu/stage
export LD_LIBRARY_PATH=$PWD/$stage/lib
export DEVDL_TEST_IMAGES=$PWD/$stage/images
status=0
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader

echo "== tests"
"$stage/bin/devdl_cuda_tests" "$@" || status=1

echo "== samples"
s=$stage/samples
run() { echo "\$ $*"; "$@" || status=1; }
run "$stage/bin/cuda-seed" "$s/lib.cubin" "$s/app.cubin"
run "$stage/bin/cuda-seed" "$s/lib.ptx" "$s/app.ptx"
run "$stage/bin/cuda-seed-linked" "$s/app.cubin"
run "$stage/bin/cuda-seed" -k PointerKernel "$s/lib.cubin" "$s/app_pointer.cubin"

echo "== OpenCL on the NVIDIA driver (SPIR-V IL + clCompileProgram/clLinkProgram where it has them)"
icd=$(mktemp -d)
echo libnvidia-opencl.so.1 > "$icd/nvidia.icd"
OCL_ICD_VENDORS=$icd DEVDL_DEVICE=NVIDIA DEVDL_DEBUG=libs,statistics run "$stage/bin/seed-dlopen" "$s"

if [ -z "${DEVDL_GPU_NO_BENCH:-}" ]; then
  echo "== benchmark"
  "$stage/bin/bench_cuda_first_kernel" --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true || status=1
fi
exit $status
