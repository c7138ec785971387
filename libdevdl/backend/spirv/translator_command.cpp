// The machine's llvm-spirv-15 as devdl's reader of SPIR-V into LLVM IR (spirv/translator_command.h).
#include "backend/spirv/translator_command.h"
#include "backend/spirv/translator_limits.h"
#include "backend/spirv/translator_process.h"
#include "backend/spirv/words.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/helper_process.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FileUtilities.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>
#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <map>

namespace devdl::backend {

namespace {
constexpr const char *kDebiansCommand = "/usr/bin/llvm-spirv-15";
}  // namespace

const std::optional<std::string> &translatorCommand() {
  static const std::optional<std::string> command = []() -> std::optional<std::string> {
    if (const char *named = devdlVariable("DEVDL_LLVM_SPIRV")) {
      if (!*named) return std::nullopt;
      // A name without a slash is looked for on PATH, as execvp looks; one not found is kept as
      // it is, for the error to name.
      if (std::string_view(named).find('/') == std::string_view::npos)
        if (auto found = llvm::sys::findProgramByName(named)) return *found;
      return std::string(named);
    }
    // A secure-execution process takes no program from its caller's PATH: only Debian's.
    if (secureExecution())
      return llvm::sys::fs::can_execute(kDebiansCommand) ? std::optional<std::string>(kDebiansCommand) : std::nullopt;
    if (auto found = llvm::sys::findProgramByName("llvm-spirv-15")) return *found;
    return std::nullopt;
  }();
  return command;
}

std::vector<uint32_t> withSpecConstantDefaults(std::span<const uint32_t> words,
                                               std::span<const SpecConstant> specConstants) {
  std::vector<uint32_t> specialized(words.begin(), words.end());
  if (specConstants.empty()) return specialized;
  std::map<uint32_t, uint64_t> bySpecId(specConstants.begin(), specConstants.end());
  std::map<uint32_t, uint64_t> byResult;  // the constants' result ids, and their values
  walkInstructions(words, [&](size_t at, size_t count) {
    if ((words[at] & 0xffff) == SpvOpDecorate && count == 4 && words[at + 2] == SpvDecorationSpecId)
      if (auto it = bySpecId.find(words[at + 3]); it != bySpecId.end()) byResult[words[at + 1]] = it->second;
    return true;
  });
  walkInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (count < 3) return true;
    auto it = byResult.find(words[at + 2]);
    if (it == byResult.end()) return true;
    if (opcode == SpvOpSpecConstantTrue || opcode == SpvOpSpecConstantFalse)
      specialized[at] = (words[at] & 0xffff0000u) | (it->second ? SpvOpSpecConstantTrue : SpvOpSpecConstantFalse);
    else if (opcode == SpvOpSpecConstant)  // one word for 32 bits or fewer, two for 64, low first
      for (size_t word = 0; word + 3 < count && word < 2; ++word)
        specialized[at + 3 + word] = static_cast<uint32_t>(it->second >> (32 * word));
    return true;
  });
  return specialized;
}

llvm::Expected<std::unique_ptr<llvm::Module>> readByCommand(const std::string &command, llvm::LLVMContext &context,
                                                            std::span<const uint32_t> words,
                                                            std::span<const SpecConstant> specConstants) {
  const std::vector<uint32_t> translated = withoutUnreadableHints(withSpecConstantDefaults(words, specConstants));
  // Its input is a file (it reads no standard input), its output the helper's channel.
  llvm::SmallString<128> input;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("devdl-translate", "spv", input))
    return fail(ErrorCode::Io, "a temporary file for the SPIR-V translator: " + ec.message());
  llvm::FileRemover removeInput(input);
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(input, ec);
    if (ec) return fail(ErrorCode::Io, std::string(input) + ": " + ec.message());
    out.write(reinterpret_cast<const char *>(translated.data()), translated.size() * 4);
  }
  auto helper = HelperProcess::start(command, "the SPIR-V translator " + command,
                                     {"-r", "--spirv-target-env=CL1.2", "--spirv-ext=+all", std::string(input), "-o", "-"});
  if (!helper) return helper.takeError();
  helper->beginExchange(translatorTimeout());
  // LLVM bitcode of a module is a few times its SPIR-V at most: a command that writes far more is
  // not translating it.
  auto bitcode = helper->receiveUntilExit(std::max<size_t>(size_t(64) << 20, translated.size() * 4 * 32));
  if (!bitcode) return bitcode.takeError();
  auto module = llvm::parseBitcodeFile(llvm::MemoryBufferRef(*bitcode, command), context);
  if (!module)
    return fail(ErrorCode::BadFormat, command + " wrote what LLVM " LLVM_VERSION_STRING " cannot read: " +
                                          llvm::toString(module.takeError()));
  std::string broken;
  llvm::raw_string_ostream reason(broken);
  if (llvm::verifyModule(**module, &reason))
    return fail(ErrorCode::BadFormat, "SPIR-V to LLVM translation by " + command + " made invalid LLVM IR: " + reason.str());
  return std::move(*module);
}

}  // namespace devdl::backend
