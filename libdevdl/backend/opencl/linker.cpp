// How an OpenCL device links a plan's images (Linker), by what it can take: each image compiled
// as IL and the objects joined by the driver's linker (with native binaries, the compiled objects
// they are) where it has both; else devdl's software link, built as IL where the device takes it,
// else translated to SPIR (the program's variables moved to host memory where the device builds
// each kernel apart). devdl's copy kernels join a program whose variables the host has no other
// way to.
#include "backend/opencl/linker.h"
#include "backend/opencl/kept_regions.h"
#include "backend/opencl/opencl_info.h"
#include "backend/opencl/program_builder.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/link.h"
#include "backend/spirv/place_variables.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"

#include "image/instance_cells.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/xxh3.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

namespace devdl::backend::opencl {

namespace {

// The constants set, as the translation applies them: each value in 8 bytes (little-endian hosts).
std::vector<SpecConstant> specConstantValues(const SpecConstants &specs) {
  std::vector<SpecConstant> values;
  for (const auto &[id, bytes] : specs) {
    uint64_t value = 0;
    std::memcpy(&value, bytes.data(), std::min(bytes.size(), sizeof value));
    values.emplace_back(id, value);
  }
  return values;
}

}  // namespace

llvm::Expected<std::unique_ptr<backend::Program>> Linker::link(std::vector<LinkInput> &inputs,
                                                              std::string *binary) const {
  const LinkInput *native = nullptr, *spirv = nullptr;
  for (const LinkInput &input : inputs) (input.image->format == ImageFormat::OpenClBinary ? native : spirv) = &input;
  // Native binaries are compiled objects: only the device's linker joins them, to each other
  // and to SPIR-V compiled as IL (the software link and SPIR have no place for them).
  if (native && spirv && !device_.caps.spirvIl)
    return fail(ErrorCode::Unsupported, native->label + ": OpenCL device " + device_.name +
                                            " takes no SPIR-V IL, so its native binaries link only with each other, "
                                            "not with " + spirv->label);
  CopyKernels copying;
  if (device_.copiesThroughKernels()) addCopyKernels(inputs, copying);
  std::string spirBuilt;  // the bitcode, where the program was built from SPIR
  const bool byDriver = native || (device_.caps.spirvIl && device_.caps.linker);
  auto program = byDriver ? linkByDriver(inputs) : linkBySoftware(inputs, spirBuilt);
  if (!program) return program.takeError();
  if (binary) *binary = builder_.binaryOf(**program, spirBuilt);
  return std::move(*program);
}

void Linker::addCopyKernels(std::vector<LinkInput> &inputs, CopyKernels &copying) const {
  // Where devdl does not move the program's variables to host memory and the driver gives no
  // addresses of them, the host reads and writes them through kernels of devdl's: a module of
  // them for each SPIR-V image exporting variables (those the link sees), linked with the
  // images, by devdl or by the driver.
  for (size_t i = 0, count = inputs.size(); i < count; ++i) {
    const LinkInput input = inputs[i];  // a copy: inputs grows
    std::vector<std::string> variables;
    for (const Symbol &s : input.image->symbols)
      if (s.kind == SymbolKind::Variable && !llvm::is_contained(input.interposed, s.name)) variables.emplace_back(s.name);
    if (variables.empty() || input.image->format != ImageFormat::SpirV) continue;
    if (!input.image->unvalidated.empty()) {  // devdl writes no kernels against a module it cannot vouch for
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("no copy kernels for the variables of " + input.label +
                           ": devdl's SPIR-V validator could not vouch for it (" + std::string(input.image->unvalidated) + ")");
      continue;
    }
    CallTimes times;
    auto kernels = copyKernelsFor(*input.image, variables);
    times.mark("made");
    if (!kernels) {
      const std::string why = llvm::toString(kernels.takeError());
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("no copy kernels for the variables of " + input.label + ": " + why);
      continue;
    }
    DeviceImage &image = copying.images.emplace_back();
    image.format = ImageFormat::SpirV;
    const std::vector<uint32_t> &words = *copying.words.emplace_back(std::move(*kernels));
    image.bytes = Bytes(reinterpret_cast<const uint8_t *>(words.data()), words.size() * 4);
    inputs.push_back({&image, "devdl's copy kernels for " + input.label});
    times.print(inputs.back().label);
  }
}

llvm::Expected<std::unique_ptr<backend::Program>> Linker::linkByDriver(std::span<const LinkInput> inputs) const {
  // The driver compiles every kernel when it links: a program of many is linked in parts, in as
  // many helper processes, where its kernels can be separated and their code repays them.
  std::string whole;
  CallTimes times;
  uint64_t bytes = 0;
  for (const LinkInput &input : inputs) bytes += input.image->bytes.size();
  std::vector<ProgramPart> parts(1);
  if (bytes >= kSpirvForParts)
    parts = planParts(inputs, static_cast<unsigned>(std::min<uint64_t>(jobs(), bytes / kSpirvPerPart)), &whole);
  uint64_t code = 0;
  for (const ProgramPart &part : parts) code += part.size;
  if (parts.size() > 1 && code < kSpirvForParts) {
    whole = "its kernels' code is " + std::to_string(code) + " bytes, less than helpers' start repays";
    parts.resize(1);
  }
  if (parts.size() == 1) {
    if (Debug::get().on(Debug::Statistics) && !whole.empty())
      Debug::get().print("linked as one program on " + device_.name + ": " + whole);
    return linkObjects(inputs);
  }
  times.mark("planned the parts");
  auto linked = linkParts(inputs, parts);
  if (!linked) {
    // In this process, as one program: what fails there fails the link, said as it is here.
    const std::string why = llvm::toString(linked.takeError());
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("linked as one program on " + device_.name + ": its parts were not: " + why);
    return linkObjects(inputs);
  }
  times.mark("built in helpers and loaded");
  if (Debug::get().on(Debug::Statistics)) {
    std::string each;
    for (size_t i = 0; i < parts.size(); ++i)
      each += "\n  part " + std::to_string(i) + ": " + std::to_string(parts[i].kernels.size()) + " kernels, " +
              std::to_string(parts[i].variables.size()) + " variables, " + std::to_string(parts[i].size) +
              " bytes of SPIR-V";
    times.print("linked " + std::to_string(inputs.size()) + " images on " + device_.name + " as " +
                std::to_string(parts.size()) + " programs in as many helper processes" + each);
  }
  return std::unique_ptr<backend::Program>(std::move(*linked));
}

llvm::Expected<std::unique_ptr<backend::Program>> Linker::linkBySoftware(std::span<const LinkInput> inputs,
                                                                        std::string &spirBuilt) const {
  // The software link, then the linked module as IL where the device takes it, else as SPIR.
  std::vector<const DeviceImage *> images;
  std::vector<std::string> labels;
  for (const LinkInput &input : inputs) {
    images.push_back(input.image);
    labels.push_back(input.label);
    // What the translator would end the process on, refused naming the image it came from.
    if (device_.caps.spirvIl) continue;
    std::vector<uint32_t> words(input.image->bytes.size() / 4);
    std::memcpy(words.data(), input.image->bytes.data(), words.size() * 4);
    if (llvm::Error err = checkTranslatable(words)) return inImage(std::move(err), input.label);
  }
  CallTimes times;  // where a cold build's time goes
  auto linked = linkSpirv(images, labels, device_.caps.variablePointers);
  if (!linked) return linked.takeError();
  times.mark("SPIRV-Tools link");
  // The constants set, under the SpecIds they have in the linked module.
  SpecConstants specs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].specConstants)
      for (const auto &[id, value] : *inputs[i].specConstants) specs[linkedSpecId(i, id)] = value;
  if (device_.caps.spirvIl) {
    // Optimized across the images where the translator can write back what LLVM made, with the
    // constants applied; else as linked, the driver setting the constants.
    if (device_.lto) {
      auto optimized = optimizeSpirv(*linked, specConstantValues(specs));
      if (optimized) return builder_.buildIl(*optimized, {});
      const std::string why = llvm::toString(optimized.takeError());
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("not optimized across images for " + device_.name + ": " + why);
    }
    return builder_.buildIl(*linked, specs);
  }
  return buildLinkedAsSpir(*linked, specConstantValues(specs), inputs, spirBuilt, times);
}

llvm::Expected<std::unique_ptr<backend::Program>> Linker::buildLinkedAsSpir(const std::vector<uint32_t> &linked,
                                                                           const std::vector<SpecConstant> &values,
                                                                           std::span<const LinkInput> inputs,
                                                                           std::string &spirBuilt,
                                                                           CallTimes &times) const {
  // Where the device's kernels are built apart, each with its own copy of the program's
  // variables, they move to host memory, at an address that follows from the program.
  std::unique_ptr<HostVariables> placed;
  auto place = [&](const VariableLayout &layout) -> llvm::Expected<uint64_t> {
    sweepKept(device_.api);
    std::string constants;
    for (const auto &[id, value] : values) {
      constants.append(reinterpret_cast<const char *>(&id), sizeof id);
      constants.append(reinterpret_cast<const char *>(&value), sizeof value);
    }
    const std::string_view words(reinterpret_cast<const char *>(linked.data()), linked.size() * 4);
    auto region = HostVariables::place(layout, xxh3::hash64({words, constants}));
    if (!region) return region.takeError();
    placed = std::move(*region);
    return placed->address();
  };
  auto spir = spirvToSpir(linked, values, device_.lto,
                          device_.placesVariables() ? PlaceVariables(place) : PlaceVariables(nullptr));
  if (!spir) return inImage(spir.takeError(), inputs.front().label);  // the program's root
  times.mark(device_.lto ? "translation to SPIR and -O2" : "translation to SPIR");
  auto built = builder_.buildSpir(*spir);
  if (!built) return built.takeError();
  (*built)->holdVariables(std::move(placed));
  spirBuilt = std::move(*spir);
  times.mark("clBuildProgram");
  times.print("built " + std::to_string(inputs.size()) + " images as SPIR on " + device_.name);
  return std::unique_ptr<backend::Program>(std::move(*built));
}

llvm::Expected<std::shared_ptr<const std::vector<uint32_t>>> Linker::copyKernelsFor(
    const DeviceImage &image, std::span<const std::string> variables) const {
  const xxh3::Hash128 bytes = xxh3::hash128(image.bytes.data(), image.bytes.size());
  std::string names;
  for (const std::string &name : variables) names.append(name).push_back('\0');
  const std::array<uint64_t, 3> key{bytes.low, bytes.high, xxh3::hash64(names.data(), names.size())};
  {
    std::lock_guard lock(copyKernelsMutex_);
    if (auto it = copyKernels_.find(key); it != copyKernels_.end()) return it->second;
  }
  std::vector<uint32_t> words(image.bytes.size() / 4);
  std::memcpy(words.data(), image.bytes.data(), words.size() * 4);
  auto made = copyKernels(words, variables);
  if (!made) return made.takeError();
  auto kept = std::make_shared<const std::vector<uint32_t>>(std::move(*made));
  std::lock_guard lock(copyKernelsMutex_);
  if (copyKernels_.size() >= kCopyKernelsKept) copyKernels_.clear();
  return copyKernels_.try_emplace(key, std::move(kept)).first->second;
}

llvm::Expected<std::unique_ptr<Program>> Linker::linkObjects(std::span<const LinkInput> inputs) const {
  // Each image is compiled on its own, imports left open (a native binary is compiled
  // already); the device's linker resolves them, as the plan bound them, since the plan holds
  // one definition of each import.
  std::vector<std::unique_ptr<Program>> objects;
  std::vector<cl_program> handles;
  CallTimes times;
  for (const LinkInput &input : inputs) {
    if (input.image->format == ImageFormat::OpenClBinary) {
      auto object = builder_.nativeObject(input.image->bytes);
      if (!object) return fail(ErrorCode::Unsupported, input.label + ": " + llvm::toString(object.takeError()));
      handles.push_back((*object)->get());
      objects.push_back(std::move(*object));
      times.mark("clCreateProgramWithBinary");
      continue;
    }
    cl_int err = CL_SUCCESS;
    cl_program program = device_.api.clCreateProgramWithIL(device_.context, input.image->bytes.data(),
                                                           input.image->bytes.size(), &err);
    if (err != CL_SUCCESS) return inImage(clFailure("clCreateProgramWithIL", err), input.label);
    objects.push_back(builder_.own(program));
    if (input.specConstants)
      if (llvm::Error e = builder_.specialize(program, *input.specConstants)) return inImage(std::move(e), input.label);
    err = device_.api.clCompileProgram(program, 1, &device_.id, device_.options.c_str(), 0, nullptr, nullptr, nullptr,
                                       nullptr);
    if (err != CL_SUCCESS) {
      const std::string log = buildLog(device_.api, program, device_.id);
      return fail(ErrorCode::Unsupported, input.label + ": clCompileProgram on " + device_.name + " failed: " +
                                              errorName(err) + (log.empty() ? "" : "\n" + log));
    }
    handles.push_back(program);
    times.mark("clCompileProgram");
  }
  cl_int err = CL_SUCCESS;
  cl_program linked = device_.api.clLinkProgram(device_.context, 1, &device_.id, "",
                                                static_cast<cl_uint>(handles.size()), handles.data(), nullptr, nullptr,
                                                &err);
  if (err != CL_SUCCESS || !linked) {
    // A program object may come back with the log even when linking failed.
    const std::string log = linked ? buildLog(device_.api, linked, device_.id) : std::string();
    if (linked) device_.api.clReleaseProgram(linked);
    std::string images;
    for (const LinkInput &input : inputs) images += (images.empty() ? "" : ", ") + input.label;
    return fail(ErrorCode::Unsupported, "clLinkProgram on " + device_.name + " of " + images +
                                            " failed: " + errorName(err) + (log.empty() ? "" : "\n" + log));
  }
  times.mark("clLinkProgram");
  times.print("linked " + std::to_string(inputs.size()) + " images on " + device_.name);
  return builder_.own(linked);
}

}  // namespace devdl::backend::opencl
