"""The seeds' example in CUDA from Python, launched by CuPy: python3 cuda_seed.py IMAGES
(lib.cubin and app.cubin, built with nvcc -rdc=true -cubin)."""
import ctypes, sys, cupy, devdl

devdl.open(f"{sys.argv[1]}/lib.cubin", devdl.NOW | devdl.GLOBAL)  # exports LibDeviceFunc
kernel = devdl.open(f"{sys.argv[1]}/app.cubin").kernel("AppKernel")  # a CUfunction, as an int
out = cupy.zeros(8, cupy.int32)  # CuPy and devdl share the device's primary context
pointer = ctypes.c_void_p(out.data.ptr)
arguments = (ctypes.c_void_p * 1)(ctypes.addressof(pointer))
cupy.cuda.driver.launchKernel(kernel, 1, 1, 1, 8, 1, 1, 0, 0, ctypes.addressof(arguments), 0)
print(*out.get())
