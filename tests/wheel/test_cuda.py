"""The installed wheel on CUDA (scripts/gpu-run.sh, on the GPU machine): the seeds' example and
the library's variable launched and reached through CuPy and through cuda.core. Each skips, saying
why, where the machine has no CUDA device, CuPy or cuda.core. DEVDL_TEST_IMAGES holds nvcc's
lib.ptx (LibDeviceFunc, LibCounter = 7), app.cubin (AppKernel) and app_counter.ptx
(CounterKernel: out[i] = LibCounter + i, then LibCounter += 100). The library and the counter's
application are PTX, which devdl rewrites so that a program reaches the instance another holds."""
import os

import numpy
import pytest

import devdl

IMAGES = os.environ["DEVDL_TEST_IMAGES"]
cupy = pytest.importorskip("cupy", reason="no CuPy in this environment")


def image(name):
    return os.path.join(IMAGES, name)


@pytest.fixture(scope="module")
def lib():
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        pytest.skip("no CUDA device: %s" % e)
    handle = devdl.open(image("lib.ptx"), devdl.NOW | devdl.GLOBAL)
    yield handle
    handle.close()


def test_cupy_calls_the_kernel_as_its_raw_kernels(lib):
    with devdl.open(image("app.cubin")) as app:
        kernel = app.kernel("AppKernel")
        assert isinstance(kernel, devdl.CudaKernel)
        out = cupy.zeros(8, cupy.int32)
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            kernel((1,), (8,), (out,))  # on CuPy's current stream
        stream.synchronize()
        assert out.get().tolist() == [0, 2, 4, 6, 8, 10, 12, 14]


def test_the_variable_is_one_instance_seen_from_cupy_and_the_kernels(lib):
    with devdl.open(image("app_counter.ptx")) as app:
        counter = lib.variable("LibCounter").as_cupy((), numpy.int32)
        assert int(counter.get()) == 7
        counter.fill(20)  # written where the kernel reads it
        out = cupy.zeros(4, cupy.int32)
        app.kernel("CounterKernel")(1, 4, (out,))
        assert out.get().tolist() == [20, 21, 22, 23]
        assert int(counter.get()) == 120  # the kernel's write, read through the same memory
        counter.fill(7)


def test_cuda_core_launches_the_kernel_and_takes_the_variable_as_a_buffer(lib):
    core = pytest.importorskip("cuda.core", reason="no cuda.core in this environment")
    device = core.Device()
    device.set_current()
    stream = device.create_stream()
    with devdl.open(image("app.cubin")) as app:
        out = device.allocate(8 * 4, stream=stream)
        core.launch(stream, core.LaunchConfig(grid=1, block=8), app.kernel("AppKernel").as_cuda_core(), out)
        stream.sync()
        host = cupy.ndarray((8,), cupy.int32, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(int(out.handle), 8 * 4, out), 0)).get()
        assert host.tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    buffer = lib.variable("LibCounter").as_buffer(4)
    assert int(buffer.handle) == lib.sym("LibCounter") and buffer.size == 4
