// The edits a link makes to PTX text (ptx_text.h): definitions made local, statics exported, and
// variables reached through cells.
#include "image/instance_cells.h"
#include "image/ptx_text.h"
#include "image/readers.h"
#include "support/error.h"

#include <algorithm>
#include <set>

namespace devdl::readers {

namespace {

// A piece of the text replaced: `length` bytes at `at` by `text`.
struct Edit {
  size_t at, length;
  std::string text;
};

// The text with `edits` made, in the text's order (those at one place in the order given).
// Edits of one piece of text overlap only where the statements they were made from do, which the
// text of well-formed PTX cannot make them: such text is refused.
llvm::Expected<std::string> applied(std::string_view text, std::vector<Edit> edits) {
  std::stable_sort(edits.begin(), edits.end(), [](const Edit &a, const Edit &b) { return a.at < b.at; });
  std::string out;
  size_t from = 0;
  for (const Edit &edit : edits) {
    if (edit.at < from)
      return fail(ErrorCode::BadFormat, "invalid PTX: statements that overlap at byte " + llvm::Twine(edit.at));
    out.append(text, from, edit.at - from);
    out += edit.text;
    from = edit.at + edit.length;
  }
  out.append(text, from);
  return out;
}

// One walk of ptxWithInstancesElsewhere over the text: the edits it makes and what it has met.
struct CellEdits {
  CellEdits(std::string_view text, std::span<const std::string_view> names, std::span<const std::string> cells)
      : text(text), names(names), cells(cells) {}

  std::string_view text;
  std::span<const std::string_view> names;
  std::span<const std::string> cells;
  // The edits, in the text's order: each declaration of a variable replaced by its cell's, each
  // use in a body by the register its cell's address is loaded into at the body's start.
  std::vector<Edit> edits;
  // The variables of the module's own, one of them a store or an atomic names (a write through
  // an address computed is not seen), and one of `names` it defines: a module whose variable's
  // instance is elsewhere has all its variables' there.
  std::set<std::string_view> own;
  std::string_view written, defined;
  std::string_view opcode;   // of the body's statement under way
  Statement st;
  int depth = 0;             // inside a body or an initializer's braces
  bool initializer = false;  // those braces are an initializer's
  size_t body = 0;           // where the body's '{' is
  std::set<size_t> used;     // the variables its body names

  std::optional<size_t> target(std::string_view token) const {
    auto it = llvm::find(names, token);
    return it == names.end() ? std::nullopt : std::optional<size_t>(static_cast<size_t>(it - names.begin()));
  }
  static std::string reg(size_t k) { return "%devdl_cell" + std::to_string(k); }
  std::string cell(size_t k) const { return cells.empty() ? instanceCellName(names[k]) : cells[k]; }
  size_t offset(std::string_view token) const { return static_cast<size_t>(token.data() - text.data()); }
  static llvm::Error held(std::string_view name) {
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "`'s address is held by another variable's "
                                            "initializer, which cannot hold the address of an instance elsewhere");
  }

  // A token inside a body or an initializer's braces (depth > 0).
  llvm::Error takeBodyToken(std::string_view tok) {
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
    return llvm::Error::success();
  }

  // The ';' that ends a top-level statement.
  llvm::Error endStatement(std::string_view semicolon) {
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
      edits.push_back({offset(st.tokens.front()), offset(semicolon) - offset(st.tokens.front()),
                       directive + " .global .align 8 .u64 " + cell(*target(d->name))});
    } else {
      for (std::string_view t : st.tokens)
        if (target(t)) return held(t);
    }
    st.tokens.clear();
    return llvm::Error::success();
  }
};

}  // namespace

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

llvm::Expected<std::string> ptxWithStaticsExported(Bytes bytes, std::span<const std::string_view> names,
                                                   std::span<const std::string> exported) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  // Each mention of a static takes its exported name, and its declaration `.visible`.
  std::vector<Edit> edits;
  auto offset = [&](std::string_view token) { return static_cast<size_t>(token.data() - text->data()); };
  PtxScanner scanner(*text);
  Statement st;
  int depth = 0;             // inside a body or an initializer's braces
  bool initializer = false;  // those braces are an initializer's
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (auto it = llvm::find(names, tok); it != names.end())
      edits.push_back({offset(tok), tok.size(), exported[static_cast<size_t>(it - names.begin())]});
    if (depth > 0) {
      depth += tok == "{" ? 1 : tok == "}" ? -1 : 0;
      if (depth == 0 && !initializer) st.tokens.clear();
      continue;
    }
    if (tok == "{") {
      depth = 1;
      initializer = llvm::is_contained(st.tokens, "=");
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      const std::optional<Declared> d = declarationOf(st);
      if (d && isStatic(*d, st) && llvm::is_contained(names, d->name))
        edits.push_back({offset(st.tokens.front()), 0, ".visible "});
      st.tokens.clear();
    } else if (st.tokens.empty() && (tok == ".version" || tok == ".target" || tok == ".address_size" || tok == ".file")) {
      scanner.restOfLine();
    } else {
      st.tokens.push_back(tok);
    }
  }
  if (depth > 0) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  return applied(*text, std::move(edits));
}

llvm::Expected<std::string> ptxWithInstancesElsewhere(Bytes bytes, std::span<const std::string_view> names,
                                                      std::span<const std::string> cells) {
  auto text = ptxText(bytes);
  if (!text) return text.takeError();
  CellEdits walk(*text, names, cells);
  PtxScanner scanner(*text);
  for (std::string_view tok = scanner.next(); !tok.empty(); tok = scanner.next()) {
    if (walk.depth > 0) {
      if (llvm::Error err = walk.takeBodyToken(tok)) return err;
      continue;
    }
    if (tok == "{") {
      walk.depth = 1;
      walk.initializer = llvm::is_contained(walk.st.tokens, "=");
      walk.body = walk.offset(tok);
    } else if (tok == "}") {
      return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '}'");
    } else if (tok == ";") {
      if (llvm::Error err = walk.endStatement(tok)) return err;
    } else if (walk.st.tokens.empty() &&
               (tok == ".version" || tok == ".target" || tok == ".address_size" || tok == ".file")) {
      scanner.restOfLine();
    } else {
      walk.st.tokens.push_back(tok);
    }
  }
  if (walk.depth > 0) return fail(ErrorCode::BadFormat, "invalid PTX: unbalanced '{'");
  if (scanner.failed()) return fail(ErrorCode::BadFormat, "invalid PTX: unterminated comment");
  if (!walk.written.empty() && !walk.defined.empty())
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(walk.written) + "`, a variable of its own that it does not "
                                            "export, would have a second instance in the program that reaches `" +
                                            walk.defined + "` in another: devdl reaches only exported variables so");
  return applied(*text, std::move(walk.edits));
}

}  // namespace devdl::readers
