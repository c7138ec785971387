// The messages between devdl and its translator helper (spirv/translator_protocol.h).
#include "backend/spirv/translator_protocol.h"

#include <cstring>
#include <optional>

namespace devdl::backend::translator {
namespace {

class Writer {
 public:
  void u32(uint32_t value) { raw(&value, sizeof value); }  // little-endian hosts
  void u64(uint64_t value) { raw(&value, sizeof value); }
  void bytes(std::string_view text) {
    u64(text.size());
    out_.append(text);
  }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void *data, size_t size) { out_.append(static_cast<const char *>(data), size); }
  std::string out_;
};

// Reads what a Writer wrote; every read is bounded by what is left, and a short payload leaves
// the reader failed rather than reading past it.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  std::string_view bytes() {
    const uint64_t size = u64();
    if (!ok_ || size > in_.size()) return fault();
    std::string_view taken = in_.substr(0, size);
    in_.remove_prefix(size);
    return taken;
  }
  /// A count of items of at least `each` bytes: no more than what is left can hold.
  uint64_t count(size_t each) {
    const uint64_t n = u64();
    if (n > in_.size() / each) fault();
    return ok_ ? n : 0;
  }
  bool done() const { return ok_ && in_.empty(); }

 private:
  template <typename T>
  T fixed() {
    T value{};
    if (in_.size() < sizeof value) return fault(), value;
    std::memcpy(&value, in_.data(), sizeof value);
    in_.remove_prefix(sizeof value);
    return value;
  }
  std::string_view fault() {
    ok_ = false;
    in_ = {};
    return {};
  }
  std::string_view in_;
  bool ok_ = true;
};

llvm::Error notExpected(const char *what) {
  return fail(ErrorCode::BadFormat, llvm::Twine("not the expected output: ") + what);
}

}  // namespace

std::string message(Message kind, std::string_view payload) {
  Writer header;
  header.u32(static_cast<uint32_t>(kind));
  header.u64(payload.size());
  return header.take().append(payload);
}

llvm::Expected<Header> readHeader(std::string_view bytes) {
  Reader in(bytes);
  const auto kind = static_cast<Message>(in.u32());
  const uint64_t size = in.u64();
  if (!in.done()) return notExpected("a short header");
  switch (kind) {
    case Message::Request:
    case Message::Layout:
    case Message::Address:
    case Message::Result:
    case Message::Failure:
      break;
    default:
      return notExpected("a message of no kind devdl knows");
  }
  if (size > kMaxPayload) return notExpected("a message past 1 GiB");
  return Header{kind, size};
}

std::string encode(const Request &request) {
  Writer out;
  out.u32(static_cast<uint32_t>(request.operation));
  out.u32((request.optimize ? 1u : 0u) | (request.placeVariables ? 2u : 0u));
  out.u64(request.specConstants.size());
  for (const auto &[id, value] : request.specConstants) {
    out.u32(id);
    out.u64(value);
  }
  out.u64(request.variables.size());
  for (const std::string &name : request.variables) out.bytes(name);
  out.bytes({reinterpret_cast<const char *>(request.words.data()), request.words.size() * 4});
  out.bytes(request.device);
  out.u64(request.modules.size());
  for (const auto &[label, words] : request.modules) {
    out.bytes(label);
    out.bytes({reinterpret_cast<const char *>(words.data()), words.size() * 4});
  }
  return out.take();
}

llvm::Expected<Request> decodeRequest(std::string_view payload) {
  Reader in(payload);
  Request request;
  request.operation = static_cast<Operation>(in.u32());
  const uint32_t flags = in.u32();
  request.optimize = flags & 1;
  request.placeVariables = flags & 2;
  for (uint64_t n = in.count(12); n--;) {
    const uint32_t id = in.u32();
    request.specConstants.emplace_back(id, in.u64());
  }
  for (uint64_t n = in.count(8); n--;) request.variables.emplace_back(in.bytes());
  auto wordsOf = [](std::string_view bytes) {
    std::vector<uint32_t> words(bytes.size() / 4);
    if (!words.empty()) std::memcpy(words.data(), bytes.data(), words.size() * 4);
    return words;
  };
  const std::string_view words = in.bytes();
  bool whole = words.size() % 4 == 0;
  request.words = wordsOf(words);
  request.device = std::string(in.bytes());
  for (uint64_t n = in.count(16); n--;) {
    std::string label(in.bytes());
    const std::string_view module = in.bytes();
    whole = whole && module.size() % 4 == 0;
    request.modules.emplace_back(std::move(label), wordsOf(module));
  }
  if (!in.done() || !whole || request.operation < Operation::Spir || request.operation > Operation::BuildOpenCl)
    return notExpected("a request that does not decode");
  return request;
}

std::string encode(const VariableLayout &layout) {
  Writer out;
  out.u64(layout.size);
  out.u64(layout.variables.size());
  for (const VariableLayout::Variable &variable : layout.variables) {
    out.bytes(variable.name);
    out.u64(variable.offset);
    out.u64(variable.size);
  }
  out.bytes(layout.initial);
  out.u64(layout.relocations.size());
  for (const VariableLayout::Relocation &relocation : layout.relocations) {
    out.u64(relocation.at);
    out.u64(relocation.addend);
  }
  return out.take();
}

llvm::Expected<VariableLayout> decodeLayout(std::string_view payload) {
  Reader in(payload);
  VariableLayout layout;
  layout.size = in.u64();
  for (uint64_t n = in.count(24); n--;) {
    VariableLayout::Variable variable;
    variable.name = in.bytes();
    variable.offset = in.u64();
    variable.size = in.u64();
    layout.variables.push_back(std::move(variable));
  }
  layout.initial = in.bytes();
  for (uint64_t n = in.count(16); n--;) {
    VariableLayout::Relocation relocation;
    relocation.at = in.u64();
    relocation.addend = in.u64();
    layout.relocations.push_back(relocation);
  }
  if (!in.done()) return notExpected("a variable layout that does not decode");
  // What the host will make of it must lie inside the region: the helper is not trusted with it.
  bool inside = layout.size <= kMaxRegion && layout.initial.size() <= layout.size;
  for (const VariableLayout::Variable &variable : layout.variables)
    inside &= variable.offset <= layout.size && variable.size <= layout.size - variable.offset;
  for (const VariableLayout::Relocation &relocation : layout.relocations)
    inside &= layout.size >= 8 && relocation.at <= layout.size - 8 && relocation.addend <= layout.size;
  if (!inside) return notExpected("a variable layout past its region");
  return layout;
}

std::string encodeAddress(uint64_t address) {
  Writer out;
  out.u64(address);
  return out.take();
}

llvm::Expected<uint64_t> decodeAddress(std::string_view payload) {
  Reader in(payload);
  const uint64_t address = in.u64();
  if (!in.done()) return notExpected("an address that does not decode");
  return address;
}

std::string encodeFailure(llvm::Error err) {
  ErrorCode code = ErrorCode::Unsupported;
  std::string text;
  llvm::handleAllErrors(
      std::move(err),
      [&](const Failure &failure) {
        code = failure.code();
        text += (text.empty() ? "" : "; ") + failure.reason();
      },
      [&](const llvm::ErrorInfoBase &other) { text += (text.empty() ? "" : "; ") + other.message(); });
  Writer out;
  out.u32(static_cast<uint32_t>(code));
  out.bytes(text);
  return out.take();
}

llvm::Expected<std::pair<ErrorCode, std::string>> decodeFailure(std::string_view payload) {
  Reader in(payload);
  const uint32_t code = in.u32();
  const std::string_view text = in.bytes();
  if (!in.done() || code > static_cast<uint32_t>(ErrorCode::Busy)) return notExpected("a failure that does not decode");
  return std::make_pair(static_cast<ErrorCode>(code), std::string(text));
}

}  // namespace devdl::backend::translator
