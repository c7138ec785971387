#!/usr/bin/env bash
# The SPIR-V extensions an OpenCL driver compiles, tried one at a time: a module that declares one
# extension and nothing else of it, given to clCreateProgramWithIL and clCompileProgram in a
# process of its own (Intel's CPU runtime ends the process on an extension it does not know).
# Prints the names taken, sorted: the list libdevdl/backend/opencl/spirv_extensions.cpp keeps for
# a driver that reports fewer than it takes.
#   scripts/spirv-extensions-taken.sh ICD_FILE [DRIVER_LIBRARY...]
# The names tried: those the SPIRV-LLVM-Translator 15 knows, and every SPV_ string in the driver's
# libraries (default: every library beside the one the ICD file names). Needs a C compiler, the OpenCL
# headers and ICD loader, and spirv-as (scripts/setup-debian.sh installs them).
set -euo pipefail
icd=$1; shift
libraries=("$@")
[ ${#libraries[@]} -gt 0 ] || libraries=("$(dirname "$(cat "$icd")")"/*.so*)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/probe.c" <<'C'
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  FILE *file = fopen(argv[1], "rb");
  static char il[1 << 16];
  size_t size = fread(il, 1, sizeof il, file);
  cl_platform_id platform;
  cl_device_id device;
  cl_int err = clGetPlatformIDs(1, &platform, NULL);
  if (!err) err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  if (err) return 2;
  cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_program program = clCreateProgramWithIL(context, il, size, &err);
  return err || clCompileProgram(program, 1, &device, "", 0, NULL, NULL, NULL, NULL) ? 1 : 0;
}
C
cc "$work/probe.c" -o "$work/probe" -lOpenCL
{
  grep -o 'EXT(SPV_[A-Za-z0-9_]*)' /usr/include/LLVMSPIRVLib/LLVMSPIRVExtensions.inc | sed 's/EXT(\(.*\))/\1/'
  strings "${libraries[@]}" 2>/dev/null | grep -E '^SPV_[A-Za-z0-9_]+$' || true
} | sort -u > "$work/names"
while read -r name; do
  printf 'OpCapability Addresses\nOpCapability Kernel\nOpExtension "%s"\nOpMemoryModel Physical64 OpenCL\n' "$name" \
    > "$work/module.spvasm"
  spirv-as --target-env spv1.2 "$work/module.spvasm" -o "$work/module.spv" 2>/dev/null || continue
  if OCL_ICD_VENDORS=$icd "$work/probe" "$work/module.spv" >/dev/null 2>&1; then echo "$name"; fi
done < "$work/names"
