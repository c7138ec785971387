// PTX text: the module directives (.version, .target) and the linkage of top-level .entry, .func
// and .global/.const declarations, bodies and initializers skipped by brace matching; for a link
// split into parts, what each body and initializer names (ptxCodeGraph); and the edits a link
// makes (definitions made local, variables reached through cells).
#include "image/code_graph.h"
#include "image/instance_cells.h"
#include "image/readers.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringSet.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

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

bool isIdentifier(std::string_view t) {
  return !t.empty() && t[0] != '.' && !std::isdigit(static_cast<unsigned char>(t[0])) &&
         (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_' || t[0] == '$' || t[0] == '%');
}

// One top-level statement: its tokens up to ';' or up to a body's '{', without the body.
struct Statement {
  std::vector<std::string_view> tokens;
};

// What a top-level statement declares: a kernel, function or variable, defined or imported, and
// its linkage directive (.visible, .weak or .common; empty for a module-local definition).
struct Declared {
  std::string_view name;
  SymbolKind kind;  // Import for .extern
  std::string_view linkage;
};

std::optional<Declared> declarationOf(const Statement &st) {
  const auto &t = st.tokens;
  bool isExtern = false;
  std::string_view linkage;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ".extern") isExtern = true;
    else if (t[i] == ".visible" || t[i] == ".weak" || t[i] == ".common") linkage = t[i];
    else if (t[i] == ".entry") {
      if (i + 1 < t.size() && isIdentifier(t[i + 1]) && !isExtern) return Declared{t[i + 1], SymbolKind::Kernel, linkage};
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

void addDeclaration(DeviceImage &image, const Statement &st) {
  const std::optional<Declared> d = declarationOf(st);
  if (!d) return;
  if (d->kind == SymbolKind::Import) {
    if (isImportableName(d->name)) image.symbols.push_back({d->name, SymbolKind::Import});
  } else if (d->kind == SymbolKind::Kernel || !d->linkage.empty()) {
    image.symbols.push_back({d->name, d->kind});
  }
}

// The text of a PTX module: up to the NUL that fat binaries and the CUDA driver end it with.
llvm::Expected<std::string_view> ptxText(Bytes bytes) {
  std::string_view text = asText(bytes);
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    if (text.find_first_not_of('\0', nul) != std::string_view::npos)
      return fail(ErrorCode::BadFormat, "invalid PTX: NUL byte inside the text");
    text = text.substr(0, nul);
  }
  return text;
}

// Calls `onStatement` for each top-level statement of the text, in order, and gives the module's
// .version and .target.
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

// A name a definition can have: not a register (%r1), a directive or an opcode (ld.global.f32).
bool canBeDefined(std::string_view token) {
  return isIdentifier(token) && token[0] != '%' && token.find('.') == std::string_view::npos;
}

// The names of one statement of a body or an initializer, into `definition`: in a call
// (`call.uni (retval0), f, (param0);`), the first name outside parentheses is the function called;
// every other name is referred to.
void addUses(const std::vector<std::string_view> &statement, CodeGraph::Definition &definition,
             llvm::StringSet<> &calls, llvm::StringSet<> &refers) {
  bool call = false, called = false;
  int depth = 0;
  for (std::string_view token : statement) {
    if (token == "call" || token.substr(0, 5) == "call.") call = true;
    else if (token == "(") ++depth;
    else if (token == ")") --depth;
    else if (canBeDefined(token)) {
      if (call && !called && depth == 0) {
        called = true;
        if (calls.insert(token).second) definition.calls.emplace_back(token);
      } else if (refers.insert(token).second) {
        definition.refers.emplace_back(token);
      }
    }
  }
}

}  // namespace

llvm::Expected<CodeGraph> ptxCodeGraph(Bytes bytes) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  PtxScanner scanner(*text);
  CodeGraph graph;
  Statement st;
  size_t start = 0;  // of the statement
  bool initializer = false;
  llvm::StringSet<> calls, refers;
  auto define = [&](const Statement &statement, size_t end) -> CodeGraph::Definition * {
    const std::optional<Declared> d = declarationOf(statement);
    if (!d || d->kind == SymbolKind::Import) return nullptr;
    calls.clear();
    refers.clear();
    return &graph.definitions.emplace_back(CodeGraph::Definition{std::string(d->name), d->kind, end - start, {}, {}});
  };
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (st.tokens.empty()) start = static_cast<size_t>(tok.data() - text->data());
    if (tok == "{" && initializer) {  // `= { f, g }`: its names belong to the statement
      for (int depth = 1; depth > 0;) {
        tok = scanner.next();
        if (tok.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
        depth += tok == "{" ? 1 : tok == "}" ? -1 : 0;
        if (depth > 0) st.tokens.push_back(tok);
      }
    } else if (tok == "{") {  // a body: each of its statements' names
      std::vector<std::vector<std::string_view>> statements(1);
      int depth = 1;
      while (depth > 0) {
        tok = scanner.next();
        if (tok.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
        if (tok == "{" || tok == "}" || tok == ";") {
          depth += tok == "{" ? 1 : tok == "}" ? -1 : 0;
          statements.emplace_back();
        } else {
          statements.back().push_back(tok);
        }
      }
      const Statement head = st;
      st.tokens.clear();
      CodeGraph::Definition *definition = define(head, scanner.position());
      if (!definition || definition->kind == SymbolKind::Variable) continue;
      for (const auto &statement : statements) addUses(statement, *definition, calls, refers);
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      const Statement statement = st;
      st.tokens.clear();
      initializer = false;
      // A variable, with the names of its initializer; a function without a body is a prototype.
      const std::optional<Declared> d = declarationOf(statement);
      if (!d || d->kind != SymbolKind::Variable) continue;
      CodeGraph::Definition *definition = define(statement, scanner.position());
      auto value = llvm::find(statement.tokens, "=");
      if (value != statement.tokens.end())
        addUses(std::vector<std::string_view>(value + 1, statement.tokens.end()), *definition, calls, refers);
    } else if (st.tokens.empty() &&
               (tok == ".version" || tok == ".target" || tok == ".address_size" || tok == ".file")) {
      scanner.restOfLine();
    } else {
      initializer |= tok == "=";
      st.tokens.push_back(tok);
    }
  }
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  return graph;
}

llvm::Error readPtx(DeviceImage &image) {
  auto text = ptxText(image.bytes);
  if (!text) return text.takeError();
  std::string_view version, target;
  if (llvm::Error err = walkPtx(*text, [&](const Statement &st) { addDeclaration(image, st); }, version, target))
    return err;
  if (version.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: no .version directive");
  if (target.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: no .target directive");
  image.triple = "nvptx64-nvidia-cuda";
  image.arch = target;
  return llvm::Error::success();
}

llvm::Expected<std::string> ptxWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  // Every declaration of a name (a prototype and the definition) loses its linkage directive
  // together, so that they agree.
  std::string out(asText(bytes));
  std::string_view version, target;
  llvm::Error walked = walkPtx(
      *text,
      [&](const Statement &st) {
        const std::optional<Declared> d = declarationOf(st);
        if (!d || d->kind == SymbolKind::Import || d->linkage.empty() || !llvm::is_contained(names, d->name)) return;
        out.replace(static_cast<size_t>(d->linkage.data() - text->data()), d->linkage.size(), d->linkage.size(), ' ');
      },
      version, target);
  if (walked) return walked;
  return out;
}

llvm::Expected<std::string> ptxWithInstancesElsewhere(Bytes bytes, std::span<const std::string_view> names,
                                                      std::span<const std::string> cells) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  // The edits, in the text's order: each declaration of a variable replaced by its cell's, each
  // use in a body by the register its cell's address is loaded into at the body's start.
  struct Edit {
    size_t at, length;
    std::string text;
  };
  std::vector<Edit> edits;
  auto target = [&](std::string_view token) -> std::optional<size_t> {
    auto it = llvm::find(names, token);
    return it == names.end() ? std::nullopt : std::optional<size_t>(static_cast<size_t>(it - names.begin()));
  };
  auto reg = [](size_t k) { return "%devdl_cell" + std::to_string(k); };
  auto cell = [&](size_t k) { return cells.empty() ? instanceCellName(names[k]) : cells[k]; };
  auto offset = [&](std::string_view token) { return static_cast<size_t>(token.data() - text->data()); };
  auto held = [&](std::string_view name) {
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "`'s address is held by another variable's "
                                            "initializer, which cannot hold the address of an instance elsewhere");
  };
  // The variables of the module's own, one of them a store or an atomic names (a write through
  // an address computed is not seen), and one of `names` it defines: a module whose variable's
  // instance is elsewhere has all its variables' there.
  std::set<std::string_view> own;
  std::string_view written, defined;
  std::string_view opcode;  // of the body's statement under way
  PtxScanner scanner(*text);
  Statement st;
  int depth = 0;             // inside a body or an initializer's braces
  bool initializer = false;  // those braces are an initializer's
  size_t body = 0;           // where the body's '{' is
  std::set<size_t> used;     // the variables its body names
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (depth > 0) {
      if (tok == ";" || tok == "{" || tok == "}" || tok == ":") opcode = {};
      else if (opcode.empty() && tok.front() != '@') opcode = tok;
      if (tok == "{") {
        ++depth;
      } else if (tok == "}" && --depth == 0 && !initializer) {
        std::string loads;
        for (size_t k : used)
          loads += "\n\t.reg .b64 " + reg(k) + ";\n\tld.global.u64 " + reg(k) + ", [" + cell(k) + "];";
        if (!loads.empty()) edits.push_back({body + 1, 0, std::move(loads)});
        used.clear();
        st.tokens.clear();
      } else if (own.count(tok) && written.empty() &&
                 (opcode.starts_with("st.") || opcode.starts_with("atom.") || opcode.starts_with("red."))) {
        written = tok;
      } else if (auto k = target(tok)) {
        if (initializer) return held(tok);
        used.insert(*k);
        edits.push_back({offset(tok), tok.size(), reg(*k)});
      }
      continue;
    }
    if (tok == "{") {
      depth = 1;
      initializer = llvm::is_contained(st.tokens, "=");
      body = offset(tok);
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      // A declaration of one of them becomes its cell's: the address it holds, 8 bytes.
      const std::optional<Declared> d = declarationOf(st);
      initializer = false;
      const bool variable = llvm::is_contained(st.tokens, ".global") || llvm::is_contained(st.tokens, ".const");
      if (d && d->kind == SymbolKind::Variable && d->linkage.empty() && llvm::is_contained(st.tokens, ".global"))
        own.insert(d->name);
      if (d && variable && target(d->name)) {
        if (d->kind == SymbolKind::Variable) defined = d->name;
        if (llvm::is_contained(st.tokens, ".const"))
          return fail(ErrorCode::Unsupported, "`" + llvm::Twine(d->name) + "` is in the constant bank (.const), "
                                                  "which cannot be reached in another program");
        const std::string directive = d->kind == SymbolKind::Import ? ".extern" : std::string(d->linkage);
        edits.push_back({offset(st.tokens.front()), offset(tok) - offset(st.tokens.front()),
                         directive + " .global .align 8 .u64 " + cell(*target(d->name))});
      } else {
        for (std::string_view t : st.tokens)
          if (target(t)) return held(t);
      }
      st.tokens.clear();
    } else if (st.tokens.empty() && (tok == ".version" || tok == ".target" || tok == ".address_size" || tok == ".file")) {
      scanner.restOfLine();
    } else {
      st.tokens.push_back(tok);
    }
  }
  if (depth > 0) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  if (!written.empty() && !defined.empty())
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(written) + "`, a variable of its own that it does not export, "
                                            "would have a second instance in the program that reaches `" + defined +
                                            "` in another: devdl reaches only exported variables so");
  std::stable_sort(edits.begin(), edits.end(), [](const Edit &a, const Edit &b) { return a.at < b.at; });
  std::string out;
  size_t from = 0;
  for (const Edit &edit : edits) {
    out.append(*text, from, edit.at - from);
    out += edit.text;
    from = edit.at + edit.length;
  }
  out.append(*text, from);
  return out;
}

}  // namespace devdl::readers
