// The C API: each entry point turns the loader's llvm::Error into this thread's device_dlerror
// text. Nothing else is exported (api/devdl.map).
#include "devdl.h"
#include "devdl_cuda.h"

#include "loader/loader.h"
#include "host/object_registry.h"
#include "support/printable.h"

#include <errno.h>  // program_invocation_name

#include <string>

namespace {

struct ThreadError {
  std::string text;
  bool pending = false;
};
thread_local ThreadError lastError;

void setError(llvm::Error err) {
  // Names from files in it are shown escaped, as devdl-nm shows them.
  lastError.text = devdl::printable(llvm::toString(std::move(err)), /*keepNewlines=*/true);
  lastError.pending = true;
}

// 0, or -1 with the error kept for device_dlerror.
int status(llvm::Error err) {
  if (!err) return 0;
  setError(std::move(err));
  return -1;
}

template <typename T>
T *orError(llvm::Expected<T *> value) {
  if (value) return *value;
  setError(value.takeError());
  return nullptr;
}

}  // namespace

extern "C" {

unsigned device_dlversion(void) { return DEVDL_VERSION; }

void *device_dlopen(const char *path, int flags) {
  return orError(devdl::Loader::instance().open(path, flags));
}

void *device_dlsym(void *handle, const char *name) {
  if (!name) {
    lastError = {"device_dlsym: name is NULL", true};
    return nullptr;
  }
  return orError(devdl::Loader::instance().symbol(handle, name));
}

int device_dlclose(void *handle) {
  return status(devdl::Loader::instance().close(handle));
}

const char *device_dlerror(void) {
  if (!lastError.pending) return nullptr;
  lastError.pending = false;  // cleared on read; the text stays valid until the next error
  return lastError.text.c_str();
}

int device_dlnative(devdl_native *native) {
  if (!native || native->size < sizeof(devdl_native)) {
    lastError = {"device_dlnative: native is NULL or its size is not set", true};
    return -1;
  }
  return status(devdl::Loader::instance().native(*native));
}

int device_dlspecialize(void *handle, unsigned spec_id, const void *value, size_t size) {
  if (!value) {
    lastError = {"device_dlspecialize: value is NULL", true};
    return -1;
  }
  return status(devdl::Loader::instance().specialize(
      handle, spec_id, std::string_view(static_cast<const char *>(value), size)));
}

int device_dlread(void *handle, const char *name, size_t offset, void *dst, size_t size) {
  if (!name || (!dst && size)) {
    lastError = {"device_dlread: name or dst is NULL", true};
    return -1;
  }
  return status(devdl::Loader::instance().copy(handle, name, offset, dst, size, /*toDevice=*/false));
}

int device_dlwrite(void *handle, const char *name, size_t offset, const void *src, size_t size) {
  if (!name || (!src && size)) {
    lastError = {"device_dlwrite: name or src is NULL", true};
    return -1;
  }
  return status(devdl::Loader::instance().copy(handle, name, offset, const_cast<void *>(src), size, /*toDevice=*/true));
}

int device_dlregister_cuda(devdl_cuda_objects *objects) {
  if (!objects || objects->size < sizeof(devdl_cuda_objects) || !objects->load) {
    lastError = {"device_dlregister_cuda: no objects, or an older registration object than this libdevdl reads", true};
    return -1;
  }
  bool withProgram = false;
  llvm::Error err = devdl::Loader::instance().registerCuda(*objects, withProgram);
  if (!err) return 0;
  // A symbol left undefined in an object loaded with the program ends it, as ld.so ends it; no
  // device or driver is an error its kernels' launches give, as with nvcc's own link.
  const bool fatal = withProgram && devdl::hasCode(err, devdl::ErrorCode::Unresolved);
  // Worded as ld.so words a lookup error: the program, then what failed.
  setError(std::move(err));
  lastError.text = std::string(program_invocation_name) + ": device symbol lookup error: " + lastError.text;
  return fatal ? -2 : -1;
}

void device_dlunregister_cuda(devdl_cuda_objects *objects) {
  if (objects) devdl::Loader::instance().unregisterCuda(*objects);
}

void device_dlregister(const void *address, const char *unique_id, const char *kind) {
  devdl::host::ObjectRegistry::instance().add(address, unique_id, kind);
}

void __register_uniquely_identifiable_object(void *address, const char *unique_id, const char *kind) {
  devdl::host::ObjectRegistry::instance().add(address, unique_id, kind);
}

int device_dlread_object(void *handle, const void *object, size_t offset, void *dst, size_t size) {
  if (!dst && size) {
    lastError = {"device_dlread_object: dst is NULL", true};
    return -1;
  }
  return status(devdl::Loader::instance().copyObject(handle, object, offset, dst, size, /*toDevice=*/false));
}

int device_dlwrite_object(void *handle, const void *object, size_t offset, const void *src, size_t size) {
  if (!src && size) {
    lastError = {"device_dlwrite_object: src is NULL", true};
    return -1;
  }
  return status(
      devdl::Loader::instance().copyObject(handle, object, offset, const_cast<void *>(src), size, /*toDevice=*/true));
}

int device_dlspecialize_object(void *handle, const void *object, const void *value, size_t size) {
  if (!value) {
    lastError = {"device_dlspecialize_object: value is NULL", true};
    return -1;
  }
  return status(devdl::Loader::instance().specializeObject(
      handle, object, std::string_view(static_cast<const char *>(value), size)));
}

int device_dlattach(const devdl_native *native) {
  if (!native || native->size < sizeof(devdl_native)) {
    lastError = {"device_dlattach: native is NULL or its size is not set", true};
    return -1;
  }
  return status(devdl::Loader::instance().attach(*native));
}

void *device_dlview(void *handle, const devdl_native *device) {
  if (!device || device->size < sizeof(devdl_native)) {
    lastError = {"device_dlview: device is NULL or its size is not set", true};
    return nullptr;
  }
  return orError(devdl::Loader::instance().view(handle, *device));
}

void *device_dlopen_mem(const void *data, size_t size, const char *name, int flags) {
  return orError(devdl::Loader::instance().openMemory(data, size, name, flags));
}

int device_dlsyminfo(void *handle, const char *name, devdl_symbol_info *info) {
  if (!name || !info || info->size < sizeof(devdl_symbol_info)) {
    lastError = {"device_dlsyminfo: name or info is NULL, or info's size is not set", true};
    return -1;
  }
  return status(devdl::Loader::instance().symbolInfo(handle, name, *info));
}

int device_dladdr(const void *address, devdl_addr_info *info) {
  if (!info || info->size < sizeof(devdl_addr_info)) {
    lastError = {"device_dladdr: info is NULL, or its size is not set", true};
    return 0;
  }
  if (llvm::Error err = devdl::Loader::instance().addressInfo(address, *info)) {
    setError(std::move(err));
    return 0;
  }
  return 1;
}

const char *device_dlplan(void *handle, const char *name) {
  thread_local std::string text;
  if (!name) {
    lastError = {"device_dlplan: name is NULL", true};
    return nullptr;
  }
  auto plan = devdl::Loader::instance().planText(handle, name);
  if (!plan) {
    setError(plan.takeError());
    return nullptr;
  }
  text = std::move(*plan);
  return text.c_str();
}

int device_dliterate(int (*callback)(const devdl_image_info *info, void *data), void *data) {
  if (!callback) return 0;
  for (const auto &image : devdl::Loader::instance().snapshot()) {
    devdl_image_info info{sizeof info,  image.file.c_str(), image.index, image.format.c_str(),
                          image.target.c_str(), image.global, image.symbols};
    if (int stop = callback(&info, data)) return stop;
  }
  return 0;
}

}  // extern "C"
