// The translator in a helper process (spirv/translator_process.h): where the helper is, how long
// it may take, the helpers kept between translations, and the exchange of messages
// (spirv/translator_protocol.h).
#include "backend/spirv/translator_process.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/helper_process.h"
#include "support/own_directory.h"

#include <llvm/ADT/STLExtras.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace devdl::backend {

std::chrono::milliseconds translatorTimeout() {
  const char *value = devdlVariable("DEVDL_TRANSLATOR_TIMEOUT");
  if (!value || !*value) return kDefaultTranslatorTimeout;
  const std::optional<double> seconds = secondsIn(value);
  if (!seconds || *seconds == 0) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("DEVDL_TRANSLATOR_TIMEOUT=" + std::string(value) + " is no number of seconds (over 0, to 86400); " +
                         std::to_string(kDefaultTranslatorTimeout.count()) + " it is");
    return kDefaultTranslatorTimeout;
  }
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(*seconds * 1000)));
}

namespace {

// Helpers between translations. Starting one costs some 14 ms (loading LLVM), against 1 ms for
// the seed's translation and some 20 ms for its whole build on PoCL in a warm process
// (bench_translator): a helper serves one translation after another. One that failed in any way is not kept; each serves
// kMaxUses at most (whatever LLVM keeps between modules stays bounded). A process forked from
// this one starts its own: the helpers it inherited are its parent's.
class IdleHelpers {
 public:
  static IdleHelpers &process() {
    static IdleHelpers &helpers = *new IdleHelpers;  // never destroyed: idle helpers end as the process does
    return helpers;
  }

  /// A helper running `path` that is still alive, or null.
  std::unique_ptr<HelperProcess> take(const std::string &path) {
    std::lock_guard lock(mutex_);
    forgetAFork();
    while (!idle_.empty()) {
      std::unique_ptr<HelperProcess> helper = std::move(idle_.back());
      idle_.pop_back();
      if (helper->path() == path && helper->idleAndAlive()) return helper;
    }
    return nullptr;
  }

  /// Keeps `helper`, whose exchange went as it should, for the next translation; one that has
  /// served its last is replaced at once (startAhead), so that the next finds LLVM loaded.
  void give(std::unique_ptr<HelperProcess> helper) {
    const std::string path = helper->path();
    {
      std::lock_guard lock(mutex_);
      forgetAFork();
      if (helper->exchanges() < kMaxUses && idle_.size() < kKept && helper->ownedHere()) {
        idle_.push_back(std::move(helper));
        return;
      }
    }
    helper.reset();
    startAhead(path);
  }

  /// Ends the idle helpers that never served: started ahead for a device that does not translate.
  void stopUnused() {
    std::vector<std::unique_ptr<HelperProcess>> unused;
    {
      std::lock_guard lock(mutex_);
      forgetAFork();
      for (auto it = idle_.begin(); it != idle_.end();)
        if ((*it)->exchanges() == 0) {
          unused.push_back(std::move(*it));
          it = idle_.erase(it);
        } else {
          ++it;
        }
    }
  }  // killed and reaped here, out of the lock

  /// Starts a helper running `path` where none is idle: it loads LLVM while the host goes on.
  void startAhead(const std::string &path) {
    {
      std::lock_guard lock(mutex_);
      forgetAFork();
      if (llvm::any_of(idle_, [&](const auto &helper) { return helper->path() == path; })) return;
    }
    auto started = HelperProcess::start(path, "the SPIR-V translator (" + path + ")");
    if (!started) {
      llvm::consumeError(started.takeError());  // the translation that needs one says why
      return;
    }
    std::lock_guard lock(mutex_);
    if (idle_.size() < kKept) idle_.push_back(std::make_unique<HelperProcess>(std::move(*started)));
  }

 private:
  static constexpr size_t kKept = 4;  // as many as translate at once, mostly
  static constexpr unsigned kMaxUses = 64;

  void forgetAFork() {
    if (owner_ == getpid()) return;
    idle_.clear();  // closes this process's copies of their descriptors, and kills none
    owner_ = getpid();
  }

  std::mutex mutex_;
  pid_t owner_ = getpid();
  std::vector<std::unique_ptr<HelperProcess>> idle_;
};

}  // namespace

std::string translatorPath() {
  if (const char *named = devdlVariable("DEVDL_TRANSLATOR"); named && *named) return named;
  return ownDirectory() + "/" + kTranslatorBesideLibrary;
}

void startTranslatorAhead() { IdleHelpers::process().startAhead(translatorPath()); }

void stopTranslatorsAhead() { IdleHelpers::process().stopUnused(); }

namespace {

// One request and its answer with `helper`, which is kept for the next where it answered as it
// should. `heard`: whether it wrote anything this time.
llvm::Expected<std::string> exchange(std::unique_ptr<HelperProcess> helper, const translator::Request &request,
                                     PlaceVariables place, bool &heard) {
  using namespace translator;
  helper->beginExchange(translatorTimeout());
  // What it wrote that does not decode: its own error, whatever the helper's exit says.
  auto garbled = [&](llvm::Error err) {
    return fail(ErrorCode::Unsupported,
                "the SPIR-V translator (" + helper->path() + ") wrote " + llvm::toString(std::move(err)));
  };
  auto nextMessage = [&]() -> llvm::Expected<std::pair<Header, std::string>> {
    auto header = helper->receive(kHeaderSize);
    if (!header) return header.takeError();
    heard = true;
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
        if (!request.placeVariables || !place)
          return garbled(fail(ErrorCode::BadFormat, "not the expected output: a layout unasked"));
        auto layout = decodeLayout(payload);
        if (!layout) return garbled(layout.takeError());
        auto address = place(*layout);
        if (!address) return address.takeError();  // the helper is killed, unanswered, and not kept
        if (llvm::Error err = helper->send(message(Message::Address, encodeAddress(*address)))) return err;
        continue;
      }
      case Message::Result:
        // One that built on OpenCL holds the driver: it ends now.
        if (request.operation != Operation::BuildOpenCl) IdleHelpers::process().give(std::move(helper));
        return std::move(payload);
      case Message::Failure: {
        // A refusal, said as devdl says it in one process.
        auto said = decodeFailure(payload);
        if (!said) return garbled(said.takeError());
        IdleHelpers::process().give(std::move(helper));
        return fail(said->first, said->second);
      }
      default:
        return garbled(fail(ErrorCode::BadFormat, "not the expected output: a message devdl sends, not the helper"));
    }
  }
}

}  // namespace

llvm::Expected<std::string> translateInHelper(const translator::Request &request, PlaceVariables place) {
  const std::string path = translatorPath();
  bool heard = false;
  if (std::unique_ptr<HelperProcess> kept = IdleHelpers::process().take(path)) {
    auto answer = exchange(std::move(kept), request, place, heard);
    if (answer || heard) return answer;
    // It ended between translations, or as this one began: a new helper takes the request (and
    // where the request is what ends it, ends the same way, saying so).
    llvm::consumeError(answer.takeError());
  }
  auto started = HelperProcess::start(path, "the SPIR-V translator (" + path + ")");
  if (!started) return started.takeError();
  return exchange(std::make_unique<HelperProcess>(std::move(*started)), request, place, heard);
}

}  // namespace devdl::backend
