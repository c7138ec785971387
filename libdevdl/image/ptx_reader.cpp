// PTX text: the module directives (.version, .target) and the linkage of top-level .entry, .func
// and .global/.const declarations. Bodies and initializers are skipped by brace matching.
#include "image/readers.h"
#include "support/error.h"

#include <cctype>

namespace devdl::readers {

namespace {

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

  bool failed() const { return unterminatedComment_; }

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

bool isIdentifier(std::string_view t) {
  return !t.empty() && t[0] != '.' && !std::isdigit(static_cast<unsigned char>(t[0])) &&
         (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_' || t[0] == '$' || t[0] == '%');
}

// One top-level statement: its tokens up to ';' or up to a body's '{', without the body.
struct Statement {
  std::vector<std::string_view> tokens;
};

void addDeclaration(DeviceImage &image, const Statement &st) {
  const auto &t = st.tokens;
  bool isExtern = false, isVisible = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ".extern") isExtern = true;
    else if (t[i] == ".visible" || t[i] == ".weak" || t[i] == ".common") isVisible = true;
    else if (t[i] == ".entry") {
      if (i + 1 < t.size() && isIdentifier(t[i + 1]) && !isExtern)
        image.symbols.push_back({t[i + 1], SymbolKind::Kernel});
      return;
    } else if (t[i] == ".func") {
      size_t j = i + 1;
      if (j < t.size() && t[j] == "(") {  // return parameters: skip to the matching ')'
        int depth = 0;
        for (; j < t.size(); ++j) {
          if (t[j] == "(") ++depth;
          else if (t[j] == ")" && --depth == 0) break;
        }
        ++j;
      }
      if (j < t.size() && isIdentifier(t[j])) {
        if (isExtern) {
          if (isImportableName(t[j])) image.symbols.push_back({t[j], SymbolKind::Import});
        } else if (isVisible) {
          image.symbols.push_back({t[j], SymbolKind::Function});
        }
      }
      return;
    } else if (t[i] == ".global" || t[i] == ".const") {
      for (size_t j = i + 1; j < t.size(); ++j) {
        if (!isIdentifier(t[j])) continue;
        if (isExtern) {
          if (isImportableName(t[j])) image.symbols.push_back({t[j], SymbolKind::Import});
        } else if (isVisible) {
          image.symbols.push_back({t[j], SymbolKind::Variable});
        }
        return;
      }
      return;
    }
  }
}

}  // namespace

llvm::Error readPtx(DeviceImage &image) {
  std::string_view text = asText(image.bytes);
  // Fat binaries and the CUDA driver hand PTX around NUL-terminated.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    if (text.find_first_not_of('\0', nul) != std::string_view::npos)
      return fail(ErrorCode::BadFormat, "invalid PTX: NUL byte inside the text");
    text = text.substr(0, nul);
  }
  PtxScanner scanner(text);
  std::string_view version, target;
  Statement st;
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (tok == "{") {
      bool initializer = false;
      for (auto t : st.tokens) initializer |= t == "=";
      int depth = 1;
      while (depth > 0) {
        std::string_view inner = scanner.next();
        if (inner.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
        if (inner == "{") ++depth;
        else if (inner == "}") --depth;
      }
      if (initializer) continue;  // `= { ... }` belongs to the statement, which ends at ';'
      addDeclaration(image, st);
      st.tokens.clear();
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      addDeclaration(image, st);
      st.tokens.clear();
    } else if (st.tokens.empty() && (tok == ".version" || tok == ".target" ||
                                     tok == ".address_size" || tok == ".file")) {
      // Module directives end at the line, not at ';'.
      std::string_view line = scanner.restOfLine();
      size_t b = line.find_first_not_of(" \t");
      line = b == std::string_view::npos ? std::string_view() : line.substr(b);
      std::string_view first = line.substr(0, line.find_first_of(" \t,/\r"));
      if (tok == ".version") version = first;
      else if (tok == ".target" && target.empty()) target = first;
    } else {
      st.tokens.push_back(tok);
    }
  }
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  if (version.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: no .version directive");
  if (target.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: no .target directive");
  image.triple = "nvptx64-nvidia-cuda";
  image.arch = target;
  return llvm::Error::success();
}

}  // namespace devdl::readers
