// The SPIRV-LLVM-Translator run in a helper process (devdl-translate), so that no module can end
// the host process: the translator exits, asserts or faults on some modules the SPIR-V validator
// accepts, more kinds than devdl can refuse beforehand. A helper that dies, hangs past its bound
// or writes what it should not is an error; the host and the next link are untouched.
//
// The helper: DEVDL_TRANSLATOR where set (not in secure execution), else the one installed
// beside the library that holds this code, at kTranslatorBesideLibrary from its directory (as
// ld.so finds what it needs from its own file). DEVDL_TRANSLATOR_TIMEOUT bounds each run
// (seconds; kDefaultTranslatorTimeout where unset).
#pragma once

#include "backend/spirv/place_variables.h"
#include "backend/spirv/translator_protocol.h"

#include <llvm/Support/Error.h>

#include <chrono>
#include <string>

namespace devdl::backend {

/// Where the helper lies, from the directory of the library (or program) that holds devdl.
inline constexpr const char *kTranslatorBesideLibrary = "devdl/libexec/devdl-translate";

inline constexpr std::chrono::seconds kDefaultTranslatorTimeout{600};

/// The helper this process runs, as DEVDL_TRANSLATOR or the library's place says.
std::string translatorPath();

/// How long one translation may take: DEVDL_TRANSLATOR_TIMEOUT, else kDefaultTranslatorTimeout.
std::chrono::milliseconds translatorTimeout();

/// Starts a helper ahead of the first translation where none is idle (a device that may
/// translate is being opened): it loads LLVM while the host goes on, and the first link finds it
/// ready.
void startTranslatorAhead();
/// Ends the helpers started ahead that never served (the device opened does not translate).
void stopTranslatorsAhead();

/// Runs `request` in a helper: its Result's bytes, or the failure it said, or why it gave
/// neither. `place` answers the helper's Layout where the request places variables.
llvm::Expected<std::string> translateInHelper(const translator::Request &request, PlaceVariables place = nullptr);

}  // namespace devdl::backend
