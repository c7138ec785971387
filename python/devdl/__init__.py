"""devdl for Python: dlopen for device code, over the installed libdevdl.so (ctypes).

    import devdl
    devdl.open("lib.spv", devdl.NOW | devdl.GLOBAL)   # its exports join the global scope
    app = devdl.open("app.spv")                        # imports resolved, linked, built
    kernel = app.kernel("AppKernel")                   # a pyopencl.Kernel in devdl's context
    ctx, device, queue = devdl.opencl()                # where to allocate and launch it

On CUDA, kernel() gives a CudaKernel: called as CuPy calls its RawKernel, kernel(grid, block,
args), on CuPy's current stream; kernel.as_cuda_core() is the cuda.core Kernel that
cuda.core.launch takes. variable() gives a variable's device address, which
Variable.as_cupy() and Variable.as_buffer() hand to CuPy and cuda.core. Failures raise
devdl.error with device_dlerror's message, which names the symbol, the image and the file. The
library is the one DEVDL_LIBRARY names, else the one installed beside this module, else
libdevdl.so.0 where the dynamic linker finds it.
"""

from __future__ import annotations

import collections
import ctypes
import os
import threading
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple, Union

__all__ = ["LAZY", "NOW", "NOLOAD", "DEEPBIND", "GLOBAL", "LOCAL", "NODELETE",
           "OPENCL", "LEVEL_ZERO", "CUDA", "error", "Handle", "View", "SymbolInfo", "AddressInfo", "Native",
           "OpenCL", "CudaKernel", "Variable", "open", "open_memory", "global_scope", "address", "native",
           "opencl", "version"]

# device_dlopen's flags and the backends, as devdl.h defines them.
LAZY, NOW, NOLOAD, DEEPBIND, GLOBAL, LOCAL, NODELETE = 0x1, 0x2, 0x4, 0x8, 0x100, 0, 0x1000
OPENCL, LEVEL_ZERO, CUDA = 1, 2, 3

_KINDS = {1: "kernel", 2: "function", 3: "variable"}
# Image formats whose kernels are OpenCL objects (the rest are CUDA's).
_OPENCL_FORMATS = {"spirv", "spir-bc", "opencl-binary"}


class error(Exception):
    """A devdl call failed; the message is device_dlerror's."""


SymbolInfo = collections.namedtuple("SymbolInfo", "kind file image format")
AddressInfo = collections.namedtuple("AddressInfo", "file image symbol symbol_address offset kind")
Native = collections.namedtuple("Native", "backend platform device context")
OpenCL = collections.namedtuple("OpenCL", "context device queue")


class _SymbolInfo(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("kind", ctypes.c_int), ("file", ctypes.c_char_p),
                ("image", ctypes.c_uint), ("format", ctypes.c_char_p)]


class _AddressInfo(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("file", ctypes.c_char_p), ("image", ctypes.c_uint),
                ("symbol", ctypes.c_char_p), ("symbol_address", ctypes.c_void_p), ("offset", ctypes.c_size_t),
                ("kind", ctypes.c_int)]


class _Native(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("backend", ctypes.c_int), ("platform", ctypes.c_void_p),
                ("device", ctypes.c_void_p), ("context", ctypes.c_void_p)]


def _library_path() -> str:
    if os.environ.get("DEVDL_LIBRARY"):
        return os.environ["DEVDL_LIBRARY"]
    try:  # written by the installation: where libdevdl.so is, relative to this folder
        from . import _installed
        return os.path.normpath(os.path.join(os.path.dirname(__file__), _installed.LIBRARY))
    except ImportError:
        return "libdevdl.so.0"


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(_library_path())
    void_p, char_p = ctypes.c_void_p, ctypes.c_char_p
    for name, restype, argtypes in [
            ("device_dlversion", ctypes.c_uint, []),
            ("device_dlopen", void_p, [char_p, ctypes.c_int]),
            ("device_dlopen_mem", void_p, [void_p, ctypes.c_size_t, char_p, ctypes.c_int]),
            ("device_dlsym", void_p, [void_p, char_p]),
            ("device_dlclose", ctypes.c_int, [void_p]),
            ("device_dlerror", char_p, []),
            ("device_dlsyminfo", ctypes.c_int, [void_p, char_p, ctypes.POINTER(_SymbolInfo)]),
            ("device_dladdr", ctypes.c_int, [void_p, ctypes.POINTER(_AddressInfo)]),
            ("device_dlspecialize", ctypes.c_int, [void_p, ctypes.c_uint, void_p, ctypes.c_size_t]),
            ("device_dlread", ctypes.c_int, [void_p, char_p, ctypes.c_size_t, void_p, ctypes.c_size_t]),
            ("device_dlwrite", ctypes.c_int, [void_p, char_p, ctypes.c_size_t, void_p, ctypes.c_size_t]),
            ("device_dlplan", char_p, [void_p, char_p]),
            ("device_dlnative", ctypes.c_int, [ctypes.POINTER(_Native)]),
            ("device_dlview", void_p, [void_p, ctypes.POINTER(_Native)])]:
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


_lib = _load()


def _fail(default: str) -> NoReturn:
    message = _lib.device_dlerror()
    raise error(message.decode(errors="replace") if message else default)


def _bytes(text: Union[str, bytes, os.PathLike, None]) -> Optional[bytes]:
    encoded = os.fsencode(text) if isinstance(text, (str, os.PathLike)) else text
    # C would read up to the first NUL: another file or name than the one given.
    if encoded is not None and b"\0" in encoded:
        raise ValueError("embedded null byte")
    return encoded


# open_memory's bytes, by C handle, one entry for each open not closed yet: devdl knows the
# memory by its address for as long as the C handle is open, whether or not its Handle is still
# referenced (dlopen's handles stay open until closed), so no other bytes may take that address.
_kept_memory: Dict[int, List[bytes]] = {}


def version() -> Tuple[int, int, int]:
    """The loaded library's version, as (major, minor, patch)."""
    v = _lib.device_dlversion()
    return (v >> 16, (v >> 8) & 0xff, v & 0xff)


__version__ = "%d.%d.%d" % version()  # the library's, which the wheel's metadata repeats


class Handle:
    """An open device_dlopen handle. Like dlopen's, it stays open until close(), not until it
    is garbage; `with` closes it at the end of the block."""

    def __init__(self, pointer: int, name: str, backend: Optional[int] = None):
        self._pointer: Optional[int] = pointer
        self.name = name
        self._backend = backend  # a view's; None: the default devices'
        self._memory: Optional[bytes] = None  # open_memory's bytes (_kept_memory)

    def __repr__(self) -> str:
        return "<devdl.Handle %s>" % self.name

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def pointer(self) -> Optional[int]:
        """The C handle, as an integer."""
        return self._pointer

    def sym(self, name: str) -> int:
        """device_dlsym: the native object as an integer (cl_kernel, CUfunction, a variable's
        device address)."""
        address = _lib.device_dlsym(self._pointer, _bytes(name))
        if not address:
            _fail("device_dlsym(%s) failed" % name)
        return address

    def info(self, name: str) -> SymbolInfo:
        """device_dlsyminfo: kind, file, image and format of the definition `name` binds to."""
        info = _SymbolInfo(size=ctypes.sizeof(_SymbolInfo))
        if _lib.device_dlsyminfo(self._pointer, _bytes(name), ctypes.byref(info)) != 0:
            _fail("device_dlsyminfo(%s) failed" % name)
        return SymbolInfo(_KINDS.get(info.kind, info.kind), os.fsdecode(info.file), info.image,
                          info.format.decode())

    def kernel(self, name: str) -> Any:
        """The kernel `name`: a pyopencl.Kernel in devdl's context on OpenCL, a CudaKernel on
        CUDA (CuPy calls it, cuda.core launches its as_cuda_core()), the ze_kernel_handle_t as an
        integer on Level Zero."""
        address = self.sym(name)
        if self.info(name).format not in _OPENCL_FORMATS:
            return CudaKernel(address, name, self)
        # SPIR-V goes to OpenCL unless devdl's device for it is Level Zero's (DEVDL_BACKEND, or the
        # view's device).
        backend = self._backend if self._backend in (OPENCL, LEVEL_ZERO) else native().backend
        if backend == LEVEL_ZERO:
            return address
        import pyopencl
        kernel = pyopencl.Kernel.from_int_ptr(address, retain=True)
        # Before PyOpenCL 2025, from_int_ptr skipped the Python half of Kernel.__init__, which
        # makes a kernel callable, and Program.all_kernels() finished its kernels with _setup;
        # since then, the kernel from_int_ptr makes is callable as it is.
        setup = getattr(kernel, "_setup", None)
        return setup(kernel.program) if setup else kernel

    def variable(self, name: str) -> "Variable":
        """The device variable `name` (device_dlsym): its address, which Variable.as_cupy() and
        Variable.as_buffer() hand to CuPy and cuda.core on CUDA. The memory is the variable's,
        the one instance every image bound to it reaches, for as long as this handle is open."""
        return Variable(self.sym(name), name, self)

    def plan(self, kernel: str) -> str:
        """device_dlplan: which image each of the kernel's imports binds to, as text."""
        text = _lib.device_dlplan(self._pointer, _bytes(kernel))
        if text is None:
            _fail("device_dlplan(%s) failed" % kernel)
        return text.decode()

    def specialize(self, spec_id: int, value: Any) -> None:
        """device_dlspecialize: sets SpecId `spec_id` for the programs linked from now on.
        `value` is a ctypes scalar (ctypes.c_int32(7)) or bytes of the constant's width."""
        data = bytes(value)
        if _lib.device_dlspecialize(self._pointer, spec_id, data, len(data)) != 0:
            _fail("device_dlspecialize(%d) failed" % spec_id)

    def read(self, name: str, size: int, offset: int = 0) -> bytes:
        """device_dlread: `size` bytes of device variable `name` from `offset` on, as bytes."""
        data = ctypes.create_string_buffer(size)
        if _lib.device_dlread(self._pointer, _bytes(name), offset, data, size) != 0:
            _fail("device_dlread(%s) failed" % name)
        return data.raw

    def write(self, name: str, value: Any, offset: int = 0) -> None:
        """device_dlwrite: writes `value` (bytes, or a ctypes value) into device variable `name`."""
        data = bytes(value)
        if _lib.device_dlwrite(self._pointer, _bytes(name), offset, data, len(data)) != 0:
            _fail("device_dlwrite(%s) failed" % name)

    def view(self, backend: int, device: Any, context: Any = None, platform: Any = None) -> "View":
        """device_dlview: this handle on another device of `backend`, in `context` (None: devdl's
        own on that device). `device`, `context` and `platform` are integers (cl_device_id, the
        CUDA ordinal, ...) or PyOpenCL objects. Each device has its own programs, kernels and
        variables; a view lives as long as its handle, and closing it does nothing."""
        def pointer(value):
            return getattr(value, "int_ptr", value)
        wanted = _Native(size=ctypes.sizeof(_Native), backend=backend, platform=pointer(platform),
                         device=pointer(device), context=pointer(context))
        view = _lib.device_dlview(self._pointer, ctypes.byref(wanted))
        if not view:
            _fail("device_dlview(%s) failed" % self.name)
        return View(view, self.name, backend, self)

    def close(self) -> None:
        """device_dlclose: drops this handle's reference."""
        if self._pointer is not None:
            pointer, self._pointer = self._pointer, None
            status = _lib.device_dlclose(pointer)
            if self._memory:
                kept = _kept_memory[pointer]
                kept.remove(self._memory)
                if not kept:
                    del _kept_memory[pointer]
            if status != 0:
                _fail("device_dlclose(%s) failed" % self.name)


class View(Handle):
    """A handle on another device (Handle.view): the handle's calls, for that device."""

    def __init__(self, pointer: int, name: str, backend: int, handle: Handle):
        super().__init__(pointer, name, backend)
        self._handle = handle  # keeps the Python handle (and what it keeps) while the view is used

    def __repr__(self) -> str:
        return "<devdl.View %s>" % self.name

    def close(self) -> None:
        """Nothing to drop: the view goes with its handle."""


def open(path: Union[str, bytes, os.PathLike], flags: int = NOW) -> Handle:
    """device_dlopen: the device images of `path` (SPIR-V, SPIR, cubin, PTX, fatbin, a bundle,
    a host ELF file that carries bundles)."""
    pointer = _lib.device_dlopen(_bytes(path), flags)
    if not pointer:
        _fail("device_dlopen(%s) failed" % os.fsdecode(path))
    return Handle(pointer, os.fsdecode(path))


def open_memory(data: bytes, name: str, flags: int = NOW) -> Handle:
    """device_dlopen_mem: the images in `data` (bytes), called `name` in errors and plans."""
    data = bytes(data)
    pointer = _lib.device_dlopen_mem(data, len(data), _bytes(name), flags)
    if not pointer:
        _fail("device_dlopen_mem(%s) failed" % name)
    handle = Handle(pointer, name)
    handle._memory = data
    _kept_memory.setdefault(pointer, []).append(data)
    return handle


def global_scope() -> Handle:
    """device_dlopen(NULL): the global scope, the process's images and those opened GLOBAL."""
    return Handle(_lib.device_dlopen(None, 0), "<global scope>")


def address(value: int) -> Optional[AddressInfo]:
    """device_dladdr: the file, image, symbol and offset of a device address (an integer): one
    inside a variable of a linked program, or a function pointer's value; None where no loaded
    program holds it."""
    info = _AddressInfo(size=ctypes.sizeof(_AddressInfo))
    if not _lib.device_dladdr(value, ctypes.byref(info)):
        return None
    return AddressInfo(os.fsdecode(info.file), info.image, info.symbol.decode(), info.symbol_address or 0,
                       info.offset, _KINDS.get(info.kind, info.kind))


def native(backend: int = 0) -> Native:
    """device_dlnative: the platform, device and context devdl links for, as integers."""
    native = _Native(size=ctypes.sizeof(_Native), backend=backend)
    if _lib.device_dlnative(ctypes.byref(native)) != 0:
        _fail("device_dlnative failed")
    return Native(native.backend, native.platform, native.device, native.context)


_opencl: Optional[OpenCL] = None
_opencl_lock = threading.Lock()


class _Cuda:
    """The CUDA driver calls a launch needs, through ctypes: libcuda.so.1, the library devdl
    links with, in devdl's context (the device's primary context, which CuPy and cuda.core use)."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        void_p, c_uint = ctypes.c_void_p, ctypes.c_uint
        for name, argtypes in [
                ("cuCtxPushCurrent_v2", [void_p]),
                ("cuCtxPopCurrent_v2", [ctypes.POINTER(void_p)]),
                ("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
                ("cuLaunchKernel", [void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, void_p,
                                    ctypes.POINTER(void_p), ctypes.POINTER(void_p)])]:
            function = getattr(self.lib, name)
            function.restype, function.argtypes = ctypes.c_int, argtypes
        self.context = native(CUDA).context

    def check(self, result: int, call: str) -> None:
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise error("%s failed: %s" % (call, (name.value or b"CUDA error %d" % result).decode()))


_cuda: Optional[_Cuda] = None
_cuda_lock = threading.Lock()


def _cuda_driver() -> _Cuda:
    global _cuda
    with _cuda_lock:
        if _cuda is None:
            _cuda = _Cuda()
        return _cuda


def _dim3(value: Union[int, Sequence[int]], what: str) -> Tuple[int, int, int]:
    values = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(values) <= 3:
        raise ValueError("%s has 1 to 3 dimensions, not %d" % (what, len(values)))
    return tuple(values) + (1,) * (3 - len(values))  # type: ignore[return-value]


def _device_pointer(argument: Any) -> Optional[int]:
    """The device address an argument stands for: a CuPy array or any object with
    __cuda_array_interface__ (Numba's, PyTorch's), a CuPy MemoryPointer (.ptr), a cuda.core
    Buffer (.handle), a Variable; None where it is no device memory."""
    interface = getattr(argument, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    if isinstance(argument, Variable):
        return argument.address
    for attribute in ("ptr", "handle"):
        value = getattr(argument, attribute, None)
        if value is not None and not isinstance(argument, (ctypes._SimpleCData, ctypes.Structure)):
            return int(value)
    return None


def _kernel_arguments(arguments: Sequence[Any]) -> Tuple[Any, list]:
    """cuLaunchKernel's kernelParams for `arguments`, and what must live until the launch: device
    memory as its address, ctypes values and NumPy scalars as they are. A Python int or float has
    no width the kernel's parameter would agree with: it is refused, naming its place."""
    kept = []
    for index, argument in enumerate(arguments):
        if isinstance(argument, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):
            kept.append(argument)
            continue
        pointer = _device_pointer(argument)
        if pointer is not None:
            kept.append(ctypes.c_void_p(pointer))
            continue
        if type(argument).__module__ == "numpy" and hasattr(argument, "dtype") and getattr(argument, "shape", None) == ():
            data = argument.tobytes()
            kept.append((ctypes.c_char * len(data)).from_buffer_copy(data))
            continue
        raise TypeError("argument %d (%r): pass device memory (a CuPy array, a cuda.core Buffer, a Variable), a "
                        "NumPy scalar of the parameter's type (numpy.int32(8)) or a ctypes value" % (index, argument))
    parameters = (ctypes.c_void_p * max(1, len(kept)))(*[ctypes.addressof(value) for value in kept])
    return parameters, kept


def _stream_handle(stream: Any) -> int:
    """A CUstream from a CuPy stream (.ptr), a cuda.core Stream (__cuda_stream__ or .handle), an
    integer; None: CuPy's current stream where CuPy is imported, else the legacy default stream."""
    if stream is None:
        import sys
        cupy = sys.modules.get("cupy")
        return int(cupy.cuda.get_current_stream().ptr) if cupy is not None else 0
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attribute in ("ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    return int(stream)


class CudaKernel:
    """A kernel devdl linked on CUDA. Called as CuPy calls its RawKernel: kernel(grid, block,
    args, shared_mem=0, stream=None) launches it on `stream` (CuPy's current stream by default).
    Each of `args` is device memory (a CuPy array or anything with __cuda_array_interface__, a
    cuda.core Buffer, a Variable), a NumPy scalar of the parameter's type, or a ctypes value.
    as_cuda_core() is the same kernel as a cuda.core.Kernel, for cuda.core.launch. int(kernel)
    is the CUfunction. It is valid while the handle it came from is open."""

    def __init__(self, function: int, name: str, handle: Handle):
        self.function, self.name = function, name
        self._handle = handle  # the program stays while the kernel is used

    def __repr__(self) -> str:
        return "<devdl.CudaKernel %s of %s>" % (self.name, self._handle.name)

    def __int__(self) -> int:
        return self.function

    __index__ = __int__

    def __call__(self, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]], args: Sequence[Any],
                 shared_mem: int = 0, stream: Any = None) -> None:
        cuda = _cuda_driver()
        parameters, kept = _kernel_arguments(args)
        handle = _stream_handle(stream)
        cuda.check(cuda.lib.cuCtxPushCurrent_v2(cuda.context), "cuCtxPushCurrent")
        try:
            cuda.check(cuda.lib.cuLaunchKernel(self.function, *_dim3(grid, "grid"), *_dim3(block, "block"),
                                               shared_mem, handle, parameters, None),
                       "cuLaunchKernel(%s)" % self.name)
        finally:
            popped = ctypes.c_void_p()
            cuda.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
        del kept  # the driver copied the parameters

    def as_cuda_core(self) -> Any:
        """The kernel as a cuda.core.Kernel (cuda.core.launch(stream, config, kernel, *args))."""
        try:
            from cuda.core import Kernel
        except ImportError:
            from cuda.core.experimental import Kernel  # where an older cuda.core keeps it
        return Kernel.from_handle(self.function)


class Variable:
    """A device variable (Handle.variable): `address` is its device address, valid while the
    handle it came from is open."""

    def __init__(self, address: int, name: str, handle: Handle):
        self.address, self.name = address, name
        self._handle = handle

    def __repr__(self) -> str:
        return "<devdl.Variable %s at 0x%x of %s>" % (self.name, self.address, self._handle.name)

    def __int__(self) -> int:
        return self.address

    __index__ = __int__

    def as_cupy(self, shape: Union[int, Sequence[int]], dtype: Any) -> Any:
        """A cupy.ndarray over the variable's memory (no copy): what the device's kernels read and
        write. `shape` and `dtype` describe the variable (devdl knows its address, not its type)."""
        import cupy
        import numpy
        count = int(numpy.prod(shape))
        size = count * numpy.dtype(dtype).itemsize
        memory = cupy.cuda.UnownedMemory(self.address, size, self._handle)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))

    def as_buffer(self, size: int) -> Any:
        """A cuda.core Buffer over the variable's `size` bytes (no copy)."""
        try:
            from cuda.core import Buffer
        except ImportError:
            from cuda.core.experimental import Buffer  # where an older cuda.core keeps it
        return Buffer.from_handle(self.address, size, owner=self._handle)



def opencl() -> OpenCL:
    """devdl's OpenCL context and device as PyOpenCL objects, with a queue on them (made once):
    where to allocate the buffers of devdl's kernels and launch them."""
    global _opencl
    with _opencl_lock:
        if _opencl is None:
            import pyopencl
            handles = native(OPENCL)
            context = pyopencl.Context.from_int_ptr(handles.context, retain=True)
            device = pyopencl.Device.from_int_ptr(handles.device)
            _opencl = OpenCL(context, device, pyopencl.CommandQueue(context, device))
        return _opencl
