// The translator in a helper process (spirv/translator_process.h): where the helper is, how long
// it may take, and the exchange of messages (spirv/translator_protocol.h).
#include "backend/spirv/translator_process.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/helper_process.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <string_view>

namespace devdl::backend {
namespace {

std::chrono::milliseconds translatorTimeout() {
  const char *value = devdlVariable("DEVDL_TRANSLATOR_TIMEOUT");
  if (!value || !*value) return kDefaultTranslatorTimeout;
  char *end = nullptr;
  errno = 0;
  const double seconds = std::strtod(value, &end);
  if (errno || end == value || *end || !(seconds > 0 && seconds <= 86400)) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("DEVDL_TRANSLATOR_TIMEOUT=" + std::string(value) + " is no number of seconds (over 0, to 86400); " +
                         std::to_string(kDefaultTranslatorTimeout.count()) + " it is");
    return kDefaultTranslatorTimeout;
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(seconds * 1000)));
}

}  // namespace

std::string translatorPath() {
  if (const char *named = devdlVariable("DEVDL_TRANSLATOR"); named && *named) return named;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void *>(&translatorPath), &info) || !info.dli_fname) return kTranslatorBesideLibrary;
  const std::string_view file = info.dli_fname;
  const size_t slash = file.find_last_of('/');
  return (slash == std::string_view::npos ? std::string() : std::string(file.substr(0, slash + 1))) +
         kTranslatorBesideLibrary;
}

llvm::Expected<std::string> translateInHelper(const translator::Request &request, PlaceVariables place) {
  using namespace translator;
  const std::string path = translatorPath();
  auto helper = HelperProcess::start(path, "the SPIR-V translator (" + path + ")", translatorTimeout());
  if (!helper) return helper.takeError();
  // What it wrote that does not decode: its own error, whatever the helper's exit says.
  auto garbled = [&](llvm::Error err) {
    return fail(ErrorCode::Unsupported, "the SPIR-V translator (" + path + ") wrote " + llvm::toString(std::move(err)));
  };
  auto nextMessage = [&]() -> llvm::Expected<std::pair<Header, std::string>> {
    auto header = helper->receive(kHeaderSize);
    if (!header) return header.takeError();
    auto read = readHeader(*header);
    if (!read) return garbled(read.takeError());
    auto payload = helper->receive(read->size);
    if (!payload) return payload.takeError();
    return std::make_pair(*read, std::move(*payload));
  };
  if (llvm::Error err = helper->send(message(Message::Request, encode(request)))) return err;
  for (;;) {
    auto next = nextMessage();
    if (!next) return next.takeError();
    auto &[header, payload] = *next;
    switch (header.kind) {
      case Message::Layout: {
        if (!request.placeVariables || !place) return garbled(fail(ErrorCode::BadFormat, "not the expected output: a layout unasked"));
        auto layout = decodeLayout(payload);
        if (!layout) return garbled(layout.takeError());
        auto address = place(*layout);
        if (!address) return address.takeError();  // the helper is killed, unanswered
        if (llvm::Error err = helper->send(message(Message::Address, encodeAddress(*address)))) return err;
        continue;
      }
      case Message::Result:
        if (llvm::Error err = helper->finish()) return err;
        return std::move(payload);
      case Message::Failure: {
        // A refusal, said as devdl says it in one process.
        auto said = decodeFailure(payload);
        if (!said) return garbled(said.takeError());
        if (llvm::Error err = helper->finish()) return err;
        return fail(said->first, said->second);
      }
      default:
        return garbled(fail(ErrorCode::BadFormat, "not the expected output: a message devdl sends, not the helper"));
    }
  }
}

}  // namespace devdl::backend
