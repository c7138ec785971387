// SPIRV-Tools' C handles, each destroyed with its holder: a context, and the diagnostic a call
// may leave (the validator leaves one for a warning even where it succeeds).
#pragma once

#include <spirv-tools/libspirv.h>

#include <string>

namespace devdl::spirv {

class Context {
 public:
  Context() : context_(spvContextCreate(SPV_ENV_UNIVERSAL_1_6)) {}
  ~Context() { spvContextDestroy(context_); }
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  spv_context get() const { return context_; }

 private:
  spv_context context_;
};

class Diagnostic {
 public:
  Diagnostic() = default;
  ~Diagnostic() { spvDiagnosticDestroy(diagnostic_); }
  Diagnostic(const Diagnostic &) = delete;
  Diagnostic &operator=(const Diagnostic &) = delete;

  /// Where a call writes its diagnostic.
  spv_diagnostic *out() { return &diagnostic_; }
  /// What it says, with the word it points at in a binary.
  std::string text() const {
    if (!diagnostic_ || !diagnostic_->error) return "unknown error";
    std::string text = diagnostic_->error;
    if (!diagnostic_->isTextSource) text += " (at word " + std::to_string(diagnostic_->position.index) + ")";
    return text;
  }

 private:
  spv_diagnostic diagnostic_ = nullptr;
};

}  // namespace devdl::spirv
