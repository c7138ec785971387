// A module's blocks laid out again: SPIRV-Tools' parser finds each block's extent, its merge
// instruction and its branch targets (it knows which of OpSwitch's operands are labels), and each
// function's blocks are written again in reverse post-order, merge instructions before branches.
#include "image/spirv_layout.h"

#include "support/spirv_tools.h"

#include <spirv/unified1/spirv.h>

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <unordered_map>

namespace devdl::readers {

namespace {

struct Block {
  size_t begin = 0, end = 0;  // word offsets: its OpLabel, and where the next block or OpFunctionEnd begins
  uint32_t label = 0;
  std::vector<uint32_t> successors;    // its branch's targets
  std::vector<uint32_t> mergeTargets;  // its merge instructions' merge and continue targets
  std::vector<std::pair<size_t, size_t>> merges;  // its merge instructions: offset and words each
  size_t last = 0;  // its terminator (the branch): its last instruction but lines
};

struct Function {
  std::vector<Block> blocks;
};

struct Scan {
  const uint32_t *base = nullptr;
  std::vector<Function> functions;
  bool inFunction = false;
  bool shader = false;  // the Shader capability: structured control flow is the module's rule
};

spv_result_t visit(void *user, const spv_parsed_instruction_t *inst) {
  auto &scan = *static_cast<Scan *>(user);
  const size_t at = inst->words - scan.base;
  const auto opcode = static_cast<SpvOp>(inst->opcode);
  auto ids = [&](std::vector<uint32_t> &into) {
    for (uint16_t i = 0; i < inst->num_operands; ++i)
      if (inst->operands[i].type == SPV_OPERAND_TYPE_ID) into.push_back(inst->words[inst->operands[i].offset]);
  };
  if (opcode == SpvOpCapability && inst->num_words >= 2 && inst->words[1] == SpvCapabilityShader) scan.shader = true;
  if (opcode == SpvOpFunction) {
    scan.functions.emplace_back();
    scan.inFunction = true;
    return SPV_SUCCESS;
  }
  if (!scan.inFunction) return SPV_SUCCESS;
  Function &function = scan.functions.back();
  if (opcode == SpvOpLabel || opcode == SpvOpFunctionEnd) {
    if (!function.blocks.empty()) function.blocks.back().end = at;
    if (opcode == SpvOpLabel) {
      Block &block = function.blocks.emplace_back();
      block.begin = at;
      block.label = inst->result_id;
    } else {
      scan.inFunction = false;
    }
    return SPV_SUCCESS;
  }
  if (function.blocks.empty() || opcode == SpvOpLine || opcode == SpvOpNoLine) return SPV_SUCCESS;
  Block &block = function.blocks.back();
  block.last = at;
  if (opcode == SpvOpBranch || opcode == SpvOpBranchConditional || opcode == SpvOpSwitch) {
    ids(block.successors);  // a condition or selector is no label: passed over below
  } else if (opcode == SpvOpLoopMerge || opcode == SpvOpSelectionMerge) {
    ids(block.mergeTargets);
    block.merges.emplace_back(at, inst->num_words);
  }
  return SPV_SUCCESS;
}

// The blocks' indices in reverse post-order from the first, then those it does not reach.
std::vector<size_t> dominanceOrder(const std::vector<Block> &blocks) {
  std::unordered_map<uint32_t, size_t> index;
  for (size_t i = 0; i < blocks.size(); ++i) index.emplace(blocks[i].label, i);
  std::vector<char> seen(blocks.size(), 0);
  std::vector<size_t> postOrder;
  // Depth first without recursion (a function may have many thousands of blocks): each entry is
  // a block and the next of its successors to follow, its branch's targets, then its merge's.
  std::vector<std::pair<size_t, size_t>> stack = {{0, 0}};
  seen[0] = 1;
  while (!stack.empty()) {
    auto &[block, next] = stack.back();
    const Block &b = blocks[block];
    if (next == b.successors.size() + b.mergeTargets.size()) {
      postOrder.push_back(block);
      stack.pop_back();
      continue;
    }
    const size_t k = next++;
    auto target = index.find(k < b.successors.size() ? b.successors[k] : b.mergeTargets[k - b.successors.size()]);
    if (target != index.end() && !seen[target->second]) {
      seen[target->second] = 1;
      stack.push_back({target->second, 0});
    }
  }
  std::vector<size_t> order(postOrder.rbegin(), postOrder.rend());
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!seen[i]) order.push_back(i);
  return order;
}

}  // namespace

std::optional<std::vector<uint32_t>> inLayoutOrder(std::span<const uint32_t> words, MergeInstructions merges) {
  Scan scan{words.data(), {}, false, false};
  spirv::Context context;
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &scan, words.data(), words.size(), nullptr, visit,
                                                   diagnostic.out()) != SPV_SUCCESS)
    return std::nullopt;
  if (scan.shader && merges == MergeInstructions::Dropped) return std::nullopt;
  std::vector<uint32_t> out;
  out.reserve(words.size());
  size_t copied = 0;  // words before this offset are in `out`
  auto copy = [&](size_t from, size_t to) { out.insert(out.end(), words.begin() + from, words.begin() + to); };
  bool changed = false;
  // Laid out again only where each block is an OpLabel, its instructions, its merge instructions
  // before its terminator, and that terminator: what the parser let through otherwise (a block of
  // no instructions, a merge after the branch) is left to the validator's verdict.
  auto wellFormed = [](const Block &b) {
    return b.last > b.begin && b.last < b.end &&
           llvm::all_of(b.merges, [&](const auto &merge) { return merge.first > b.begin && merge.first + merge.second <= b.last; });
  };
  for (const Function &function : scan.functions)
    if (!function.blocks.empty() && function.blocks.back().end != 0 && !llvm::all_of(function.blocks, wellFormed))
      return std::nullopt;
  for (const Function &function : scan.functions) {
    if (function.blocks.empty() || function.blocks.back().end == 0) continue;  // a declaration, or cut short
    const size_t before = out.size();
    copy(copied, function.blocks.front().begin);
    const size_t start = out.size();
    for (size_t i : dominanceOrder(function.blocks)) {
      const Block &b = function.blocks[i];
      size_t from = b.begin;
      for (const auto &[at, count] : b.merges) {
        copy(from, at);
        from = at + count;
      }
      copy(from, b.last);
      if (!b.merges.empty() && merges == MergeInstructions::Kept)
        copy(b.merges.back().first, b.merges.back().first + b.merges.back().second);
      copy(b.last, b.end);
    }
    const size_t end = function.blocks.back().end;
    if (out.size() - start == end - function.blocks.front().begin &&
        std::equal(out.begin() + start, out.end(), words.begin() + function.blocks.front().begin)) {
      out.resize(before);  // as it was: copied with what follows
      continue;
    }
    copied = end;
    changed = true;
  }
  if (!changed) return std::nullopt;
  copy(copied, words.size());
  return out;
}

}  // namespace devdl::readers
