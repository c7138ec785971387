#!/usr/bin/env bash
# Builds, here on Debian, what the CUDA checks need on the GPU machine, which has the NVIDIA
# driver and toolkit but none of Debian's packages: a portable libdevdl.so (LLVM, xxHash and
# zstd linked in: DEVDL_PORTABLE), the CUDA tests, samples and benchmark linked against it, the
# images nvcc made, and the wheel. All of it goes to build/portable/stage (some 50 MiB), which
# scripts/gpu-run.sh runs there. Needs nvcc here (/usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/portable
stage=$build/stage
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEVDL_PORTABLE=ON > /dev/null
ninja -C "$build" -j "$(nproc)" devdl devdl_cuda_tests devdl_suite_tests devdl_first_use_probe \
  bench_cuda_first_kernel bench_cache bench_threads bench_first_use bench_lto bench_devices bench_instances \
  devdl-cache devdl_test_images bench_lto_images \
  cuda-seed cuda-seed-linked cuda_seed_images seed-dlopen \
  cuda-runtime cuda-runtime-plugin cuda-runtime-broken cudapatch cuda-runtime-faulty cuda-runtime-faulty-program \
  cuda-runtime-plugin-host cuda-runtime-broken-linked cuda-runtime-broken-program \
  cuda-wild cuda-wild-plugin-a cuda-wild-plugin-b devdl-nm devdl-pack devdl_man_pages \
  bench_cuda_runtime bench_first_kernel_devdl bench_first_kernel_devdl_lto
if [ ! -x "$build/samples/cuda-seed/cuda-seed" ]; then
  echo "gpu-build: no CUDA toolkit here (nvcc, cuda.h): nothing to run on the GPU" >&2
  exit 1
fi

rm -rf "$stage"
mkdir -p "$stage/lib" "$stage/bin" "$stage/images" "$stage/samples"
cp -P "$build"/libdevdl/libdevdl.so "$build"/libdevdl/libdevdl.so.0 "$stage/lib/"
strip -o "$stage/lib/$(readlink "$build/libdevdl/libdevdl.so.0")" "$build/libdevdl/libdevdl.so.0"
cp -P "$build"/samples/cuda-seed/libcudaseedlib.so "$stage/lib/"
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian "$stage/lib/"  # no static Google Benchmark in Debian
# The remote cache's benchmark there: hiredis (devdl opens it at run time) and Debian's
# redis-server, with the libraries it needs beyond the C and C++ runtimes, behind a script that
# points it at them (DEVDL_TEST_REDIS_SERVER, set by gpu-run.sh).
cp -L /usr/lib/x86_64-linux-gnu/libhiredis.so.0.14 "$stage/lib/"
mkdir -p "$stage/redis/lib"
cp -L /usr/bin/redis-server "$stage/redis/redis-server.bin"
ldd /usr/bin/redis-server | awk '$3 ~ /^\// { print $3 }' | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s)\.so' |
  xargs -I{} cp -L {} "$stage/redis/lib/"
printf '#!/bin/sh\nd=$(dirname "$0")\nLD_LIBRARY_PATH=$d/lib exec "$d/redis-server.bin" "$@"\n' > "$stage/redis/redis-server"
chmod +x "$stage/redis/redis-server"
cp "$build"/tests/devdl_cuda_tests "$build"/tests/devdl_suite_tests "$build"/tests/devdl_first_use_probe \
   "$build"/bench/bench_cuda_first_kernel "$build"/bench/bench_cache "$build"/bench/bench_threads \
   "$build"/bench/bench_first_use "$build"/bench/bench_devices \
   "$build"/bench/bench_lto "$build"/bench/bench_instances \
   "$build"/tools/devdl-cache/devdl-cache \
   "$build"/samples/cuda-seed/cuda-seed "$build"/samples/cuda-seed/cuda-seed-linked "$stage/bin/"
# The suite opens the SPIR-V seed and SPIR bitcode too (no candidates on CUDA).
cp "$build"/tests/images/*.cubin "$build"/tests/images/*.ptx "$build"/tests/images/*.fatbin \
   "$build"/tests/images/*.devdl "$build"/tests/images/lib.spv "$build"/tests/images/*.bc "$stage/images/"
cp "$build"/bench/images/*.cubin "$build"/bench/images/*.ptx "$build"/bench/images/*.fatbin "$stage/images/"
cp "$build"/samples/cuda-seed/*.cubin "$build"/samples/cuda-seed/*.ptx "$stage/samples/"
# The CUDA runtime's sample (samples/cuda-runtime), with the shared CUDA runtime it was built
# against.
mkdir -p "$stage/samples/cuda-runtime"
cp "$build"/samples/cuda-runtime/cuda-runtime "$build"/samples/cuda-runtime/cuda-runtime-plugin-host \
   "$build"/samples/cuda-runtime/cuda-runtime-faulty-program \
   "$build"/samples/cuda-runtime/*.so "$stage/samples/cuda-runtime/"
cp -L "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")"/../lib64/libcudart.so.13 \
  "$stage/samples/cuda-runtime/"
cp "$build"/samples/cuda-runtime/cuda-runtime-broken-program "$stage/samples/cuda-runtime/"
# CUDA as it is written in the wild (samples/cuda-wild): Thrust, managed memory, dynamic
# parallelism and plugins sharing a static library, across shared libraries.
mkdir -p "$stage/samples/cuda-wild"
cp "$build"/samples/cuda-wild/cuda-wild "$build"/samples/cuda-wild/*.so "$stage/samples/cuda-wild/"
# devdl installed (the library, devdl-pack, the CMake package) for scripts/cuda-samples.sh, which
# builds NVIDIA's samples there against it.
cmake --install "$build" --prefix "$stage/devdl" --strip > /dev/null
# bench_cuda_runtime's programs linked at load time by devdl (gpu-run.sh builds nvcc's there).
mkdir -p "$stage/bench-programs"
cp "$build"/bench/bench_cuda_runtime "$stage/bin/"
cp "$build"/bench/cuda_runtime/bench_first_kernel_devdl* "$build"/bench/cuda_runtime/*.so "$stage/bench-programs/"
# The OpenCL seed example, for OpenCL devices that take SPIR-V IL (the portable build translates
# to SPIR only with the machine's llvm-spirv-15).
cp "$build"/samples/seed-example/seed-dlopen "$stage/bin/"
cp "$build"/samples/seed-example/*.spv "$stage/samples/"
# The wheel (scripts/wheel.sh), which gpu-run.sh installs in a fresh virtual environment there.
scripts/wheel.sh --no-test > /dev/null
mkdir -p "$stage/wheel"
cp build/wheel/dist/devdl-*.whl "$stage/wheel/"
du -sh "$stage"
