"""The seeds' example in Python with PyOpenCL: python3 seed.py IMAGES (lib.spv and app.spv)."""
import sys, numpy, pyopencl as cl, devdl

devdl.open(f"{sys.argv[1]}/lib.spv", devdl.NOW | devdl.GLOBAL)  # exports LibDeviceFunc
app = devdl.open(f"{sys.argv[1]}/app.spv")                       # AppKernel imports it
context, device, queue = devdl.opencl()
out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, 8 * 4)
app.kernel("AppKernel")(queue, (8,), None, out)
result = numpy.empty(8, numpy.int32)
cl.enqueue_copy(queue, result, out)
print(*result)
