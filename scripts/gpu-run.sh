#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with build/portable/stage made here by
# scripts/gpu-build.sh: the CUDA tests, the CUDA samples (C and Python), and the CUDA benchmarks;
# with CUDA_SAMPLES set to a checkout of NVIDIA's cuda-samples there, scripts/cuda-samples.sh's
# build and run of them, as shipped and through devdl.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=build/portable/stage
export LD_LIBRARY_PATH=$PWD/$stage/lib
export DEVDL_TEST_IMAGES=$PWD/$stage/images
export DEVDL_TEST_REDIS_SERVER=$PWD/$stage/redis/redis-server  # for the remote cache's benchmark
export DEVDL_TEST_FIRST_USE_PROBE=$PWD/$stage/bin/devdl_first_use_probe  # for the suite
status=0
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader

echo "== tests"
# Each GPU in turn as devdl's default device (DEVDL_DEVICE): on a pair, the suite on each, and
# TwoGpus.* there with the other as the second.
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
export DEVDL_TEST_SCRATCH=$(mktemp -d)
suite=$stage/bin/devdl_suite_tests
tests=$("$suite" --gtest_list_tests | awk '/^[^ ]/ { s = $1 } /^  [^ ]/ && $1 !~ /^DISABLED_/ { print s $1 }')
for ((gpu = 0; gpu < (gpus > 0 ? gpus : 1); ++gpu)); do
  export DEVDL_DEVICE=$gpu
  echo "-- GPU $gpu"
  # The disk cache is off, as under ctest; the tests across processes give their processes one.
  DEVDL_CACHE=0 "$stage/bin/devdl_cuda_tests" "$@" || status=1
  # The suite every backend runs (tests/e2e/dlopen_fixture.h), on CUDA: each test in a process of
  # its own, as ctest runs it, so that each starts with an empty global scope.
  declare -A outcomes=()
  for test in $tests; do
    out=$(DEVDL_CACHE=0 DEVDL_BACKEND=cuda "$suite" --gtest_filter="$test" 2>&1)
    if grep -q "^\[  FAILED  \] $test " <<< "$out"; then outcome=FAILED
    elif grep -q "^\[  SKIPPED \] $test " <<< "$out"; then outcome=SKIPPED
    elif grep -q "^\[       OK \] $test " <<< "$out"; then outcome=PASSED
    else outcome=FAILED  # it did not finish
    fi
    outcomes[$outcome]=$((${outcomes[$outcome]:-0} + 1))
    case $outcome in
      PASSED) ;;
      SKIPPED) [ "$gpu" = 0 ] && echo "$test: skipped: $(grep -A1 ': Skipped$' <<< "$out" | tail -1)" ;;
      *) echo "$out"; echo "$test: FAILED"; status=1 ;;
    esac
  done
  echo "devdl_suite_tests on CUDA, GPU $gpu: ${outcomes[PASSED]:-0} passed, ${outcomes[SKIPPED]:-0} skipped, ${outcomes[FAILED]:-0} failed"
done
unset DEVDL_DEVICE

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

echo "== the wheel, installed in a fresh virtual environment (no package registry here)"
if [ -n "$(ls "$stage"/wheel/devdl-*.whl 2> /dev/null)" ]; then
  wheel_work=$(mktemp -d)
  venv=$wheel_work/venv
  python3 -m venv "$venv"
  run "$venv/bin/pip" install -q --no-index --no-deps "$stage"/wheel/devdl-*.whl
  # This machine's CUDA Python packages (CuPy, cuda.core, NumPy, pytest), where its python3 has
  # them, seen from the fresh environment: nothing of devdl's comes from there.
  python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
    "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/machine.pth"
  (cd "$wheel_work" && env -u LD_LIBRARY_PATH DEVDL_TEST_IMAGES="$DEVDL_TEST_IMAGES" DEVDL_CACHE=0 \
     "$venv/bin/python" -m pytest -v -p no:cacheprovider "$OLDPWD/tests/wheel/test_cuda.py") || status=1
  # The Python sample with the wheel's module (nothing of the tree's on its path).
  out=$(env -u LD_LIBRARY_PATH DEVDL_CACHE=0 "$venv/bin/python" samples/python/cuda_seed.py "$s")
  echo "samples/python/cuda_seed.py with the wheel: $out"
  [ "$out" = "0 2 4 6 8 10 12 14" ] || status=1
  # A CMake project against the wheel's package: the seeds' example in CUDA.
  if cmake -S tests/wheel/cuda -B "$wheel_work/cmake" -Ddevdl_DIR="$("$venv/bin/python" -m devdl --cmake-dir)" \
       -DSEED="$PWD/samples/cuda-seed" > "$wheel_work/cmake.log" 2>&1 &&
     cmake --build "$wheel_work/cmake" >> "$wheel_work/cmake.log" 2>&1; then
    out=$(env -u LD_LIBRARY_PATH DEVDL_CACHE=0 "$wheel_work/cmake/cuda-seed" "$s/lib.cubin" "$s/app.cubin")
    echo "the CMake project against the wheel: $out"
    [ "$out" = "0 2 4 6 8 10 12 14" ] || status=1
  else
    cat "$wheel_work/cmake.log"; echo "the CMake project against the wheel did not build"; status=1
  fi
else
  echo "no wheel in $stage/wheel (scripts/gpu-build.sh makes it)"; status=1
fi

echo "== the CUDA runtime's programs whose device code spans shared libraries (samples/cuda-runtime)"
rt=$s/cuda-runtime
runtime() { echo "\$ $*"; LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE=0 "$@" || status=1; }
runtime "$rt/cuda-runtime" "$rt/libcuda-runtime-plugin.so"
runtime "$rt/cuda-runtime" --global "$rt/libcuda-runtime-plugin.so"
runtime env LD_PRELOAD=$PWD/$rt/libcudapatch.so CUDA_RUNTIME_SAMPLE_PATCHED=1 "$rt/cuda-runtime" "$rt/libcuda-runtime-plugin.so"
runtime "$rt/cuda-runtime" --broken "$rt/libcuda-runtime-broken.so" "$rt/libcuda-runtime-plugin.so"
runtime "$rt/cuda-runtime" --reopen 300 "$rt/libcuda-runtime-plugin.so"
# A library loaded with the program whose device code cannot link ends it before main, as ld.so.
echo "\$ cuda-runtime-broken-program"
out=$(LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE=0 "$rt/cuda-runtime-broken-program" 2>&1); code=$?
echo "$out"; echo "exit status $code"
[ "$code" = 127 ] && grep -q "device symbol lookup error: .*undefined device symbol" <<< "$out" || status=1
echo "== CUDA as it is written in the wild (samples/cuda-wild)"
w=$s/cuda-wild
for mode in --global --local; do
  runtime env LD_LIBRARY_PATH=$PWD/$w:$LD_LIBRARY_PATH "$w/cuda-wild" $mode "$w/libcuda-wild-plugin-a.so" "$w/libcuda-wild-plugin-b.so"
done
# The tools name a kernel and its source line in the program devdl linked, for a library
# registered as the program starts (before main: devdl initializes the tools compute-sanitizer
# preloads before it starts CUDA there) and for one opened after main.
faulty_runs=("$rt/cuda-runtime-faulty-program" "$rt/cuda-runtime-plugin-host $rt/libcuda-runtime-faulty.so")
if command -v compute-sanitizer > /dev/null; then
  for command in "${faulty_runs[@]}"; do
    echo "\$ compute-sanitizer --tool memcheck ${command//$rt\//}"
    # shellcheck disable=SC2086 # the command and its argument
    LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE=0 compute-sanitizer --tool memcheck $command \
      > /tmp/devdl-memcheck.log 2>&1
    grep -m1 -E "at faulty_kernel\(int \*\)\+0x[0-9a-f]+ in .*faulty\.cu:[0-9]+" /tmp/devdl-memcheck.log || status=1
    if grep "initialized before the Sanitizer" /tmp/devdl-memcheck.log; then status=1; fi
  done
  # The sample whole, its libraries registered before main: memcheck on, and nothing to report.
  echo "\$ compute-sanitizer --tool memcheck cuda-runtime libcuda-runtime-plugin.so"
  LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE=0 compute-sanitizer --tool memcheck \
    "$rt/cuda-runtime" "$rt/libcuda-runtime-plugin.so" > /tmp/devdl-memcheck.log 2>&1
  grep -E "initialized before the Sanitizer|ERROR SUMMARY|^all right|FAILED" /tmp/devdl-memcheck.log
  grep -q "ERROR SUMMARY: 0 errors" /tmp/devdl-memcheck.log && grep -q "^all right" /tmp/devdl-memcheck.log &&
    ! grep -q "initialized before the Sanitizer" /tmp/devdl-memcheck.log || status=1
else
  echo "no compute-sanitizer here"
fi
if command -v cuda-gdb > /dev/null; then
  for command in "${faulty_runs[@]}"; do
    echo "\$ cuda-gdb -batch -ex 'break faulty_kernel' -ex run ${command//$rt\//}"
    # shellcheck disable=SC2086 # the command and its argument
    LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE=0 timeout 300 cuda-gdb -batch -ex 'set breakpoint pending on' \
      -ex 'break faulty_kernel' -ex run --args $command > /tmp/devdl-cuda-gdb.log 2>&1
    grep -m1 -E "hit Breakpoint .*faulty_kernel.* at .*faulty\.cu:[0-9]+" /tmp/devdl-cuda-gdb.log || status=1
  done
else
  echo "no cuda-gdb here"
fi
# -dlto objects, linked with nvJitLink -lto (the program checks its results).
echo "\$ bench_first_kernel_devdl_lto"
LD_LIBRARY_PATH=$PWD/$stage/bench-programs:$LD_LIBRARY_PATH DEVDL_CACHE=0 DEVDL_DEBUG=statistics \
  "$stage/bench-programs/bench_first_kernel_devdl_lto" > /tmp/devdl-lto.log 2>&1 || { cat /tmp/devdl-lto.log; status=1; }
grep -m2 -E "nvJitLink" /tmp/devdl-lto.log
# A second process loads what the first linked and stored.
cache=$(mktemp -d)
for process in first second; do
  echo "-- $process process"
  LD_LIBRARY_PATH=$PWD/$rt:$LD_LIBRARY_PATH DEVDL_CACHE_DIR=$cache DEVDL_DEBUG=statistics \
    "$rt/cuda-runtime" "$rt/libcuda-runtime-plugin.so" 2>&1 | grep -E "^devdl: program for|all right|FAILED" || status=1
done

# NVIDIA's cuda-samples, as shipped and through devdl (scripts/cuda-samples.sh), where a checkout is.
if [ -n "${CUDA_SAMPLES:-}" ]; then
  echo "== NVIDIA's cuda-samples ($CUDA_SAMPLES), as shipped and through devdl"
  samples_work=$(mktemp -d)
  scripts/cuda-samples.sh build "$CUDA_SAMPLES" "$samples_work" "$(dirname "$(find "$stage/devdl" -name devdlConfig.cmake | head -n 1)")" ||
    status=1
  LD_LIBRARY_PATH=$PWD/$stage/devdl/lib:$LD_LIBRARY_PATH scripts/cuda-samples.sh run "$samples_work" || status=1
else
  echo "== NVIDIA's cuda-samples: not run (CUDA_SAMPLES names no checkout)"
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

# DEVDL_GPU_BENCH: all (default), none, lto (load-time LTO's benchmarks alone), or runtime (CUDA
# runtime programs linked at load time against nvcc's static device link alone).
bench=${DEVDL_GPU_BENCH:-all}
if [ "$bench" = all ] || [ "$bench" = runtime ]; then
  echo "== benchmarks: CUDA runtime programs, devdl's load-time link against nvcc's static one"
  # The anchor, built here: nvcc's -dlto device link needs the toolkit's libnvvm.
  programs=$PWD/$stage/bench-programs
  for lto in "" "-dlto"; do
    nvcc -rdc=true -arch=sm_90 $lto -cudart shared -o "$programs/first_kernel_static${lto:+_lto}" \
      bench/cuda_runtime/first_kernel.cu bench/cuda_runtime/hot_step.cu || status=1
  done
  LD_LIBRARY_PATH=$programs:$LD_LIBRARY_PATH DEVDL_BENCH_PROGRAMS=$programs "$stage/bin/bench_cuda_runtime" || status=1
  [ "$bench" = runtime ] && bench=none
fi
if [ "$bench" != none ]; then
  echo "== benchmarks"
  if [ "$bench" = all ]; then
    "$stage/bin/bench_cuda_first_kernel" --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true || status=1
    "$stage/bin/bench_cache" --benchmark_filter=Cuda || status=1
    # device_dlsym of a linked kernel, and of 1,000 (a handle's, the global scope's), from 1 to
    # 16 threads, against glibc's dlsym.
    "$stage/bin/bench_threads" --cuda --benchmark_repetitions=3 --benchmark_report_aggregates_only=true || status=1
    # Eight threads' first use against one's, in fresh processes.
    "$stage/bin/bench_first_use" --cuda || status=1
    # The second GPU's first kernel against a disk-cache hit, and N GPUs' set-up (where there are two).
    "$stage/bin/bench_devices" --cuda || status=1
  else
    "$stage/bin/bench_cache" \
      --benchmark_filter='Cuda(CuLink|Lto|LargeLibraryLto|LargeLibraryNoLto|ThousandKernelsLto|OneKernelLto)' || status=1
    # Where a cold LTO link's time goes, in nvJitLink's own words (-time) and devdl's, on one
    # thread and on every CPU (the driver's JIT cache off, as in the benchmarks).
    for jobs in 1 ""; do
      for lib in lib_large lib_kernels1000; do
        echo "\$ DEVDL_JOBS=$jobs cuda-seed $lib.lto.fatbin app.lto.fatbin"
        DEVDL_JOBS=$jobs DEVDL_CACHE=0 CUDA_CACHE_DISABLE=1 DEVDL_DEBUG=statistics "$stage/bin/cuda-seed" \
          "$DEVDL_TEST_IMAGES/$lib.lto.fatbin" "$DEVDL_TEST_IMAGES/app.lto.fatbin" 2>&1 |
          grep -E "nvJitLink|part [0-9]|cuModuleLoadData|loaded a program|^[0-9]+ [0-9]+ " || status=1
      done
    done
  fi
  # Kernel time: one source file, cuLink, nvJitLink with and without LTO; a library's variable
  # stepped in one program and reached in another's.
  "$stage/bin/bench_lto" --benchmark_filter=Cuda || status=1
  # What reaching that variable costs the application's link.
  "$stage/bin/bench_instances" --cuda || status=1
fi
exit $status
