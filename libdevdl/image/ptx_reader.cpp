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

// The names of an initializer's braces, whose '{' was just read, into the statement.
llvm::Error readInitializer(PtxScanner &scanner, Statement &st) {
  for (int depth = 1; depth > 0;) {
    std::string_view tok = scanner.next();
    if (tok.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
    depth += tok == "{" ? 1 : tok == "}" ? -1 : 0;
    if (depth > 0) st.tokens.push_back(tok);
  }
  return llvm::Error::success();
}

// The statements of a body whose '{' was just read, each as its tokens (nested braces end one too).
llvm::Expected<std::vector<std::vector<std::string_view>>> bodyStatements(PtxScanner &scanner) {
  std::vector<std::vector<std::string_view>> statements(1);
  int depth = 1;
  while (depth > 0) {
    std::string_view tok = scanner.next();
    if (tok.empty()) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
    if (tok == "{" || tok == "}" || tok == ";") {
      depth += tok == "{" ? 1 : tok == "}" ? -1 : 0;
      statements.emplace_back();
    } else {
      statements.back().push_back(tok);
    }
  }
  return statements;
}

// The graph under way, and the names its last definition lists already (it lists each once).
struct GraphUnderWay {
  CodeGraph graph;
  llvm::StringSet<> calls, refers;

  // The definition `statement` makes, of `size` bytes of text; null where it makes none.
  CodeGraph::Definition *define(const Statement &statement, size_t size) {
    const std::optional<Declared> d = declarationOf(statement);
    if (!d || d->kind == SymbolKind::Import) return nullptr;
    calls.clear();
    refers.clear();
    return &graph.definitions.emplace_back(CodeGraph::Definition{std::string(d->name), d->kind, size, {}, {}});
  }

  // A kernel or function of `head`, with the names of its body's statements.
  void addFunction(const Statement &head, const std::vector<std::vector<std::string_view>> &statements, size_t size) {
    CodeGraph::Definition *definition = define(head, size);
    if (!definition || definition->kind == SymbolKind::Variable) return;
    for (const auto &statement : statements) addUses(statement, *definition, calls, refers);
  }

  // A variable, with the names of its initializer; a function without a body is a prototype.
  void addVariable(const Statement &statement, size_t size) {
    const std::optional<Declared> d = declarationOf(statement);
    if (!d || d->kind != SymbolKind::Variable) return;
    CodeGraph::Definition *definition = define(statement, size);
    auto value = llvm::find(statement.tokens, "=");
    if (value != statement.tokens.end())
      addUses(std::vector<std::string_view>(value + 1, statement.tokens.end()), *definition, calls, refers);
  }
};

}  // namespace

llvm::Expected<CodeGraph> ptxCodeGraph(Bytes bytes) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  PtxScanner scanner(*text);
  GraphUnderWay made;
  Statement st;
  size_t start = 0;  // of the statement
  bool initializer = false;
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (st.tokens.empty()) start = static_cast<size_t>(tok.data() - text->data());
    if (tok == "{" && initializer) {  // `= { f, g }`: its names belong to the statement
      if (llvm::Error err = readInitializer(scanner, st)) return err;
    } else if (tok == "{") {  // a body: each of its statements' names
      auto statements = bodyStatements(scanner);
      if (!statements) return statements.takeError();
      made.addFunction(st, *statements, scanner.position() - start);
      st.tokens.clear();
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      made.addVariable(st, scanner.position() - start);
      st.tokens.clear();
      initializer = false;
    } else if (st.tokens.empty() &&
               (tok == ".version" || tok == ".target" || tok == ".address_size" || tok == ".file")) {
      scanner.restOfLine();
    } else {
      initializer |= tok == "=";
      st.tokens.push_back(tok);
    }
  }
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  return std::move(made.graph);
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
