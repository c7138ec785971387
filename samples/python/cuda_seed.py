"""The seeds' example in CUDA from Python, launched as CuPy launches its RawKernels:
python3 cuda_seed.py IMAGES (lib.cubin and app.cubin, built with nvcc -rdc=true -cubin)."""
import sys

import cupy

import devdl

devdl.open(f"{sys.argv[1]}/lib.cubin", devdl.NOW | devdl.GLOBAL)  # exports LibDeviceFunc
kernel = devdl.open(f"{sys.argv[1]}/app.cubin").kernel("AppKernel")  # a devdl.CudaKernel
out = cupy.zeros(8, cupy.int32)  # CuPy and devdl share the device's primary context
kernel((1,), (8,), (out,))       # grid, block, arguments: on CuPy's current stream
print(*out.get())
