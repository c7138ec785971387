#include "support/printable.h"

#include <llvm/Support/ConvertUTF.h>

namespace devdl {

std::string printable(std::string_view text, bool keepNewlines) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escapeByte = [&](unsigned char c) { ((out += "\\x") += kHex[c >> 4]) += kHex[c & 15]; };
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      if (c == '\\') out += "\\\\";
      else if (c == '\n') out += keepNewlines ? "\n" : "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) escapeByte(c);
      else out += static_cast<char>(c);
      continue;
    }
    const unsigned length = llvm::getNumBytesForUTF8(c);
    const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data() + i);
    if (length > text.size() - i || !llvm::isLegalUTF8Sequence(begin, begin + length)) {
      escapeByte(c);
      ++i;
      continue;
    }
    if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0)  // C1
      for (unsigned k = 0; k < length; ++k) escapeByte(static_cast<unsigned char>(text[i + k]));
    else
      out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace devdl
