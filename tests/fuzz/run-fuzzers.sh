#!/usr/bin/env bash
# Runs every fuzz target for a bounded time. Usage: run-fuzzers.sh FUZZ_BUILD TEST_BUILD [SECONDS]
# Each target starts from the test images (bundles of images that link among them too) and host
# libraries of TEST_BUILD (a build with the tests), from inputs the build does not make
# (tests/data/fuzz-seeds: a disk cache entry, a program binary as the OpenCL backend stores it, an
# image file's summary), from the inputs that once crashed a parser (tests/data/fuzz-regressions),
# and from the four SYCL device libraries Debian's SPIRV-Tools cannot vouch for, as
# scripts/setup-debian.sh fetched them (SYCL_SPIRV, unchanged; the larger two are cut at -max_len).
# Inputs that fail are left in FUZZ_BUILD/fuzz-artifacts.
set -euo pipefail
build=$1 tests=$2 seconds=${3:-30}
here=$(cd "$(dirname "$0")" && pwd)
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$build/fuzz-artifacts"
export LSAN_OPTIONS="suppressions=$here/../lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
sycl=${SYCL_SPIRV:-/opt/devdl-intel-ocl/lib/sycl-spv}
unvouched=()
for name in libsycl-fallback-imf libsycl-fallback-imf-fp64 libsycl-bfloat16 libsycl-native-bfloat16; do
  [ -f "$sycl/$name.spv" ] && unvouched+=("$sycl/$name.spv")
done
status=0
for target in "$build"/tests/fuzz/fuzz_*; do
  name=$(basename "$target")
  mkdir -p "$corpus/$name"
  cp "$tests"/tests/images/* "$tests"/tests/*.so "$here"/../data/fuzz-seeds/* "$here"/../data/fuzz-regressions/* \
     "$corpus/$name/"
  [ ${#unvouched[@]} -eq 0 ] || cp "${unvouched[@]}" "$corpus/$name/"
  if "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-artifacts/$name-" "$corpus/$name" > "$corpus/$name.log" 2>&1; then
    echo "fuzz: $name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$corpus/$name.log" | grep -o '[0-9]*$') inputs in ${seconds}s, no failure"
  else
    echo "fuzz: $name FAILED"
    grep -E "ERROR|SUMMARY|^ +#[0-9]+ " "$corpus/$name.log" | head -n 40
    status=1
  fi
done
exit $status
