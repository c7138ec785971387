// How the test driver compiles a module: SPIR-V linked with SPIRV-Tools' linker, translated to
// SPIR with its variables placed in host memory, and built by PoCL.
#include "driver.h"

#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"

#include <llvm/Support/Error.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/linker.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zetest {
namespace {

std::string clBuildLog(cl_program program) {
  size_t size = 0;
  clGetProgramBuildInfo(program, driver().cl.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  clGetProgramBuildInfo(program, driver().cl.device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

// Builds SPIR bitcode or a PoCL binary into a program; "" or the log.
std::string buildBinary(std::string_view binary, const char *options, std::shared_ptr<Built> *out) {
  const Cl &cl = driver().cl;
  const auto *bytes = reinterpret_cast<const unsigned char *>(binary.data());
  const size_t size = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(cl.context, 1, &cl.device, &size, &bytes, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (program) clReleaseProgram(program);
    return "clCreateProgramWithBinary failed (" + std::to_string(err != CL_SUCCESS ? err : status) + ")";
  }
  auto built = std::make_shared<Built>();
  built->program = program;
  if ((err = clBuildProgram(program, 1, &cl.device, options, nullptr, nullptr)) != CL_SUCCESS)
    return "clBuildProgram failed (" + std::to_string(err) + "): " + clBuildLog(program);
  *out = std::move(built);
  return {};
}

// Compiles linked SPIR-V for the device: translated to SPIR with its variables moved to host
// memory (devdl's own placement, as for PoCL), built by PoCL. "" or the log.
std::string buildSpirv(const std::vector<uint32_t> &words, std::shared_ptr<Built> *out) {
  if (llvm::Error err = devdl::backend::checkTranslatable(words)) return llvm::toString(std::move(err));
  std::unique_ptr<devdl::test::HostVariables> variables;  // until the program holds them
  auto spir = devdl::backend::inProcess::spirvToSpir(words, {}, false, devdl::test::placeInto(variables));
  if (!spir) return llvm::toString(spir.takeError());
  if (std::string why = buildBinary(*spir, "-x spir -spir-std=1.2", out); !why.empty()) return why;
  (*out)->variables = std::move(variables);
  return {};
}

// Links SPIR-V modules with SPIRV-Tools' linker (the driver's own, as Intel's has its own):
// `partial` leaves imports nothing defines, `library` keeps the exports.
std::string linkSpirv(const std::vector<const std::vector<uint32_t> *> &inputs, bool partial, bool library,
                      std::vector<uint32_t> *out) {
  if (inputs.size() == 1) {
    *out = *inputs.front();
    devdl::backend::unnameLocalVariables(*out);  // a global pointer is asked by the exported name
    return {};
  }
  spvtools::Context context(SPV_ENV_UNIVERSAL_1_6);
  std::string messages;
  context.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    messages += std::string(messages.empty() ? "" : "\n") + message;
  });
  // Every input raised to the highest SPIR-V version among them (SPIRV-Tools 2023.1 refuses to
  // link different versions; a later version reads an earlier one's modules).
  uint32_t version = 0;
  for (const auto *words : inputs) version = std::max(version, (*words)[1]);
  std::vector<std::vector<uint32_t>> raised;
  raised.reserve(inputs.size());
  std::vector<const uint32_t *> binaries;
  std::vector<size_t> sizes;
  for (const auto *words : inputs) {
    raised.push_back(*words);
    raised.back()[1] = version;
    devdl::backend::unnameLocalVariables(raised.back());
    binaries.push_back(raised.back().data());
    sizes.push_back(raised.back().size());
  }
  spvtools::LinkerOptions options;
  options.SetAllowPartialLinkage(partial);
  options.SetCreateLibrary(partial || library);
  std::vector<uint32_t> linked;
  if (spvtools::Link(context, binaries.data(), sizes.data(), binaries.size(), &linked, options) != SPV_SUCCESS)
    return "SPIR-V link failed: " + messages;
  // One variable per builtin, as a driver's compiler pairs them (SPIRV-Tools' linker does not).
  auto merged = devdl::backend::mergeBuiltinVariables(std::move(linked));
  if (!merged) return llvm::toString(merged.takeError());
  *out = std::move(*merged);
  return {};
}

}  // namespace zetest
