#!/usr/bin/env bash
# Builds devdl with its tests and runs them.
#   scripts/test.sh               the tests (build/test)
#   scripts/test.sh --sanitize    the tests built with AddressSanitizer and UBSan (build/asan)
#   scripts/test.sh --tsan        the loader's tests, threads included (over PoCL and over the
#                                 fake backend), and the CUDA link in parts, under
#                                 ThreadSanitizer (build/tsan)
#   scripts/test.sh --fuzz [S]    every parser's libFuzzer target for S seconds each (default 30;
#                                 build/fuzz with clang-14), seeded from build/test
#   scripts/test.sh --portable    the portable library (DEVDL_PORTABLE: LLVM linked in, no SPIR
#                                 translator of its own), as the GPU machine gets it, its unit and loader
#                                 tests, and its hit path's layout (build/portable, which
#                                 scripts/gpu-build.sh shares)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
configure() {  # DIR, then CMake options
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
  cmake --build "$dir" -j "$jobs"
}
case "${1:-}" in
  "")
    configure build/test -DDEVDL_BUILD_TESTS=ON
    ctest --test-dir build/test --output-on-failure -j "$jobs"
    ;;
  --sanitize)
    configure build/asan -DDEVDL_BUILD_TESTS=ON -DDEVDL_BUILD_BENCH=OFF -DDEVDL_BUILD_SAMPLES=OFF -DDEVDL_SANITIZE=ON
    # use_sigaltstack=0: LLVM (PoCL's, in threads that link) replaces a thread's alternate signal
    # stack, which ASan then fails to unmap as the thread ends. intercept_tls_get_addr=0: GCC 12's
    # ASan takes a dynamic TLS block that malloc put 16 bytes into a page for one with glibc 2.18's
    # header, and LeakSanitizer then scans a range of garbage and crashes (a test binary's layout
    # decides it: adding a test did). Those blocks are malloc's, which LeakSanitizer scans anyway.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:use_sigaltstack=0:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
      LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 ctest --test-dir build/asan --output-on-failure -j "$jobs"
    ;;
  --tsan)
    cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEVDL_BUILD_TESTS=ON \
      -DDEVDL_BUILD_BENCH=OFF -DDEVDL_BUILD_SAMPLES=OFF -DDEVDL_TSAN=ON
    cmake --build build/tsan -j "$jobs" --target devdl_dlopen_tests devdl_loader_tests devdl_unit_tests
    # NvJitLink.*: a CUDA link in parts, each on a thread of its own (where the toolkit is here).
    TSAN_OPTIONS=halt_on_error=1:suppressions=$PWD/tests/tsan.supp ctest --test-dir build/tsan --output-on-failure -j "$jobs" \
      -R '^(Threads|DeviceDlopen|Instances|TwoDevices|Loader[A-Za-z]+|NvJitLink)\.'
    ;;
  --fuzz)
    [ -d build/test/tests/images ] || configure build/test -DDEVDL_BUILD_TESTS=ON
    configure build/fuzz -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DDEVDL_FUZZ=ON \
      -DDEVDL_BUILD_TESTS=OFF -DDEVDL_BUILD_SAMPLES=OFF
    tests/fuzz/run-fuzzers.sh build/fuzz build/test "${2:-30}"
    ;;
  --portable)
    cmake -S . -B build/portable -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEVDL_PORTABLE=ON -DDEVDL_BUILD_TESTS=ON
    cmake --build build/portable -j "$jobs" --target devdl devdl_unit_tests devdl_loader_tests
    DEVDL_CACHE=0 build/portable/tests/devdl_unit_tests
    DEVDL_CACHE=0 build/portable/tests/devdl_loader_tests
    ctest --test-dir build/portable --output-on-failure -R '^HitPath\.'
    ;;
  *) echo "usage: scripts/test.sh [--sanitize | --tsan | --fuzz [SECONDS] | --portable]" >&2; exit 2 ;;
esac
