// The test driver's modules: made from SPIR-V (one input, or a module program's several), linked by
// zeModuleDynamicLink under the specification's rules, and asked for their linkage, names and logs.
#include "driver.h"

#include <level_zero/ze_ddi.h>
#include <spirv-tools/libspirv.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zetest {

bool hasOption(const char *flags, std::string_view option) {
  if (!flags) return false;
  const std::string_view all(flags);
  for (size_t at = all.find(option); at != std::string_view::npos; at = all.find(option, at + 1)) {
    const bool starts = at == 0 || all[at - 1] == ' ';
    const bool ends = at + option.size() == all.size() || all[at + option.size()] == ' ';
    if (starts && ends) return true;
  }
  return false;
}

// One SPIR-V input of a module, its constants applied; "" or why it is refused.
std::string spirvInput(const uint8_t *bytes, size_t size, const ze_module_constants_t *constants,
                       std::vector<uint32_t> *words) {
  if (!bytes || size == 0 || size % 4 != 0) return "the SPIR-V input is empty or not whole words";
  words->resize(size / 4);
  std::memcpy(words->data(), bytes, size);
  spvtools::SpirvTools tools(SPV_ENV_UNIVERSAL_1_4);  // the version the device reports
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    messages += std::string(messages.empty() ? "" : "\n") + message;
  });
  if (!tools.Validate(*words)) return "invalid SPIR-V: " + messages;
  if (constants && constants->numConstants) {
    std::map<uint32_t, const void *> values;
    for (uint32_t i = 0; i < constants->numConstants; ++i) values[constants->pConstantIds[i]] = constants->pConstantValues[i];
    return zetest::applySpecConstants(*words, values);
  }
  return {};
}

// Makes a module from its inputs (one, or a module program's several); "" or the build log.
std::string makeModule(const std::vector<std::vector<uint32_t>> &inputs, Module *module) {
  std::vector<const std::vector<uint32_t> *> pointers;
  for (const auto &words : inputs) pointers.push_back(&words);
  // A module program's inputs link at creation; what none of them exports stays an import.
  Linkage all;
  for (const auto &words : inputs) {
    Linkage one;
    if (std::string why = zetest::readLinkage(words, &one); !why.empty()) return why;
    all.kernels.insert(one.kernels.begin(), one.kernels.end());
    all.kernelArgs.insert(one.kernelArgs.begin(), one.kernelArgs.end());
    all.exportedFunctions.insert(one.exportedFunctions.begin(), one.exportedFunctions.end());
    all.exportedVariables.insert(one.exportedVariables.begin(), one.exportedVariables.end());
    all.imports.insert(one.imports.begin(), one.imports.end());
  }
  for (const std::string &name : all.exportedFunctions) all.imports.erase(name);
  for (const std::string &name : all.exportedVariables) all.imports.erase(name);
  // Linked as a library: the module keeps its exports (in its native binary too, which has only
  // the linked SPIR-V to say what the module exports).
  if (std::string why = linkSpirv(pointers, !all.imports.empty(), true, &module->words); !why.empty()) return why;
  module->linkage = std::move(all);
  if (!module->linkage.imports.empty()) return {};  // unlinked until zeModuleDynamicLink
  module->linked = true;
  module->builtAlone = true;
  return buildSpirv(module->words, &module->built);
}

namespace {

struct BuildLog {
  std::string text;
};

void newLog(ze_module_build_log_handle_t *out, std::string text) {
  if (out) *out = reinterpret_cast<ze_module_build_log_handle_t>(new BuildLog{std::move(text)});
}

ze_result_t ZE_APICALL moduleCreate(ze_context_handle_t, ze_device_handle_t, const ze_module_desc_t *desc,
                                    ze_module_handle_t *out, ze_module_build_log_handle_t *logOut) {
  if (!desc || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  auto module = std::make_unique<Module>();
  std::string log;
  const auto *program = static_cast<const ze_module_program_exp_desc_t *>(desc->pNext);
  if (program && program->stype != ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC) program = nullptr;
  if (program && !moduleProgramReported()) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  ze_result_t failure = ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  if (desc->format == ZE_MODULE_FORMAT_NATIVE) {
    log = loadNative(desc->pInputModule, desc->inputSize, module.get(), &failure);
  } else if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV) {
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  } else {
    std::vector<std::vector<uint32_t>> inputs;
    const uint32_t count = program ? program->count : 1;
    for (uint32_t i = 0; i < count && log.empty(); ++i) {
      const char *flags = program ? (program->pBuildFlags ? program->pBuildFlags[i] : nullptr) : desc->pBuildFlags;
      module->library |= hasOption(flags, "-library-compilation");
      module->globalAddresses |= hasOption(flags, "-ze-take-global-address");
      const ze_module_constants_t *constants =
          program ? (program->pConstants ? program->pConstants[i] : nullptr) : desc->pConstants;
      log = spirvInput(program ? program->pInputModules[i] : desc->pInputModule,
                       program ? program->inputSizes[i] : desc->inputSize, constants, &inputs.emplace_back());
      if (!log.empty() && count > 1) log = "input " + std::to_string(i) + ": " + log;
    }
    if (log.empty()) log = makeModule(inputs, module.get());
  }
  newLog(logOut, log);
  if (!log.empty()) return failure;
  *out = reinterpret_cast<ze_module_handle_t>(module.release());
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleDestroy(ze_module_handle_t module) {
  delete reinterpret_cast<Module *>(module);
  return ZE_RESULT_SUCCESS;
}

// How many modules of a link, module `importer` aside, export `name`.
int exportersOf(const std::string &name, uint32_t importer, uint32_t count, ze_module_handle_t *handles) {
  int exporters = 0;
  for (uint32_t j = 0; j < count; ++j)
    if (j != importer && asModule(handles[j])->exports(name)) ++exporters;
  return exporters;
}

ze_result_t ZE_APICALL moduleDynamicLink(uint32_t count, ze_module_handle_t *handles, ze_module_build_log_handle_t *logOut) {
  std::string log;
  // Every import of every module still unlinked must be exported by exactly one other module.
  for (uint32_t i = 0; i < count; ++i) {
    Module *module = asModule(handles[i]);
    if (module->linked) continue;
    for (const std::string &name : module->linkage.imports) {
      const int exporters = exportersOf(name, i, count, handles);
      if (exporters == 0) log += "error: module " + std::to_string(i) + " imports `" + name + "`, which no module of the link exports\n";
      else if (exporters > 1) log += "error: `" + name + "` imported by module " + std::to_string(i) + " is exported by " +
                                     std::to_string(exporters) + " modules of the link (ambiguous)\n";
    }
  }
  if (!log.empty()) {
    newLog(logOut, log);
    return ZE_RESULT_ERROR_MODULE_LINK_FAILURE;
  }
  std::vector<const std::vector<uint32_t> *> inputs;
  bool needed = false;
  for (uint32_t i = 0; i < count; ++i) {
    inputs.push_back(&asModule(handles[i])->words);
    needed |= !asModule(handles[i])->linked;
  }
  if (needed) {
    std::vector<uint32_t> words;
    std::shared_ptr<Built> built;
    log = linkSpirv(inputs, false, false, &words);
    if (log.empty()) log = buildSpirv(words, &built);
    if (!log.empty()) {
      newLog(logOut, log);
      return ZE_RESULT_ERROR_MODULE_LINK_FAILURE;
    }
    // The modules whose kernels are still to come take theirs from the link's program, so that
    // they share its variables; a module linked before keeps what its kernels use.
    for (uint32_t i = 0; i < count; ++i) {
      Module *module = asModule(handles[i]);
      if (!module->linked || module->kernels == 0) {
        module->built = built;
        module->builtAlone = count == 1;
      }
      module->linked = true;
    }
  }
  newLog(logOut, "");
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleInspectLinkage(ze_linkage_inspection_ext_desc_t *desc, uint32_t count,
                                            ze_module_handle_t *handles, ze_module_build_log_handle_t *logOut) {
  std::string log;
  for (uint32_t i = 0; i < count; ++i) {
    const Module *module = asModule(handles[i]);
    const std::string prefix = "module " + std::to_string(i) + ": ";
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_IMPORTS)
      for (const std::string &name : module->linkage.imports) log += prefix + "import " + name + "\n";
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_UNRESOLVABLE_IMPORTS)
      for (const std::string &name : module->linkage.imports) {
        if (exportersOf(name, i, count, handles) == 0) log += prefix + "unresolvable import " + name + "\n";
      }
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_EXPORTS)
      for (const auto *names : {&module->linkage.exportedFunctions, &module->linkage.exportedVariables})
        for (const std::string &name : *names)
          if (module->exports(name)) log += prefix + "export " + name + "\n";
  }
  newLog(logOut, log);
  return ZE_RESULT_SUCCESS;
}

// A variable's address: one the module exports (as built), once linked.
ze_result_t addressOf(ze_module_handle_t handle, const char *name, const std::set<std::string> &exported, bool allowed,
                      ze_result_t notFound, size_t *size, void **out) {
  const Module *module = asModule(handle);
  if (!name || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!allowed || !exported.count(name)) return notFound;
  if (!module->linked) return ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED;
  const auto *variable = module->built->variables ? module->built->variables->find(name) : nullptr;
  if (!variable) return notFound;
  *out = module->built->variables->data(*variable);
  if (size) *size = variable->size;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleGetGlobalPointer(ze_module_handle_t handle, const char *name, size_t *size, void **out) {
  const Module *module = asModule(handle);
  return addressOf(handle, name, module->linkage.exportedVariables, module->globalAddresses,
                   ZE_RESULT_ERROR_INVALID_GLOBAL_NAME, size, out);
}

ze_result_t ZE_APICALL moduleGetFunctionPointer(ze_module_handle_t, const char *, void **) {
  return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
}

ze_result_t ZE_APICALL moduleGetKernelNames(ze_module_handle_t handle, uint32_t *count, const char **names) {
  const Module *module = asModule(handle);
  if (!names || *count == 0) {
    *count = static_cast<uint32_t>(module->linkage.kernels.size());
    return ZE_RESULT_SUCCESS;
  }
  uint32_t i = 0;
  for (const std::string &name : module->linkage.kernels) {
    if (i == *count) break;
    names[i++] = name.c_str();
  }
  *count = i;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL buildLogGetString(ze_module_build_log_handle_t handle, size_t *size, char *out) {
  const auto *log = reinterpret_cast<const BuildLog *>(handle);
  if (!out) {
    *size = log->text.size() + 1;
    return ZE_RESULT_SUCCESS;
  }
  const size_t n = std::min(*size, log->text.size() + 1);
  if (n == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::memcpy(out, log->text.c_str(), n - 1);
  out[n - 1] = '\0';
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL buildLogDestroy(ze_module_build_log_handle_t handle) {
  delete reinterpret_cast<BuildLog *>(handle);
  return ZE_RESULT_SUCCESS;
}

}  // namespace
}  // namespace zetest

// --- the tables of modules and their build logs.
DEVDL_ZE_EXPORT zeGetModuleProcAddrTable(ze_api_version_t, ze_module_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = zetest::moduleCreate;
  t->pfnDestroy = zetest::moduleDestroy;
  t->pfnDynamicLink = zetest::moduleDynamicLink;
  t->pfnGetNativeBinary = zetest::moduleGetNativeBinary;
  t->pfnGetGlobalPointer = zetest::moduleGetGlobalPointer;
  t->pfnGetFunctionPointer = zetest::moduleGetFunctionPointer;
  t->pfnGetKernelNames = zetest::moduleGetKernelNames;
  t->pfnInspectLinkageExt = zetest::moduleInspectLinkage;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetModuleBuildLogProcAddrTable(ze_api_version_t, ze_module_build_log_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGetString = zetest::buildLogGetString;
  t->pfnDestroy = zetest::buildLogDestroy;
  return ZE_RESULT_SUCCESS;
}
