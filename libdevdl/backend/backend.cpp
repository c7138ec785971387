#include "backend/backend.h"
#include "support/environment.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/StringRef.h>

#include <cstdlib>

namespace devdl::backend {

llvm::Error checkInsideVariable(std::string_view name, uint64_t bytes, size_t offset, size_t size) {
  if (offset <= bytes && size <= bytes - offset) return llvm::Error::success();
  return fail(ErrorCode::InvalidArgument, "variable `" + std::string(name) + "` has " + std::to_string(bytes) +
                                              " bytes: " + std::to_string(size) + " at offset " +
                                              std::to_string(offset) + " are outside it");
}

llvm::Expected<size_t> chooseDevice(const std::vector<std::string> &names, std::string_view backend) {
  const char *wanted = devdlVariable("DEVDL_DEVICE");
  if (!wanted || !*wanted) return 0;
  if (unsigned index; !llvm::StringRef(wanted).getAsInteger(10, index)) {
    if (index >= names.size())
      return fail(ErrorCode::NotFound, "DEVDL_DEVICE=" + llvm::Twine(wanted) + ": there are " +
                                           llvm::Twine(names.size()) + " " + backend + " devices");
    return index;
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].find(wanted) != std::string::npos) return i;
  return fail(ErrorCode::NotFound,
              "DEVDL_DEVICE=" + llvm::Twine(wanted) + ": no " + backend + " device has that name");
}

}  // namespace devdl::backend
