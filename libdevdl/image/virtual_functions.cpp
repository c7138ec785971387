#include "image/virtual_functions.h"

#include <llvm/ADT/StringRef.h>

namespace devdl {

namespace {

std::string_view stringProperty(const PropertySet &set, std::string_view name) {
  const Property *p = set.find(name);
  return p && p->type == PropertyType::String ? p->data : std::string_view();
}

// "A,B" as its names, without empty ones.
std::vector<std::string_view> listed(std::string_view list) {
  std::vector<std::string_view> names;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  llvm::StringRef(list.data(), list.size()).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts)
    if (!part.trim().empty()) names.emplace_back(part.trim().data(), part.trim().size());
  return names;
}

}  // namespace

VirtualFunctions virtualFunctionsOf(const DeviceImage &image) {
  VirtualFunctions vf;
  const PropertySet *set = image.findSet(kVirtualFunctionsSet);
  if (!set) return vf;
  vf.set = stringProperty(*set, "virtual-functions-set");
  const Property *dummy = set->find("dummy-image");
  vf.dummy = dummy && dummy->type == PropertyType::UInt32 && dummy->u32 == 1;
  vf.calls = listed(stringProperty(*set, "calls-virtual-functions-set"));
  vf.creates = listed(stringProperty(*set, "creates-virtual-functions-set"));
  return vf;
}

}  // namespace devdl
