#!/usr/bin/env bash
# AMReX's case (bench/many_programs/CMakeLists.txt): one library of relocatable device code and
# PROGRAMS programs using it, built as CMake builds them today (a static library, nvcc -dlink in
# every program) and with devdl (a shared library, linked at load time), side by side.
#   bench/many_programs.sh build DEVDL_DIR WORK [PROGRAMS [LIBRARY.cu]]   where nvcc is: the
#       programs' build time, the library (default tests/data/cuda/lib_large.cu) built first and
#       apart (it is the same work both ways), each way twice
#   bench/many_programs.sh run WORK                          on the GPU machine: every program
#       once, in turn, from a cold start (devdl: the library linked once, then from the disk cache)
set -euo pipefail
cd "$(dirname "$0")/.."
source=$PWD/bench/many_programs
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
case "${1:-}" in
  build)
    devdl_dir=$2 work=$3 programs=${4:-20} library=${5:-$PWD/tests/data/cuda/lib_large.cu}
    mkdir -p "$work"
    for way in static devdl; do
      flag=OFF; [ "$way" = devdl ] && flag=ON
      cmake -S "$source" -B "$work/$way" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEVDL=$flag -DPROGRAMS="$programs" \
        -DLIBRARY_SOURCE="$library" -Ddevdl_DIR="$devdl_dir" --no-warn-unused-cli > "$work/$way.configure.log"
      cmake --build "$work/$way" --target physics > /dev/null
    done
    for round in 1 2; do
      for way in static devdl; do
        ninja -C "$work/$way" -t clean programs > /dev/null
        start=$(now)
        cmake --build "$work/$way" --target programs -j "$(nproc)" > /dev/null
        seconds=$(since "$start")
        echo "round $round: $way: $programs programs built in $seconds s"
        eval "${way}_$round=$seconds"
      done
    done
    ratio=$(awk -v d="$devdl_1 + $devdl_2" -v s="$static_1 + $static_2" 'BEGIN { split(d, x, " [+] "); split(s, y, " [+] "); printf "%.3f", (x[1] + x[2]) / (y[1] + y[2]) }')
    echo "devdl / static: $ratio (the sum of two rounds each, $(nproc) cores)"
    ;;
  run)
    work=$2
    for way in static devdl; do
      cache=$(mktemp -d)
      start=$(now)
      for program in "$work/$way"/program_*; do
        DEVDL_CACHE_DIR=$cache "$program" | grep -q "^cudaSuccess" || { echo "$program failed" >&2; exit 1; }
      done
      echo "$way: every program run once in $(since "$start") s"
      rm -rf "$cache"
    done
    ;;
  *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
