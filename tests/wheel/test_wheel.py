"""The installed wheel, tested from a fresh virtual environment outside the source tree
(scripts/wheel.sh): where the module, the library and the package are, the commands, and the
seeds' example on the OpenCL device OCL_ICD_VENDORS selects (PoCL 3 through the machine's
llvm-spirv-15, and refused, saying why, without it). DEVDL_TEST_IMAGES is a folder with
the seeds' lib.spv and app.spv."""
import importlib.metadata
import os
import shutil
import subprocess
import sys

import numpy
import pytest

import devdl

IMAGES = os.environ["DEVDL_TEST_IMAGES"]


def image(name):
    return os.path.join(IMAGES, name)


def command(name):
    """A command the wheel put on the environment's PATH."""
    return os.path.join(os.path.dirname(sys.executable), name)


def module(*args):
    return subprocess.run([sys.executable, "-m", "devdl", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_the_module_and_library_are_the_installed_wheels():
    assert os.path.dirname(devdl.__file__).startswith(sys.prefix), devdl.__file__
    assert "DEVDL_LIBRARY" not in os.environ
    library = module("--library")
    assert library == os.path.join(os.path.dirname(devdl.__file__), "lib", "libdevdl.so.0")
    assert os.path.isfile(library)
    header = open(os.path.join(module("--include-dir"), "devdl.h")).read()
    expected = tuple(int(header.split("#define DEVDL_VERSION_%s " % part)[1].split()[0])
                     for part in ("MAJOR", "MINOR", "PATCH"))
    assert devdl.version() == expected
    assert module("--version") == devdl.__version__ == "%d.%d.%d" % expected
    # The wheel's metadata (pyproject.toml reads CMakeLists.txt) says the same version.
    assert importlib.metadata.version("devdl") == devdl.__version__
    assert os.path.isfile(os.path.join(module("--cmake-dir"), "devdlConfig.cmake"))


def test_the_package_is_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(devdl.__file__), "py.typed"))
    assert devdl.open.__annotations__["return"] in ("Handle", devdl.Handle)


@pytest.mark.parametrize("name", ["devdl-nm", "devdl-pack", "devdl-cache"])
def test_the_commands_are_on_the_environments_path(name):
    assert os.path.isfile(command(name))
    result = subprocess.run([command(name), "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert name in result.stdout + result.stderr


def nm_version(**environment):
    return subprocess.run([command("devdl-nm"), "--version"], check=True,
                          capture_output=True, text=True, env=dict(os.environ, **environment)).stdout


def test_the_commands_say_which_translator_makes_spir():
    # The wheel has no SPIRV-LLVM-Translator of its own: the machine's llvm-spirv-15 translates.
    version = nm_version()
    assert version.startswith("devdl-nm (devdl %d." % devdl.version()[0])
    llvm_spirv = shutil.which("llvm-spirv-15")
    if llvm_spirv:
        assert "by %s (this build has no SPIRV-LLVM-Translator of its own)" % llvm_spirv in version
        # A name without a slash is looked for on PATH, as execvp does.
        assert "by %s " % llvm_spirv in nm_version(DEVDL_LLVM_SPIRV="llvm-spirv-15")
    else:
        assert "no llvm-spirv-15 on PATH" in version
    assert "no llvm-spirv-15 on PATH" in nm_version(DEVDL_LLVM_SPIRV="")


def test_devdl_nm_lists_what_an_image_exports_and_imports():
    listed = subprocess.run([command("devdl-nm"), image("app.spv")],
                            check=True, capture_output=True, text=True).stdout
    assert "AppKernel" in listed and "LibDeviceFunc" in listed


def takes_spirv(device):
    try:
        return bool(device.il_version)
    except Exception:  # a device before OpenCL 2.1 has no IL_VERSION
        return False


def test_the_seed_example():
    import pyopencl as cl
    context, device, queue = devdl.opencl()
    if not takes_spirv(device) and not shutil.which("llvm-spirv-15"):
        pytest.skip("%s takes SPIR only, and no llvm-spirv-15 is on PATH to translate for it" % device.name)
    lib = devdl.open(image("lib.spv"), devdl.NOW | devdl.GLOBAL)
    try:
        with devdl.open(image("app.spv")) as app:
            kernel = app.kernel("AppKernel")
            assert isinstance(kernel, cl.Kernel) and kernel.context == context
            out = cl.Buffer(context, cl.mem_flags.WRITE_ONLY, 8 * 4)
            kernel(queue, (8,), None, out)
            result = numpy.empty(8, numpy.int32)
            cl.enqueue_copy(queue, result, out)
            assert list(result) == [0, 2, 4, 6, 8, 10, 12, 14]
    finally:
        lib.close()


REFUSED = """
import devdl, sys
devdl.open(sys.argv[1] + "/lib.spv", devdl.NOW | devdl.GLOBAL)
try:
    devdl.open(sys.argv[1] + "/app.spv")
except devdl.error as e:
    print(e)
"""


def test_without_a_translator_a_device_taking_only_spir_is_refused_saying_why():
    # DEVDL_LLVM_SPIRV="" names no translator: what a machine without llvm-spirv-15 sees.
    if takes_spirv(devdl.opencl().device):
        pytest.skip("the device takes SPIR-V: nothing to translate")
    said = subprocess.run([sys.executable, "-c", REFUSED, IMAGES], check=True, capture_output=True, text=True,
                          env=dict(os.environ, DEVDL_LLVM_SPIRV="")).stdout
    assert "LibDeviceFunc" in said and image("app.spv") in said and image("lib.spv") in said, said
    assert "cannot translate to it" in said and "apt-get install llvm-spirv-15" in said, said


def test_errors_are_exceptions_with_device_dlerrors_text():
    with pytest.raises(devdl.error) as caught:
        devdl.open(image("no-such-image.spv"))
    assert "no-such-image.spv" in str(caught.value)


class CudaArrayLike:
    """What CuPy, Numba and PyTorch arrays show of themselves: no CUDA needed to pack it."""
    __cuda_array_interface__ = {"data": (0xdead0000, False), "shape": (8,), "typestr": "<i4", "version": 3}


def test_kernel_arguments_pack_device_memory_scalars_and_ctypes_and_refuse_bare_numbers():
    import ctypes
    parameters, kept = devdl._kernel_arguments([CudaArrayLike(), numpy.int32(7), numpy.float64(0.5),
                                                ctypes.c_uint16(9)])
    values = [ctypes.c_void_p.from_address(parameters[0]).value,
              ctypes.c_int32.from_address(parameters[1]).value,
              ctypes.c_double.from_address(parameters[2]).value,
              ctypes.c_uint16.from_address(parameters[3]).value]
    assert values == [0xdead0000, 7, 0.5, 9]
    with pytest.raises(TypeError, match="argument 1"):
        devdl._kernel_arguments([CudaArrayLike(), 7])
