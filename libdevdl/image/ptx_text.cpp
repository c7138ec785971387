// PTX text as devdl reads it (image/ptx_text.h).
#include "image/ptx_text.h"

#include "support/error.h"

namespace devdl::readers {

bool isIdentifier(std::string_view t) {
  return !t.empty() && t[0] != '.' && !std::isdigit(static_cast<unsigned char>(t[0])) &&
         (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_' || t[0] == '$' || t[0] == '%');
}

std::optional<Declared> declarationOf(const Statement &st) {
  const auto &t = st.tokens;
  bool isExtern = false;
  std::string_view linkage;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ".extern") isExtern = true;
    else if (t[i] == ".visible" || t[i] == ".weak" || t[i] == ".common") linkage = t[i];
    else if (t[i] == ".entry") {
      // An extern kernel is another module's, launched from this one's device code (-rdc).
      if (i + 1 < t.size() && isIdentifier(t[i + 1]))
        return Declared{t[i + 1], isExtern ? SymbolKind::Import : SymbolKind::Kernel, linkage};
      return std::nullopt;
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
      if (j < t.size() && isIdentifier(t[j])) return Declared{t[j], isExtern ? SymbolKind::Import : SymbolKind::Function, linkage};
      return std::nullopt;
    } else if (t[i] == ".global" || t[i] == ".const") {
      for (size_t j = i + 1; j < t.size(); ++j)
        if (isIdentifier(t[j])) return Declared{t[j], isExtern ? SymbolKind::Import : SymbolKind::Variable, linkage};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool isStatic(const Declared &d, const Statement &st) {
  return d.kind == SymbolKind::Variable && d.linkage.empty() && !d.name.starts_with("$") &&
         llvm::is_contained(st.tokens, ".global");
}

llvm::Expected<std::string_view> ptxText(Bytes bytes) {
  std::string_view text = asText(bytes);
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    if (text.find_first_not_of('\0', nul) != std::string_view::npos)
      return fail(ErrorCode::BadFormat, "invalid PTX: NUL byte inside the text");
    text = text.substr(0, nul);
  }
  return text;
}

llvm::Error walkPtx(std::string_view text, llvm::function_ref<void(const Statement &)> onStatement,
                    std::string_view &version, std::string_view &target) {
  PtxScanner scanner(text);
  Statement st;
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (tok == "{") {
      bool initializer = false;
      for (auto t : st.tokens) initializer |= t == "=";
      if (!scanner.skipBlock()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
      if (initializer) continue;  // `= { ... }` belongs to the statement, which ends at ';'
      onStatement(st);
      st.tokens.clear();
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      onStatement(st);
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
  return llvm::Error::success();
}

}  // namespace devdl::readers
