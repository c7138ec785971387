#include "backend/backend.h"
#include "support/environment.h"
#include "image/instance_cells.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringRef.h>

#include <cstdlib>

namespace devdl::backend {

llvm::Expected<std::string> Device::linkForRuntime(std::span<const LinkInput>) {
  return fail(ErrorCode::Unsupported, description() + ": no runtime loads this backend's programs for devdl");
}

llvm::Expected<std::unique_ptr<Program>> Device::loadThrough(std::string_view, const RuntimeLoad &) {
  return fail(ErrorCode::Unsupported, description() + ": no runtime loads this backend's programs for devdl");
}

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

llvm::Expected<Bytes> editedForLink(const LinkInput &input, size_t position, std::deque<std::string> &edits) {
  const DeviceImage &image = *input.image;
  if (image.unvalidated.empty())
    return devdl::editedForLink(image.bytes, image.format, image.statics, input.statics, input.interposed, input.elsewhere,
                                input.interposedElsewhere, position, edits);
  // A module devdl's validator could not vouch for: definitions made local by devdl's own reading
  // alone (image/local_definitions.h), which its driver judges; its statics stay its own; and no
  // variable is reached elsewhere, which would rewrite its functions.
  if (!input.elsewhere.empty() || !input.interposedElsewhere.empty())
    return fail(ErrorCode::Unsupported,
                "devdl would edit it to reach `" +
                    std::string(input.elsewhere.empty() ? input.interposedElsewhere.front() : input.elsewhere.front()) +
                    "` elsewhere, and rewrites no module its SPIR-V validator could not vouch for (" +
                    std::string(image.unvalidated) + ")");
  return devdl::editedForLink(image.bytes, image.format, {}, {}, input.interposed, {}, {}, position, edits);
}

llvm::Error DriverInputs::prepare(const Device &device, std::span<const LinkInput> given,
                                  std::optional<ImageFormat> askedAtLink, Choose choose) {
  inputs.assign(given.begin(), given.end());
  for (size_t i = 0; i < inputs.size(); ++i) {
    LinkInput &input = inputs[i];
    if (input.image->format != askedAtLink)
      if (llvm::Error refused = device.accepts(*input.image)) return inImage(std::move(refused), input.label);
    DeviceImage *copy = nullptr;
    if (choose) {
      auto chosen = choose(input);
      if (!chosen) return chosen.takeError();
      if (*chosen) input.image = copy = &copies_.emplace_back(std::move(**chosen));
    }
    if (input.interposed.empty() && input.elsewhere.empty() && input.statics.empty()) continue;  // interposedElsewhere is of interposed
    auto edited = editedForLink(input, i, edits_);
    if (!edited) return inImage(edited.takeError(), input.label);
    if (edited->data() == input.image->bytes.data()) continue;  // nothing its format edits (a cubin's statics)
    if (!copy) copy = &copies_.emplace_back(*input.image);
    copy->bytes = *edited;
    input.image = copy;
  }
  return llvm::Error::success();
}

}  // namespace devdl::backend
