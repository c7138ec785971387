// PTX text as devdl reads it: tokens, top-level statements and what they declare; shared by the
// reader (ptx_reader.cpp) and the edits a link makes (ptx_edits.cpp). Internal to libdevdl/image.
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/Error.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>
#include <vector>

namespace devdl::readers {

class PtxScanner {
 public:
  explicit PtxScanner(std::string_view text) : text_(text) {}

  /// The next token: an identifier or directive, a number, or one punctuation character.
  /// Empty at the end of the text.
  std::string_view next() {
    skipSpaceAndComments();
    if (pos_ >= text_.size()) return {};
    size_t start = pos_;
    char c = text_[pos_];
    if (c == '"') {  // string literal (.file directives): skip it whole
      for (++pos_; pos_ < text_.size() && text_[pos_] != '"'; ++pos_)
        if (text_[pos_] == '\\') ++pos_;
      pos_ = std::min(pos_ + 1, text_.size());
    } else if (isIdentChar(c)) {
      while (pos_ < text_.size() && isIdentChar(text_[pos_])) ++pos_;
    } else {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  /// The rest of the current line, for directives that end at the line (.version, .target).
  std::string_view restOfLine() {
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    std::string_view line = text_.substr(pos_, end - pos_);
    pos_ = end;
    return line;
  }

  /// Skips to after the '}' that closes a block whose '{' was just read (nested blocks,
  /// comments and strings included), looking only at what can open or close one: bodies are
  /// most of a module's text. False where the text ends first.
  bool skipBlock() {
    int depth = 1;
    auto interesting = [](char c) { return c == '{' || c == '}' || c == '"' || c == '/'; };
    while ((pos_ = std::find_if(text_.begin() + pos_, text_.end(), interesting) - text_.begin()) < text_.size()) {
      const char c = text_[pos_];
      if (c == '/') {
        if (text_.substr(pos_, 2) == "//" || text_.substr(pos_, 2) == "/*") skipSpaceAndComments();
        else ++pos_;
      } else if (c == '"') {
        next();
      } else {
        ++pos_;
        if (c == '{') ++depth;
        else if (--depth == 0) return true;
      }
    }
    pos_ = text_.size();
    return false;
  }

  bool failed() const { return unterminatedComment_; }
  size_t position() const { return pos_; }

 private:
  static bool isIdentChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' || c == '.';
  }

  void skipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (text_.substr(pos_, 2) == "//") {
        size_t end = text_.find('\n', pos_);
        pos_ = end == std::string_view::npos ? text_.size() : end + 1;
      } else if (text_.substr(pos_, 2) == "/*") {
        size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) {
          unterminatedComment_ = true;
          pos_ = text_.size();
        } else {
          pos_ = end + 2;
        }
      } else {
        return;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  bool unterminatedComment_ = false;
};

/// A name: not a directive or a number.
bool isIdentifier(std::string_view t);

/// One top-level statement: its tokens up to ';' or up to a body's '{', without the body.
struct Statement {
  std::vector<std::string_view> tokens;
};

/// What a top-level statement declares: a kernel, function or variable, defined or imported, and
/// its linkage directive (.visible, .weak or .common; empty for a module-local definition).
struct Declared {
  std::string_view name;
  SymbolKind kind;  // Import for .extern
  std::string_view linkage;
};

/// What `st` declares, if anything.
std::optional<Declared> declarationOf(const Statement &st);
/// A variable of the module's own that it may write: in the global space, without a linkage
/// directive. Not the compiler's (`$str`, a string literal: no C name starts with `$`).
bool isStatic(const Declared &d, const Statement &st);
/// The text of a PTX module: up to the NUL that fat binaries and the CUDA driver end it with.
llvm::Expected<std::string_view> ptxText(Bytes bytes);
/// Calls `onStatement` for each top-level statement of the text, in order, and gives the module's
/// .version and .target.
llvm::Error walkPtx(std::string_view text, llvm::function_ref<void(const Statement &)> onStatement,
                    std::string_view &version, std::string_view &target);

}  // namespace devdl::readers
