#include "backend/part_cut.h"

#include "backend/spirv/program_part.h"
#include "image/code_graph.h"
#include "image/read_image.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <cstring>

namespace devdl::backend {

namespace {

// An input a cut can take: SPIR-V devdl's validator vouched for (a cut rewrites it), read, with
// no statics to export and no specialization constants set, which a later step may join.
bool cuttable(const LinkInput &input) {
  const DeviceImage &image = *input.image;
  return image.format == ImageFormat::SpirV && image.unvalidated.empty() && !image.unread &&
         image.statics.empty() && input.statics.empty() && (!input.specConstants || input.specConstants->empty());
}

// Of `names`, those `image` still defines or imports.
std::vector<std::string_view> stillNamed(std::span<const std::string_view> names, const DeviceImage &image) {
  std::vector<std::string_view> kept;
  for (std::string_view name : names)
    if (llvm::any_of(image.symbols, [&](const Symbol &symbol) { return symbol.name == name; })) kept.push_back(name);
  return kept;
}

// "LABEL: 1 of 1001 kernels, 1 of 1 functions, 0 of 0 variables; 2380 of 412264 bytes".
std::string givenLine(const std::string &label, const DeviceImage &whole, const DeviceImage &cut) {
  auto count = [](const DeviceImage &image, SymbolKind kind) {
    return std::to_string(llvm::count_if(image.symbols, [&](const Symbol &symbol) { return symbol.kind == kind; }));
  };
  return label + ": " + count(cut, SymbolKind::Kernel) + " of " + count(whole, SymbolKind::Kernel) + " kernels, " +
         count(cut, SymbolKind::Function) + " of " + count(whole, SymbolKind::Function) + " functions, " +
         count(cut, SymbolKind::Variable) + " of " + count(whole, SymbolKind::Variable) + " variables; " +
         std::to_string(cut.bytes.size()) + " of " + std::to_string(whole.bytes.size()) + " bytes";
}

}  // namespace

llvm::Expected<std::optional<CutInputs>> cutToRoots(std::span<const LinkInput> given,
                                                    std::span<const std::string_view> roots, bool joinVariables) {
  if (given.empty() || !llvm::all_of(given, cuttable)) return std::nullopt;
  std::vector<CodeGraph> graphs;
  for (const LinkInput &input : given) {
    auto graph = readers::spirvCodeGraph(input.image->bytes);
    if (!graph) return inImage(graph.takeError(), input.label);
    graphs.push_back(std::move(*graph));
  }
  CutInputs cut;
  cut.parts = partReaching(graphs, roots, joinVariables);
  if (cut.parts.empty()) return std::nullopt;
  for (const LinkInput &input : given) {
    const Bytes bytes = input.image->bytes;
    std::vector<uint32_t> &words = cut.words_.emplace_back(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), words.size() * 4);
    auto part = spirvForPart(words, cut.parts, 0, {});
    if (!part) return inImage(part.takeError(), input.label);
    words = std::move(*part);
    auto read = readRawImage(Bytes(reinterpret_cast<const uint8_t *>(words.data()), words.size() * 4),
                             ImageFormat::SpirV, std::make_shared<Storage>());
    if (!read) return inImage(read.takeError(), input.label + ", cut to what it uses,");
    // The given image's properties and names, the cut's bytes and symbols (which its storage keeps).
    const DeviceImage &reread = cut.images_.emplace_back(std::move(*read));
    DeviceImage &image = cut.images_.emplace_back(*input.image);
    image.bytes = reread.bytes;
    image.symbols = reread.symbols;
    image.checked = true;
    LinkInput &in = cut.inputs.emplace_back(input);
    in.image = &image;
    in.interposed = cut.names_.emplace_back(stillNamed(input.interposed, image));
    in.elsewhere = cut.names_.emplace_back(stillNamed(input.elsewhere, image));
    in.interposedElsewhere = cut.names_.emplace_back(stillNamed(input.interposedElsewhere, image));
    cut.given.push_back(givenLine(input.label, *input.image, image));
  }
  return std::optional<CutInputs>(std::move(cut));
}

}  // namespace devdl::backend
