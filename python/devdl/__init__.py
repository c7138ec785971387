"""devdl for Python: dlopen for device code, over the installed libdevdl.so (ctypes).

    import devdl
    devdl.open("lib.spv", devdl.NOW | devdl.GLOBAL)   # its exports join the global scope
    app = devdl.open("app.spv")                        # imports resolved, linked, built
    kernel = app.kernel("AppKernel")                   # a pyopencl.Kernel in devdl's context
    ctx, device, queue = devdl.opencl()                # where to allocate and launch it

On CUDA, kernel() gives the CUfunction as an integer (launch it with, e.g.,
cupy.cuda.driver.launchKernel). Failures raise devdl.error with device_dlerror's message, which
names the symbol, the image and the file. The library is the one DEVDL_LIBRARY names, else the
one installed beside this module, else libdevdl.so.0 where the dynamic linker finds it.
"""

import collections
import ctypes
import os
import threading

__all__ = ["LAZY", "NOW", "NOLOAD", "DEEPBIND", "GLOBAL", "LOCAL", "NODELETE",
           "OPENCL", "LEVEL_ZERO", "CUDA", "error", "Handle", "View", "SymbolInfo", "AddressInfo", "Native",
           "OpenCL", "open", "open_memory", "global_scope", "address", "native", "opencl", "version"]

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


def _library_path():
    if os.environ.get("DEVDL_LIBRARY"):
        return os.environ["DEVDL_LIBRARY"]
    try:  # written by the installation: where libdevdl.so is, relative to this folder
        from . import _installed
        return os.path.normpath(os.path.join(os.path.dirname(__file__), _installed.LIBRARY))
    except ImportError:
        return "libdevdl.so.0"


def _load():
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


def _fail(default):
    message = _lib.device_dlerror()
    raise error(message.decode(errors="replace") if message else default)


def _bytes(text):
    return os.fsencode(text) if isinstance(text, (str, os.PathLike)) else text


def version():
    """The loaded library's version, as (major, minor, patch)."""
    v = _lib.device_dlversion()
    return (v >> 16, (v >> 8) & 0xff, v & 0xff)


class Handle:
    """An open device_dlopen handle. Like dlopen's, it stays open until close(), not until it
    is garbage; `with` closes it at the end of the block."""

    def __init__(self, pointer, name, backend=None):
        self._pointer, self.name = pointer, name
        self._backend = backend  # a view's; None: the default devices'

    def __repr__(self):
        return "<devdl.Handle %s>" % self.name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def pointer(self):
        """The C handle, as an integer."""
        return self._pointer

    def sym(self, name):
        """device_dlsym: the native object as an integer (cl_kernel, CUfunction, a variable's
        device address)."""
        address = _lib.device_dlsym(self._pointer, _bytes(name))
        if not address:
            _fail("device_dlsym(%s) failed" % name)
        return address

    def info(self, name):
        """device_dlsyminfo: kind, file, image and format of the definition `name` binds to."""
        info = _SymbolInfo(size=ctypes.sizeof(_SymbolInfo))
        if _lib.device_dlsyminfo(self._pointer, _bytes(name), ctypes.byref(info)) != 0:
            _fail("device_dlsyminfo(%s) failed" % name)
        return SymbolInfo(_KINDS.get(info.kind, info.kind), os.fsdecode(info.file), info.image,
                          info.format.decode())

    def kernel(self, name):
        """The kernel `name`: a pyopencl.Kernel in devdl's context on OpenCL, the CUfunction as
        an integer on CUDA, the ze_kernel_handle_t as an integer on Level Zero."""
        address = self.sym(name)
        # SPIR-V goes to OpenCL unless devdl's device for it is Level Zero's (DEVDL_BACKEND, or the
        # view's device).
        backend = self._backend if self._backend in (OPENCL, LEVEL_ZERO) else native().backend
        if self.info(name).format not in _OPENCL_FORMATS or backend == LEVEL_ZERO:
            return address
        import pyopencl
        kernel = pyopencl.Kernel.from_int_ptr(address, retain=True)
        # from_int_ptr skips the Python half of Kernel.__init__, which makes a kernel callable;
        # PyOpenCL's Program.all_kernels() finishes its kernels the same way.
        return kernel._setup(kernel.program)

    def plan(self, kernel):
        """device_dlplan: which image each of the kernel's imports binds to, as text."""
        text = _lib.device_dlplan(self._pointer, _bytes(kernel))
        if text is None:
            _fail("device_dlplan(%s) failed" % kernel)
        return text.decode()

    def specialize(self, spec_id, value):
        """device_dlspecialize: sets SpecId `spec_id` for the programs linked from now on.
        `value` is a ctypes scalar (ctypes.c_int32(7)) or bytes of the constant's width."""
        data = bytes(value)
        if _lib.device_dlspecialize(self._pointer, spec_id, data, len(data)) != 0:
            _fail("device_dlspecialize(%d) failed" % spec_id)

    def read(self, name, size, offset=0):
        """device_dlread: `size` bytes of device variable `name` from `offset` on, as bytes."""
        data = ctypes.create_string_buffer(size)
        if _lib.device_dlread(self._pointer, _bytes(name), offset, data, size) != 0:
            _fail("device_dlread(%s) failed" % name)
        return data.raw

    def write(self, name, value, offset=0):
        """device_dlwrite: writes `value` (bytes, or a ctypes value) into device variable `name`."""
        data = bytes(value)
        if _lib.device_dlwrite(self._pointer, _bytes(name), offset, data, len(data)) != 0:
            _fail("device_dlwrite(%s) failed" % name)

    def view(self, backend, device, context=None, platform=None):
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

    def close(self):
        """device_dlclose: drops this handle's reference."""
        if self._pointer is not None:
            pointer, self._pointer = self._pointer, None
            if _lib.device_dlclose(pointer) != 0:
                _fail("device_dlclose(%s) failed" % self.name)


class View(Handle):
    """A handle on another device (Handle.view): the handle's calls, for that device."""

    def __init__(self, pointer, name, backend, handle):
        super().__init__(pointer, name, backend)
        self._handle = handle  # keeps the Python handle (and what it keeps) while the view is used

    def __repr__(self):
        return "<devdl.View %s>" % self.name

    def close(self):
        """Nothing to drop: the view goes with its handle."""


def open(path, flags=NOW):
    """device_dlopen: the device images of `path` (SPIR-V, SPIR, cubin, PTX, fatbin, a bundle,
    a host ELF file that carries bundles)."""
    pointer = _lib.device_dlopen(_bytes(path), flags)
    if not pointer:
        _fail("device_dlopen(%s) failed" % path)
    return Handle(pointer, os.fsdecode(path))


def open_memory(data, name, flags=NOW):
    """device_dlopen_mem: the images in `data` (bytes), called `name` in errors and plans."""
    data = bytes(data)
    pointer = _lib.device_dlopen_mem(data, len(data), _bytes(name), flags)
    if not pointer:
        _fail("device_dlopen_mem(%s) failed" % name)
    handle = Handle(pointer, name)
    # devdl knows the memory by its address while the handle is open: kept, so that no other
    # bytes take that address meanwhile and are taken for these.
    handle._data = data
    return handle


def global_scope():
    """device_dlopen(NULL): the global scope, the process's images and those opened GLOBAL."""
    return Handle(_lib.device_dlopen(None, 0), "<global scope>")


def address(value):
    """device_dladdr: the file, image, symbol and offset of a device address (an integer): one
    inside a variable of a linked program, or a function pointer's value; None where no loaded
    program holds it."""
    info = _AddressInfo(size=ctypes.sizeof(_AddressInfo))
    if not _lib.device_dladdr(value, ctypes.byref(info)):
        return None
    return AddressInfo(os.fsdecode(info.file), info.image, info.symbol.decode(), info.symbol_address or 0,
                       info.offset, _KINDS.get(info.kind, info.kind))


def native(backend=0):
    """device_dlnative: the platform, device and context devdl links for, as integers."""
    native = _Native(size=ctypes.sizeof(_Native), backend=backend)
    if _lib.device_dlnative(ctypes.byref(native)) != 0:
        _fail("device_dlnative failed")
    return Native(native.backend, native.platform, native.device, native.context)


_opencl = None
_opencl_lock = threading.Lock()


def opencl():
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
