// PTX text: the module directives (.version, .target) and the linkage of top-level .entry, .func
// and .global/.const declarations, bodies and initializers skipped by brace matching (ptx_text.h);
// and, for a link split into parts, what each body and initializer names (ptxCodeGraph).
#include "image/code_graph.h"
#include "image/ptx_text.h"
#include "image/readers.h"
#include "support/error.h"

#include <llvm/ADT/StringSet.h>

namespace devdl::readers {

namespace {

void addDeclaration(DeviceImage &image, const Statement &st) {
  const std::optional<Declared> d = declarationOf(st);
  if (!d) return;
  if (d->kind == SymbolKind::Import) {
    if (auto import = cudaImport(d->name)) image.symbols.push_back(*import);
  } else if (d->kind == SymbolKind::Kernel || !d->linkage.empty()) {
    image.symbols.push_back({d->name, d->kind});
  } else if (isStatic(*d, st)) {
    image.statics.push_back(d->name);
  }
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

}  // namespace devdl::readers
