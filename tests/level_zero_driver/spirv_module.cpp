#include "spirv_module.h"

#include <cstring>
#include <functional>

namespace zetest {

namespace {

constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kOpTypeBool = 20, kOpTypeInt = 21, kOpTypeFloat = 22;
constexpr uint32_t kOpEntryPoint = 15, kOpTypePointer = 32, kOpTypeFunction = 33, kOpFunction = 54, kOpVariable = 59,
                   kOpDecorate = 71;
constexpr uint32_t kStorageUniformConstant = 0, kStorageWorkgroup = 4, kStorageCrossWorkgroup = 5;
constexpr uint32_t kOpSpecConstantTrue = 48, kOpSpecConstantFalse = 49, kOpSpecConstant = 50;
constexpr uint32_t kDecorationSpecId = 1, kDecorationBuiltIn = 11, kDecorationLinkageAttributes = 41;
constexpr uint32_t kLinkageExport = 0, kLinkageImport = 1;

// A literal string starting at `from` within `words`: the string and the words it takes.
std::string literal(std::span<const uint32_t> words, size_t from, size_t *used) {
  std::string text;
  for (size_t i = from; i < words.size(); ++i) {
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((words[i] >> (8 * b)) & 0xff);
      if (c == '\0') {
        *used = i - from + 1;
        return text;
      }
      text += c;
    }
  }
  *used = words.size() - from;
  return text;
}

// Calls `visit(opcode, operands)` for each instruction after the header; "" or why the words
// are not a module.
std::string walk(std::span<const uint32_t> words,
                 const std::function<void(uint32_t, std::span<const uint32_t>, size_t)> &visit) {
  if (words.size() < 5 || words[0] != kMagic) return "not a SPIR-V module";
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, opcode = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) return "an instruction runs past the module's end";
    visit(opcode, words.subspan(at + 1, count - 1), at + 1);
    at += count;
  }
  return {};
}

}  // namespace

std::string readLinkage(std::span<const uint32_t> words, Linkage *out) {
  std::map<uint32_t, std::pair<std::string, uint32_t>> linkage;  // id -> name, linkage type
  std::set<uint32_t> functions, variables, builtIns;
  std::map<std::string, uint32_t> entryPoints;  // kernel -> function id
  std::map<uint32_t, uint32_t> functionTypes;   // function id -> its type's id
  std::map<uint32_t, std::vector<uint32_t>> parameterTypes;  // function type id -> its parameters' types
  std::map<uint32_t, uint32_t> pointerStorage;  // pointer type id -> storage class
  std::string why = walk(words, [&](uint32_t opcode, std::span<const uint32_t> ops, size_t) {
    size_t used = 0;
    if (opcode == kOpEntryPoint && ops.size() >= 3) {
      std::string name = literal(ops, 2, &used);
      out->kernels.insert(name);
      entryPoints[name] = ops[1];
    } else if (opcode == kOpTypePointer && ops.size() >= 2) {
      pointerStorage[ops[0]] = ops[1];
    } else if (opcode == kOpTypeFunction && ops.size() >= 2) {
      parameterTypes[ops[0]].assign(ops.begin() + 2, ops.end());
    } else if (opcode == kOpDecorate && ops.size() >= 3 && ops[1] == kDecorationLinkageAttributes) {
      std::string name = literal(ops, 2, &used);
      if (2 + used < ops.size()) linkage[ops[0]] = {std::move(name), ops[2 + used]};
    } else if (opcode == kOpDecorate && ops.size() >= 2 && ops[1] == kDecorationBuiltIn) {
      builtIns.insert(ops[0]);
    } else if (opcode == kOpFunction && ops.size() >= 4) {
      functions.insert(ops[1]);
      functionTypes[ops[1]] = ops[3];
    } else if (opcode == kOpVariable && ops.size() >= 2) {
      variables.insert(ops[1]);
    }
  });
  if (!why.empty()) return why;
  for (const auto &[name, function] : entryPoints) {
    std::vector<ArgKind> &args = out->kernelArgs[name];
    for (uint32_t type : parameterTypes[functionTypes[function]]) {
      auto storage = pointerStorage.find(type);
      if (storage == pointerStorage.end()) args.push_back(ArgKind::Value);
      else if (storage->second == kStorageWorkgroup) args.push_back(ArgKind::Local);
      else if (storage->second == kStorageCrossWorkgroup || storage->second == kStorageUniformConstant)
        args.push_back(ArgKind::Buffer);
      else args.push_back(ArgKind::Value);
    }
  }
  for (const auto &[id, entry] : linkage) {
    const auto &[name, type] = entry;
    if (type == kLinkageImport && !builtIns.count(id)) out->imports.insert(name);  // built-ins are the compiler's
    else if (type == kLinkageExport && variables.count(id)) out->exportedVariables.insert(name);
    else if (type == kLinkageExport && functions.count(id)) out->exportedFunctions.insert(name);
  }
  return {};
}

std::string applySpecConstants(std::vector<uint32_t> &words, const std::map<uint32_t, const void *> &values) {
  std::map<uint32_t, uint32_t> specIds;  // result id -> SpecId
  std::map<uint32_t, uint32_t> widths;   // type id -> bits (bool: 8)
  std::string why = walk(words, [&](uint32_t opcode, std::span<const uint32_t> ops, size_t) {
    if (opcode == kOpDecorate && ops.size() >= 3 && ops[1] == kDecorationSpecId) specIds[ops[0]] = ops[2];
    else if (opcode == kOpTypeBool && !ops.empty()) widths[ops[0]] = 8;
    else if ((opcode == kOpTypeInt || opcode == kOpTypeFloat) && ops.size() >= 2) widths[ops[0]] = ops[1];
  });
  if (!why.empty()) return why;
  std::set<uint32_t> applied;
  why = walk(words, [&](uint32_t opcode, std::span<const uint32_t> ops, size_t operands) {
    if ((opcode != kOpSpecConstant && opcode != kOpSpecConstantTrue && opcode != kOpSpecConstantFalse) || ops.size() < 2)
      return;
    auto id = specIds.find(ops[1]);
    if (id == specIds.end()) return;
    auto value = values.find(id->second);
    if (value == values.end()) return;
    applied.insert(id->second);
    if (opcode == kOpSpecConstant) {
      const uint32_t bits = widths.count(ops[0]) ? widths[ops[0]] : 32;
      uint64_t v = 0;
      std::memcpy(&v, value->second, bits / 8);
      for (size_t w = 2; w < ops.size(); ++w) words[operands + w] = static_cast<uint32_t>(v >> (32 * (w - 2)));
    } else {
      const bool on = *static_cast<const uint8_t *>(value->second) != 0;
      words[operands - 1] = (words[operands - 1] & 0xffff0000u) | (on ? kOpSpecConstantTrue : kOpSpecConstantFalse);
    }
  });
  if (!why.empty()) return why;
  for (const auto &[id, value] : values)
    if (!applied.count(id)) return "the module has no specialization constant with SpecId " + std::to_string(id);
  return {};
}

}  // namespace zetest
