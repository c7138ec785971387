#!/usr/bin/env bash
# Installs everything devdl needs to build, test and run its demo on Debian 12 (bookworm).
# Idempotent: apt-get skips what is already there. Run as root (or with sudo available).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git file
  # the architecture check's measure of functions and classes (scripts/check-architecture.py)
  universal-ctags
  # the linker that lays out the hit path together (libdevdl/hit_path.order)
  lld-15
  # LLVM 15 (Object, BitReader) and the SPIRV-LLVM-Translator built on it: PoCL 3 uses the same LLVM
  llvm-15 llvm-15-dev libllvmspirvlib-15-dev zlib1g-dev libzstd-dev libtinfo-dev libedit-dev libxml2-dev
  # SPIR-V parsing, validation and linking
  spirv-tools spirv-headers
  # OpenCL: the ICD loader, headers, and PoCL's CPU device (the default backend here)
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  # Level Zero loader
  libze1 libze-dev
  # hashing, tests, benchmarks
  libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev
  # compilers for test images: OpenCL C -> SPIR-V, and clang-14 for libFuzzer and sanitizers
  clang-15 llvm-spirv-15 clang-14 libclang-rt-14-dev
  # the manual pages, from docs/man/*.scd
  scdoc
  # the Python module's tests and sample (PyOpenCL over PoCL)
  python3 python3-pyopencl
  # the remote cache: hiredis and OpenSSL (their headers at build time; devdl opens the libraries
  # when asked), a Redis server for the tests and benchmarks, and openssl(1) for the TLS tests'
  # certificates
  libhiredis-dev libssl-dev redis-server openssl
  # what ocloc (Intel's offline compiler, below) runs on: Intel's graphics compiler
  libigc1 libigdfcl1 libigdgmm12
  # pip, to fetch Intel's OpenCL CPU runtime from the Python package registry (below); venv, for
  # the wheel's build tools and the fresh environments scripts/wheel.sh tests it in
  python3-pip python3-venv
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
else
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ocloc, for the tests' Intel native images, taken out of intel-opencl-icd without installing
# that package: installed, it registers Intel's OpenCL ICD, whose runtime (loaded with
# RTLD_DEEPBIND) makes every AddressSanitizer process abort, and its Level Zero driver.
ocloc_root=/opt/devdl-ocloc
if [ ! -x "$ocloc_root/usr/bin/ocloc" ]; then
  echo "setup: unpacking ocloc from intel-opencl-icd into $ocloc_root"
  work=$(mktemp -d)
  (cd "$work" && apt-get download intel-opencl-icd > /dev/null 2>&1) ||
    { $SUDO apt-get update -qq && (cd "$work" && apt-get download intel-opencl-icd > /dev/null); }
  $SUDO mkdir -p "$ocloc_root"
  $SUDO dpkg -x "$work"/intel-opencl-icd_*.deb "$ocloc_root"
  $SUDO rm -rf "$ocloc_root/etc"
  rm -rf "$work"
fi

# Intel's OpenCL CPU runtime (the runtime DPC++ uses on CPUs: OpenCL 3, SPIR-V IL), from the
# Python package registry, unpacked into $intel_root and registered nowhere: tests and benchmarks
# select it with OCL_ICD_VENDORS=$intel_root/intel-cpu.icd, which names its library by absolute
# path. The wheels' files are taken as they are (pip install would need a Python environment of
# its own, and Debian's refuses to write beside its packages).
# Beside it, one small library DPC++ built (oneMKL's data fitting: 528 kernels as SPIR-V in
# DPC++'s offload tables), a test input devdl reads and links.
intel_root=/opt/devdl-intel-ocl
intel_version=2026.2.0
if [ "$(cat "$intel_root/version" 2> /dev/null)" != "$intel_version" ]; then
  echo "setup: unpacking Intel's OpenCL CPU runtime $intel_version into $intel_root"
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check -d "$work" \
    "intel-opencl-rt==$intel_version" "intel-cmplr-lib-rt==$intel_version"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$work" \
    "onemkl-sycl-datafitting==$intel_version"
  $SUDO rm -rf "$intel_root"
  $SUDO mkdir -p "$intel_root"
  # Each wheel's files for the prefix are under NAME-VERSION.data/data/.
  for wheel in "$work"/*.whl; do
    $SUDO python3 - "$wheel" "$intel_root" <<'PY'
import os, sys, zipfile
wheel, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for info in archive.infolist():
        parts = info.filename.split('/')
        if len(parts) < 4 or not parts[0].endswith('.data') or parts[1] != 'data' or info.is_dir():
            continue
        target = os.path.join(root, *parts[2:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with archive.open(info) as source, open(target, 'wb') as out:
            out.write(source.read())
        os.chmod(target, (info.external_attr >> 16) & 0o777 or 0o644)
PY
  done
  echo "$intel_root/lib/libintelocl.so" | $SUDO tee "$intel_root/intel-cpu.icd" > /dev/null
  echo "$intel_version" | $SUDO tee "$intel_root/version" > /dev/null
  rm -rf "$work"
fi

# SYCL's device libraries as SPIR-V (25 files: libsycl-fallback-cmath.spv's __devicelib_expf and
# the others, the imf, complex and bfloat16 ones), from the last SYCL runtime on the registry that
# ships them as SPIR-V (2026's are LLVM bitcode): real, third-party SPIR-V libraries the tests
# open, list and link applications with, four of them with extensions newer than Debian's
# SPIRV-Tools. Into $intel_root/lib/sycl-spv.
sycl_spv=$intel_root/lib/sycl-spv
sycl_devicelib_version=2025.3.3
if [ "$(cat "$sycl_spv/version" 2> /dev/null)" != "$sycl_devicelib_version" ]; then
  echo "setup: unpacking the SPIR-V device libraries of intel-sycl-rt $sycl_devicelib_version into $sycl_spv"
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$work" \
    "intel-sycl-rt==$sycl_devicelib_version"
  $SUDO mkdir -p "$sycl_spv"
  $SUDO python3 - "$work"/*.whl "$sycl_spv" <<'PY'
import os, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.endswith('.spv') and '/data/lib/' in name:
            with archive.open(name) as source, open(os.path.join(target, name.rsplit('/', 1)[1]), 'wb') as out:
                out.write(source.read())
PY
  echo "$sycl_devicelib_version" | $SUDO tee "$sycl_spv/version" > /dev/null
  rm -rf "$work"
fi

# oneMKL's BLAS for SYCL (libmkl_sycl_blas.so.6, 80 MB: DPC++'s offload tables, many SPIR-V
# images, some with extensions newer than Debian's SPIRV-Tools): a flagship DPC++-built library
# devdl-nm must list whole. Into $intel_root/lib.
blas=$intel_root/lib/libmkl_sycl_blas.so.6
blas_version=2026.2.0
if [ ! -f "$blas" ]; then
  echo "setup: unpacking $(basename "$blas") of onemkl-sycl-blas $blas_version into $intel_root/lib"
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$work" \
    "onemkl-sycl-blas==$blas_version"
  $SUDO python3 - "$work"/*.whl "$blas" <<'PY'
import sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith('/data/lib/' + target.rsplit('/', 1)[1]))
    with archive.open(name) as source, open(target, 'wb') as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)
PY
  rm -rf "$work"
fi
