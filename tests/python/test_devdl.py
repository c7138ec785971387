"""The Python module (python/devdl) over the built libdevdl.so and PyOpenCL on PoCL.
Usage: test_devdl.py IMAGES (the tests' image folder); DEVDL_LIBRARY names the library."""
import gc
import os
import sys
import unittest

import numpy
import pyopencl as cl

import devdl

IMAGES = sys.argv.pop(1)


def image(name):
    return os.path.join(IMAGES, name)


def run(kernel, n, dtype=numpy.int32):
    context, _, queue = devdl.opencl()
    out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, n * numpy.dtype(dtype).itemsize)
    kernel(queue, (n,), None, out)
    result = numpy.empty(n, dtype)
    cl.enqueue_copy(queue, result, out)
    return list(result)


class Module(unittest.TestCase):
    def test_version_is_the_headers(self):
        with open(os.path.join(os.path.dirname(__file__), "../../include/devdl.h")) as header:
            text = header.read()
        expected = tuple(int(text.split("#define DEVDL_VERSION_%s " % part)[1].split()[0])
                         for part in ("MAJOR", "MINOR", "PATCH"))
        self.assertEqual(devdl.version(), expected)

    def test_seed_example(self):
        lib = devdl.open(image("lib.spv"), devdl.NOW | devdl.GLOBAL)
        with devdl.open(image("app.spv")) as app:
            kernel = app.kernel("AppKernel")
            self.assertIsInstance(kernel, cl.Kernel)
            self.assertEqual(kernel.context, devdl.opencl().context)
            self.assertEqual(run(kernel, 8), [0, 2, 4, 6, 8, 10, 12, 14])
            info = app.info("LibDeviceFunc")
            self.assertEqual((info.kind, info.file, info.image, info.format),
                             ("function", image("lib.spv"), 0, "spirv"))
            self.assertIn("LibDeviceFunc", app.plan("AppKernel"))
        lib.close()

    def test_an_address_is_named_by_the_variable_it_lies_in(self):
        # PoCL's program variables, which devdl places in host memory: device_dladdr names them.
        with devdl.open(image("pointer_var.spv")) as handle:
            target = handle.sym("Target")
            self.assertEqual(devdl.address(target + 2),
                             devdl.AddressInfo(image("pointer_var.spv"), 0, "Target", target, 2, "variable"))
            self.assertIsNone(devdl.address(8))

    def test_errors_name_symbol_and_file(self):
        with self.assertRaises(devdl.error) as caught:
            devdl.open(image("app.spv"))  # its import is in no image loaded
        self.assertIn("LibDeviceFunc", str(caught.exception))
        self.assertIn(image("app.spv"), str(caught.exception))
        with self.assertRaisesRegex(devdl.error, "no-such.spv"):
            devdl.open(image("no-such.spv"))
        with devdl.open(image("lib.spv"), devdl.LAZY) as lib:
            with self.assertRaisesRegex(devdl.error, "NoSuchKernel"):
                lib.sym("NoSuchKernel")

    def test_specialization_constant_changes_the_result(self):
        with devdl.open(image("spec_kernel.spv"), devdl.LAZY) as spec:
            import ctypes
            spec.specialize(3, ctypes.c_uint32(10))  # Scale; Offset stays 5
            self.assertEqual(run(spec.kernel("SpecKernel"), 4, numpy.uint32), [5, 15, 25, 35])
            with self.assertRaisesRegex(devdl.error, "99"):
                spec.specialize(99, ctypes.c_uint32(1))

    def test_variables_are_read_and_written(self):
        import ctypes
        with devdl.open(image("lib.spv"), devdl.LAZY) as lib:
            self.assertEqual(lib.read("LibCounter", 4), bytes(ctypes.c_int32(7)))
            lib.write("LibCounter", ctypes.c_int32(42))
            self.assertEqual(int.from_bytes(lib.read("LibCounter", 4), "little"), 42)
            with self.assertRaisesRegex(devdl.error, "4 at offset 2 are outside it"):
                lib.read("LibCounter", 4, offset=2)

    def test_open_memory(self):
        with open(image("lib.spv"), "rb") as f:
            lib = devdl.open_memory(f.read(), "lib-in-memory", devdl.NOW | devdl.GLOBAL)
        with devdl.open(image("app.spv")) as app:
            self.assertEqual(app.info("LibDeviceFunc").file, "lib-in-memory")
            self.assertEqual(run(app.kernel("AppKernel"), 4), [0, 2, 4, 6])
        lib.close()

    def test_open_memory_keeps_its_bytes_while_the_c_handle_is_open(self):
        # A Handle dropped without close() leaves its C handle open, as dlopen's: its bytes stay
        # devdl's, so other bytes of the same size, opened next, are never taken for them.
        with open(image("lib.spv"), "rb") as f:
            first = f.read()
        second = first.replace(b"LibDeviceFunc", b"LibDeviceFunX")
        self.assertEqual(len(first), len(second))
        for _ in range(20):
            devdl.open_memory(bytes(bytearray(first)), "first", devdl.LAZY)  # dropped, never closed
            gc.collect()
            with devdl.open_memory(bytes(bytearray(second)), "second", devdl.LAZY) as other:
                self.assertEqual(other.info("LibDeviceFunX").file, "second")

    def test_embedded_nul_bytes_are_refused(self):
        # C would read up to the NUL: another file or name than the one given.
        with self.assertRaisesRegex(ValueError, "embedded null byte"):
            devdl.open(image("lib.spv") + "\0-other")
        with devdl.open(image("lib.spv")) as lib:
            with self.assertRaisesRegex(ValueError, "embedded null byte"):
                lib.sym("LibCounter\0Other")

    def test_a_view_links_in_another_context(self):
        # The same device in a context of the program's own: a program of its own there.
        device = devdl.opencl().device
        context = cl.Context([device])
        queue = cl.CommandQueue(context, device)
        lib = devdl.open(image("lib.spv"), devdl.NOW | devdl.GLOBAL)
        with devdl.open(image("app.spv")) as app:
            view = app.view(devdl.OPENCL, device, context)
            kernel = view.kernel("AppKernel")
            self.assertEqual(kernel.context, context)
            self.assertNotEqual(kernel.int_ptr, app.sym("AppKernel"))
            out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, 4 * 4)
            kernel(queue, (4,), None, out)
            result = numpy.empty(4, numpy.int32)
            cl.enqueue_copy(queue, result, out)
            self.assertEqual(list(result), [0, 2, 4, 6])
            view.close()  # nothing: the handle still has it
            self.assertEqual(view.sym("AppKernel"), kernel.int_ptr)
        lib.close()

    def test_native_is_devdls_opencl_device(self):
        native = devdl.native(devdl.OPENCL)
        self.assertEqual(native.backend, devdl.OPENCL)
        self.assertEqual(devdl.opencl().device.int_ptr, native.device)
        self.assertEqual(devdl.opencl().context.int_ptr, native.context)


if __name__ == "__main__":
    unittest.main()
