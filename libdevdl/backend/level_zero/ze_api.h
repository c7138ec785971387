// The Level Zero entry points devdl uses, taken from the loader (libze_loader.so.1) at run time:
// one build of devdl runs where there is no Level Zero and says so instead of failing to load.
#pragma once

#include <level_zero/ze_api.h>

#include <llvm/Support/Error.h>

#include <string>

namespace devdl::backend::level_zero {

#define DEVDL_ZE_FUNCTIONS(X)                                                                      \
  X(zeInit) X(zeDriverGet) X(zeDriverGetProperties) X(zeDriverGetApiVersion)                        \
  X(zeDriverGetExtensionProperties) X(zeDeviceGet) X(zeDeviceGetProperties)                         \
  X(zeDeviceGetModuleProperties) X(zeContextCreate) X(zeContextDestroy)                             \
  X(zeModuleCreate) X(zeModuleDestroy) X(zeModuleDynamicLink) X(zeModuleBuildLogGetString)           \
  X(zeModuleBuildLogDestroy) X(zeModuleGetNativeBinary) X(zeModuleGetGlobalPointer)                 \
  X(zeModuleGetFunctionPointer) X(zeKernelCreate) X(zeKernelDestroy) X(zeCommandListCreateImmediate)  \
  X(zeCommandListAppendMemoryCopy) X(zeCommandListDestroy)

struct Api {
#define DEVDL_DECLARE(name) decltype(&::name) name = nullptr;
  DEVDL_ZE_FUNCTIONS(DEVDL_DECLARE)
#undef DEVDL_DECLARE
  // ZE_extension_linkage_inspection, where the loader has it (null otherwise): what a module
  // exports as the driver built it, to say why a link failed.
  decltype(&::zeModuleInspectLinkageExt) zeModuleInspectLinkageExt = nullptr;
};

/// The loader's entry points, loaded on first use and kept for the life of the process. Fails
/// with NotFound where libze_loader.so.1 is missing or lacks an entry point.
llvm::Expected<const Api &> api();

/// "ZE_RESULT_ERROR_MODULE_LINK_FAILURE (0x70000005)".
std::string errorName(ze_result_t result);

}  // namespace devdl::backend::level_zero
