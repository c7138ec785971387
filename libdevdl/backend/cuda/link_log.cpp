#include "backend/cuda/link_log.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

namespace devdl::backend::cuda {

std::string describeLinkLog(std::string_view log) {
  std::string out;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(log.data(), log.size()).split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.consume_front("error")) line = line.ltrim().drop_while([](char c) { return c == ':'; }).ltrim();
    if (line.empty()) continue;
    // Undefined reference to 'SYMBOL' in 'INPUT'
    llvm::StringRef rest = line;
    if (rest.consume_front("Undefined reference to '")) {
      auto [symbol, tail] = rest.split("' in '");
      if (!tail.empty() && tail.consume_back("'")) {
        out += (out.empty() ? "" : "\n") + tail.str() + ": undefined device symbol `" + symbol.str() + "`";
        continue;
      }
    }
    // ptxas fatal   : Unresolved extern function 'SYMBOL' (nvJitLink after LTO: no input named)
    if (size_t at = line.find("Unresolved extern "); at != llvm::StringRef::npos) {
      auto [before, symbol] = line.drop_front(at).split('\'');
      if (symbol.consume_back("'")) {
        out += (out.empty() ? "" : "\n") + std::string("undefined device symbol `") + symbol.str() + "`";
        continue;
      }
    }
    out += (out.empty() ? "" : "\n") + line.str();
  }
  return out;
}

}  // namespace devdl::backend::cuda
