// The CUDA link, as phases: the plan's inputs as the driver takes them (backend::DriverInputs, a fat
// binary's member chosen between its phases), what devdl links in beside them, then nvJitLink or the
// driver's cuLink. Everything the driver is given is made ready first, so that from cuLinkCreate
// (or nvJitLinkCreate) on only the driver runs.
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/function_table.h"
#include "backend/cuda/link_log.h"
#include "backend/cuda/toolkit.h"
#include "image/readers.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringSet.h>

#include <cstring>
#include <deque>

namespace devdl::backend::cuda {

namespace {

// From this much PTX in a link on, ptxas's threads save more than nvJitLink's load costs (10-15 ms
// on the H100): PTX compiles at about a megabyte in 1.5 s there (bench/README.md, issue 41).
constexpr size_t kPtxForThreads = 64 << 10;

CUjitInputType cuLinkType(JitInputKind kind) {
  return kind == JitInputKind::Ptx ? CU_JIT_INPUT_PTX : kind == JitInputKind::Cubin ? CU_JIT_INPUT_CUBIN
                                                                                     : CU_JIT_INPUT_FATBINARY;
}

}  // namespace

/// What the driver is given, in order, with the copies it points into.
struct Device::ReadyInputs {
  std::vector<JitInput> inputs;
  std::deque<std::string> texts;   // PTX must end with a NUL
  std::deque<std::string> labels;  // of devdl's own inputs

  void add(JitInputKind kind, Bytes data, const std::string *label) {
    if (kind == JitInputKind::Ptx) {
      const std::string &text = texts.emplace_back(asText(data));
      data = Bytes(reinterpret_cast<const uint8_t *>(text.c_str()), text.size() + 1);
    }
    inputs.push_back({kind, data, label});
  }
  void addDevdls(JitInputKind kind, Bytes data, std::string label) {
    add(kind, data, &labels.emplace_back(std::move(label)));
  }
};

llvm::Expected<std::string> Device::linkBinary(std::span<const LinkInput> given, bool forRuntime) {
  if (!linkers_.error.empty()) return fail(ErrorCode::NotFound, linkers_.error);
  // 1. Each image the device takes; 2. a fat binary as the member of it this device is given;
  // 3. each one edited for interposition, instances elsewhere and exported statics.
  Storage scratch;      // fatbin members inflated for this link: the driver copies its inputs
  bool ltoIr = false;   // an input goes to nvJitLink as a fatbin whose LTO-IR runs here
  backend::DriverInputs prepared;
  if (llvm::Error err = prepared.prepare(*this, given, std::nullopt,
                                         [&](const LinkInput &input) { return memberFor(input, scratch, ltoIr); }))
    return err;
  // 4. The images as the driver takes them, then what devdl links in beside them.
  ReadyInputs ready;
  for (const LinkInput &input : prepared.inputs)
    ready.add(input.image->format == ImageFormat::Ptx     ? JitInputKind::Ptx
              : input.image->format == ImageFormat::Cubin ? JitInputKind::Cubin
                                                          : JitInputKind::Fatbin,
              input.image->bytes, &input.label);
  if (llvm::Error err = addDevdlInputs(ready, prepared.inputs, ltoIr, forRuntime)) return err;
  // 5. The driver. PTX compiled in this link: nvJitLink's ptxas compiles each image's functions on
  // DEVDL_JOBS threads, where the driver's compiles them on one.
  size_t ptx = 0;
  for (const JitInput &in : ready.inputs) ptx += in.kind == JitInputKind::Ptx ? in.data.size() : 0;
  const unsigned threads = jobs();
  const bool ptxOnThreads = ptx >= kPtxForThreads && threads > 1;
  // -lto only where there is LTO-IR: nvJitLink refuses -lto without any.
  if (linkers_.jitLink && (ltoIr || linkers_.jitAlways || ptxOnThreads))
    return linkWithJit(ready.inputs, ltoIr, threads, forRuntime);
  return linkWithCuLink(ready.inputs, given.size());
}

llvm::Expected<std::optional<DeviceImage>> Device::memberFor(const LinkInput &input, Storage &scratch,
                                                            bool &ltoIr) const {
  const DeviceImage &image = *input.image;
  if (image.format != ImageFormat::Fatbin) return std::nullopt;
  auto members = readers::listFatbinMembers(image.bytes, scratch);
  if (!members) return inImage(members.takeError(), input.label);
  // nvJitLink takes it whole and picks its LTO-IR under -lto: optimized with every other input.
  // Not where interposition, an instance elsewhere or its statics edit it: devdl edits the PTX
  // (or, for interposition, the cubin) beside it.
  const bool optimizable = linkers_.jitLink && linkers_.lto && hasLtoIrFor(*members, sm_);
  if (optimizable && input.interposed.empty() && input.elsewhere.empty() && input.statics.empty()) {
    ltoIr = true;
    return std::nullopt;
  }
  // A variable reached elsewhere, the program's or its own interposed one, or a static that other
  // programs reach here: only PTX is edited so.
  const std::string_view reached = !input.elsewhere.empty()             ? input.elsewhere.front()
                                   : !input.interposedElsewhere.empty() ? input.interposedElsewhere.front()
                                                                        : std::string_view();
  const bool fromPtx = !reached.empty() || !input.statics.empty();
  // Statics stay the cubin's own where it has no PTX (a program that would reach them is refused).
  const bool hasPtx = !reached.empty() || llvm::any_of(*members, [&](const readers::FatbinMember &m) {
    return m.format == ImageFormat::Ptx && m.readable() && runsOn(m.format, m.arch, sm_);
  });
  if (optimizable && fromPtx && hasPtx && Debug::get().on(Debug::Statistics))
    Debug::get().print(input.label + ": linked from its PTX, not its LTO-IR: " +
                       (reached.empty() ? "it keeps `" + std::string(image.statics.front()) +
                                              "` to itself, whose one instance every program reaches"
                                        : "it reaches `" + std::string(reached) + "` in the program that holds its instance") +
                       ", and nothing of it is inlined across images");
  // The best member for this device: a cubin of the highest compatible version, else PTX; where
  // that member is in NVIDIA's own compression the driver picks from the whole. That member alone
  // is inflated.
  const readers::FatbinMember *best = bestMember(*members, sm_, fromPtx && hasPtx);
  if (!best || !best->readable()) {
    if (input.interposed.empty() && input.elsewhere.empty()) return std::nullopt;
    // Definitions another image interposes made local, and variables whose instance is another
    // program's reached through cells, are edited in a member's copy.
    return fail(ErrorCode::Unsupported,
                input.label + ": " +
                    (input.elsewhere.empty() && input.interposedElsewhere.empty()
                         ? "cannot make `" + std::string(input.interposed.front()) + "` local: the fatbin's member for " +
                               name_ + " is in NVIDIA's compression, which devdl does not read"
                         : "`" + std::string(reached) + "` cannot be reached in another program: the fatbin has no PTX for " +
                               name_ + " that devdl reads, and only PTX is rewritten so"));
  }
  auto bytes = readers::fatbinMemberImage(*best, scratch);
  if (!bytes) return inImage(bytes.takeError(), input.label);
  DeviceImage member = image;
  member.format = best->format;
  member.arch = best->arch;
  member.bytes = *bytes;
  return member;
}

llvm::Error Device::addDevdlInputs(ReadyInputs &ready, std::span<const LinkInput> inputs, bool ltoIr,
                                   bool forRuntime) const {
  // The addresses of the functions the images define, which CUDA does not give: a table linked in
  // where an image takes a function's address (function_table.h). Not with LTO-IR, whose functions
  // become local to the kernels; not for the CUDA runtime, which reaches none of them (beside the
  // table, virtual destructors hit an illegal instruction on the H100: docs/limits.md).
  const bool pointers = llvm::any_of(ready.inputs, [](const JitInput &in) {
    return in.kind == JitInputKind::Fatbin || takesFunctionAddresses(in.data, in.kind == JitInputKind::Ptx);
  });
  if (!ltoIr && !forRuntime && pointers) {
    std::vector<std::string_view> functions;
    llvm::StringSet<> named;  // each once: a library's thousand functions are not compared pairwise
    for (const LinkInput &input : inputs)
      for (const Symbol &symbol : input.image->symbols)
        if (symbol.kind == SymbolKind::Function && !llvm::is_contained(input.interposed, symbol.name) &&
            named.insert(symbol.name).second)
          functions.push_back(symbol.name);
    if (std::string table = functionTablePtx(functions, sm_); !table.empty())
      ready.addDevdls(JitInputKind::Ptx, asBytes(table), "devdl's table of functions");
  }
  // The runtime finds the module it loads by a kernel of devdl's, which it registers.
  if (forRuntime)
    ready.addDevdls(JitInputKind::Ptx,
                    asBytes(ptxHeader(sm_) + ".visible .entry " + kRuntimeAnchor + "()\n{\n  ret;\n}\n"),
                    "devdl's kernel for the CUDA runtime");
  // The device runtime's code, where an image launches kernels or calls the runtime from the device.
  auto runtimeCode = deviceRuntimeFor(inputs, linkers_.deviceRuntime);
  if (!runtimeCode) return runtimeCode.takeError();
  if (*runtimeCode)
    ready.addDevdls(JitInputKind::Fatbin, **runtimeCode,
                    "the CUDA device runtime (" + linkers_.deviceRuntime->path + ")");
  return llvm::Error::success();
}

llvm::Expected<std::string> Device::linkWithCuLink(std::span<const JitInput> ready, size_t images) const {
  std::string errorLog(16384, '\0'), infoLog(16384, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog.data(), reinterpret_cast<void *>(errorLog.size()), infoLog.data(),
                    reinterpret_cast<void *>(infoLog.size())};
  auto logText = [&] {
    errorLog.resize(std::strlen(errorLog.c_str()));
    return describeLinkLog(errorLog);
  };
  CallTimes times;
  ContextScope current(api_, context_);
  CUlinkState state = nullptr;
  if (CUresult err = api_.cuLinkCreate(4, options, values, &state); err != CUDA_SUCCESS)
    return cudaFailure("cuLinkCreate", err);
  times.mark("cuLinkCreate");
  struct Destroy {
    const Api &api;
    CUlinkState state;
    ~Destroy() { api.cuLinkDestroy(state); }
  } destroy{api_, state};
  for (const JitInput &in : ready) {
    if (CUresult err = api_.cuLinkAddData(state, cuLinkType(in.kind), const_cast<uint8_t *>(in.data.data()),
                                          in.data.size(), in.label->c_str(), 0, nullptr, nullptr);
        err != CUDA_SUCCESS) {
      const std::string log = logText();
      return fail(ErrorCode::Unsupported, *in.label + ": cuLinkAddData on " + name_ + " failed: " + errorName(err) +
                                              (log.empty() ? "" : "\n" + log));
    }
    times.mark("cuLinkAddData");
  }
  void *cubin = nullptr;
  size_t size = 0;
  if (CUresult err = api_.cuLinkComplete(state, &cubin, &size); err != CUDA_SUCCESS) {
    // The driver's log says which symbol is missing where, in devdl's words.
    const std::string log = logText();
    const bool undefined = log.find(": undefined device symbol `") != std::string::npos;
    return fail(undefined ? ErrorCode::Unresolved : ErrorCode::Unsupported,
                (log.empty() ? "" : log + "\n") + "cuLinkComplete on " + name_ + " failed: " + errorName(err));
  }
  times.mark("cuLinkComplete");
  times.print("linked " + std::to_string(images) + " images on " + name_);
  // The linked cubin belongs to the link state: copied before the state is destroyed.
  return std::string(static_cast<const char *>(cubin), size);
}

llvm::Expected<std::string> Device::linkWithJit(std::span<const JitInput> inputs, bool lto, unsigned threads,
                                                bool whole) const {
  CallTimes times;
  std::string oneModule = whole ? "a runtime loads it" : "";  // why the program is one module
  const std::vector<ProgramPart> parts =
      lto && !whole ? planLtoParts(inputs, sm_, threads, &oneModule) : std::vector<ProgramPart>(1);
  auto version = [&] {
    auto known = nvJitLinkVersion(*linkers_.jitLink);
    return "nvJitLink " + (known ? *known : llvm::toString(known.takeError())) + " (" + nvJitLinkOptions(sm_, lto) +
           ")";
  };
  const bool statistics = Debug::get().on(Debug::Statistics);
  if (parts.size() > 1) {
    times.mark("planned the parts");
    std::vector<std::string> partTimes;
    auto modules = linkLtoParts(*linkers_.jitLink, inputs, sm_, parts, threads, statistics ? &partTimes : nullptr);
    if (!modules) return modules.takeError();
    times.mark("nvJitLink");
    if (statistics) {
      std::string each;
      for (size_t i = 0; i < parts.size(); ++i)
        each += "\n  part " + std::to_string(i) + ": " + std::to_string(parts[i].kernels.size()) + " kernels, " +
                std::to_string(parts[i].size) + " bytes of PTX; " + partTimes[i];
      times.print("linked " + std::to_string(inputs.size()) + " images for " + name_ + " with " + version() + " as " +
                  std::to_string(parts.size()) + " modules on as many threads" + each);
    }
    return packModules(*modules);
  }
  // One module: nvJitLink's own threads for the optimization and ptxas's, where there are several.
  std::vector<std::string> more = ptxasThreads(threads);
  if (lto && threads > 1) more.push_back("-split-compile=" + std::to_string(threads));
  std::string jitTimes;
  auto cubin = linkWithNvJitLink(*linkers_.jitLink, inputs, sm_, lto, more, statistics ? &jitTimes : nullptr);
  if (!cubin) return cubin.takeError();
  times.mark("nvJitLink");
  if (statistics)
    times.print("linked " + std::to_string(inputs.size()) + " images for " + name_ + " with " + version() + ", a " +
                std::to_string(cubin->size()) + "-byte cubin" + (oneModule.empty() ? "" : "; one module: " + oneModule) +
                "\n  " + jitTimes);
  return cubin;
}

}  // namespace devdl::backend::cuda
