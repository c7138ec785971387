// A SPIR-V module as its words: where its header puts the version, and a walk over its
// instructions by their word counts alone, without SPIRV-Tools' parser. The link, the
// translator's limits and the translation each read or edit a module so (a few words in place,
// an instruction dropped); what a walk cannot lay out is left for a parser to refuse.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace devdl::backend {

inline constexpr size_t kVersionWord = 1;
inline constexpr size_t kHeaderWords = 5;

// Calls visit(offset, word count) for each instruction after the header, as the word counts lay
// them out, until it returns false. One cut short by the module's end stops the walk: a parser
// refuses the module later.
template <typename Visit>
void walkInstructions(std::span<const uint32_t> words, Visit visit) {
  for (size_t at = kHeaderWords, count; at < words.size() && (count = words[at] >> 16) && count <= words.size() - at;
       at += count)
    if (!visit(at, count)) return;
}

// The literal string operand at word `at` of an instruction that ends before word `end`: up to its
// NUL, and never past the instruction.
inline std::string_view literalAt(std::span<const uint32_t> words, size_t at, size_t end) {
  if (at >= end) return {};
  const char *text = reinterpret_cast<const char *>(words.data() + at);
  return std::string_view(text, strnlen(text, (end - at) * 4));
}

// The extensions a module declares (its OpExtension instructions, which precede every other
// instruction but its capabilities).
inline std::vector<std::string_view> declaredExtensions(std::span<const uint32_t> words) {
  constexpr uint32_t kOpCapability = 17, kOpExtension = 10;
  std::vector<std::string_view> extensions;
  walkInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (opcode == kOpExtension) extensions.push_back(literalAt(words, at + 1, at + count));
    return opcode == kOpExtension || opcode == kOpCapability;
  });
  return extensions;
}

// `words` without the instructions `drop(offset, word count)` picks. What the walk stopped at is
// kept, for a parser to refuse.
template <typename Drop>
std::vector<uint32_t> withoutInstructions(std::span<const uint32_t> words, Drop drop) {
  size_t end = std::min(words.size(), kHeaderWords);
  std::vector<uint32_t> kept(words.begin(), words.begin() + end);
  walkInstructions(words, [&](size_t at, size_t count) {
    end = at + count;
    if (!drop(at, count)) kept.insert(kept.end(), words.begin() + at, words.begin() + at + count);
    return true;
  });
  kept.insert(kept.end(), words.begin() + end, words.end());
  return kept;
}

}  // namespace devdl::backend
