// The C API: each entry point turns the loader's llvm::Error into this thread's device_dlerror
// text. Nothing else is exported (api/devdl.map).
#include "devdl.h"

#include "loader/loader.h"

#include <string>

namespace {

struct ThreadError {
  std::string text;
  bool pending = false;
};
thread_local ThreadError lastError;

void setError(llvm::Error err) {
  lastError.text = llvm::toString(std::move(err));
  lastError.pending = true;
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
  if (llvm::Error err = devdl::Loader::instance().close(handle)) {
    setError(std::move(err));
    return -1;
  }
  return 0;
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
  if (llvm::Error err = devdl::Loader::instance().native(*native)) {
    setError(std::move(err));
    return -1;
  }
  return 0;
}

}  // extern "C"
