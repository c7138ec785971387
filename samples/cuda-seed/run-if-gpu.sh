#!/bin/sh
# Runs a CUDA sample where the NVIDIA driver is installed; elsewhere says why and exits 77,
# which the tests count as skipped.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  echo "skipped: no CUDA driver (libcuda.so.1) on this machine"
  exit 77
fi
exec "$@"
