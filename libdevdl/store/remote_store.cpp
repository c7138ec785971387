#include "store/remote_store.h"
#include "store/redis_tls.h"

#include "support/driver_library.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/sigpipe.h"

#include <llvm/ADT/StringExtras.h>

#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

#if DEVDL_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace devdl::store {

namespace {

// Redis refuses longer values (proto-max-bulk-len).
constexpr uint64_t kMaxValue = uint64_t(512) << 20;

std::string keyName(const Key &key) { return "devdl:" + key.hex(); }

llvm::Error badUrl(std::string_view url, const std::string &why) {
  return fail(ErrorCode::InvalidArgument, "DEVDL_CACHE_REMOTE=" + std::string(url) + ": " + why +
                                              " (redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB])");
}

/// A decimal number in [low, high], or nullopt.
std::optional<int> number(std::string_view text, int low, int high) {
  unsigned long long value = 0;
  if (text.empty() || text.size() > 9 || llvm::getAsUnsignedInteger(llvm::StringRef(text), 10, value) ||
      value < static_cast<unsigned>(low) || value > static_cast<unsigned>(high))
    return std::nullopt;
  return static_cast<int>(value);
}

#if DEVDL_HAVE_HIREDIS
// hiredis, opened at run time like the drivers: one build of devdl runs where it is missing.
struct Hiredis {
  decltype(&::redisConnectWithTimeout) connectWithTimeout = nullptr;
  decltype(&::redisSetTimeout) setTimeout = nullptr;
  decltype(&::redisCommandArgv) commandArgv = nullptr;
  decltype(&::freeReplyObject) freeReplyObject = nullptr;
  decltype(&::redisFree) free = nullptr;
  // Redis's protocol over a channel of devdl's (TLS: store/redis_tls.h).
  decltype(&::redisFormatCommandArgv) formatCommandArgv = nullptr;
  decltype(&::redisFreeCommand) freeCommand = nullptr;
  decltype(&::redisReaderCreate) readerCreate = nullptr;
  decltype(&::redisReaderFree) readerFree = nullptr;
  decltype(&::redisReaderFeed) readerFeed = nullptr;
  decltype(&::redisReaderGetReply) readerGetReply = nullptr;
};

#define DEVDL_TEXT(x) #x
#define DEVDL_HIREDIS_SONAME(version) "libhiredis.so." DEVDL_TEXT(version)

/// The library, or null with why not.
const Hiredis *hiredis(std::string &why) {
  static Hiredis api;
  static const std::string problem = [] {
    const EntryPoint entries[] = {
        {"redisConnectWithTimeout", reinterpret_cast<void **>(&api.connectWithTimeout)},
        {"redisSetTimeout", reinterpret_cast<void **>(&api.setTimeout)},
        {"redisCommandArgv", reinterpret_cast<void **>(&api.commandArgv)},
        {"freeReplyObject", reinterpret_cast<void **>(&api.freeReplyObject)},
        {"redisFree", reinterpret_cast<void **>(&api.free)},
        {"redisFormatCommandArgv", reinterpret_cast<void **>(&api.formatCommandArgv)},
        {"redisFreeCommand", reinterpret_cast<void **>(&api.freeCommand)},
        {"redisReaderCreate", reinterpret_cast<void **>(&api.readerCreate)},
        {"redisReaderFree", reinterpret_cast<void **>(&api.readerFree)},
        {"redisReaderFeed", reinterpret_cast<void **>(&api.readerFeed)},
        {"redisReaderGetReply", reinterpret_cast<void **>(&api.readerGetReply)}};
    return openDriverLibrary(DEVDL_HIREDIS_SONAME(HIREDIS_SONAME), "Redis client (Debian: libhiredis0.14)",
                                      "hiredis " DEVDL_TEXT(HIREDIS_SONAME), entries);
  }();
  why = problem;
  return problem.empty() ? &api : nullptr;
}

timeval timevalOf(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}
#endif

}  // namespace

std::string RedisAddress::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  std::string out = (tls ? "rediss://" : "redis://") + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (database) out += "/" + std::to_string(database);
  return out;
}

llvm::Expected<RedisAddress> parseRedisUrl(std::string_view url) {
  RedisAddress address;
  address.tls = url.starts_with("rediss://");
  if (!address.tls && !url.starts_with("redis://")) return badUrl(url, "not a redis:// or rediss:// address");
  std::string_view rest = url.substr(address.tls ? 9 : 8);
  if (rest.find_first_of("?#") != std::string_view::npos) return badUrl(url, "options are not taken");
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) return badUrl(url, "a user without a password (write USER:PASSWORD@)");
    address.user = userinfo.substr(0, colon);
    address.password = userinfo.substr(colon + 1);
    if (address.password.empty()) return badUrl(url, "an empty password");
    rest.remove_prefix(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const auto database = number(rest.substr(slash + 1), 0, 1 << 20);
    if (!database) return badUrl(url, "the database is no number");
    address.database = *database;
    rest = rest.substr(0, slash);
  }
  std::optional<std::string_view> port;
  if (rest.starts_with("[")) {  // an IPv6 address
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return badUrl(url, "no ] after the IPv6 address");
    address.host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') return badUrl(url, "something after the IPv6 address");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const size_t colon = rest.find(':');
    address.host = rest.substr(0, colon);
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (address.host.empty()) return badUrl(url, "no host");
  if (port) {
    const auto value = number(*port, 1, 65535);
    if (!value) return badUrl(url, "the port is no number from 1 to 65535");
    address.port = *value;
  }
  return address;
}

#if DEVDL_HAVE_HIREDIS
struct RemoteStore::Connection {
  struct FreeReply {
    const Hiredis *api;
    void operator()(redisReply *reply) const { api->freeReplyObject(reply); }
  };
  using Reply = std::unique_ptr<redisReply, FreeReply>;

  const Hiredis &api;
  redisContext *context;               // its socket, and the calls themselves where there is no TLS
  std::unique_ptr<TlsChannel> tls;     // rediss://: over context's socket
  redisReader *reader = nullptr;       // the replies read through tls

  ~Connection() {
    tls.reset();
    if (reader) api.readerFree(reader);
    api.free(context);
  }

  /// The reply to the command `argv`, or null with why in `why` (an error reply is one).
  Reply call(std::initializer_list<std::string_view> argv, std::string &why) {
    std::vector<const char *> words;
    std::vector<size_t> sizes;
    for (std::string_view word : argv) {
      words.push_back(word.data());
      sizes.push_back(word.size());
    }
    const SigpipeHeld held;  // a server gone while the command is written
    Reply reply = tls ? callThroughTls(words, sizes, why)
                      : Reply(static_cast<redisReply *>(api.commandArgv(context, static_cast<int>(words.size()),
                                                                        words.data(), sizes.data())),
                              FreeReply{&api});
    if (!reply) {
      // A call past its timeout fails with EAGAIN, which hiredis words as the system does.
      if (!tls)
        why = context->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
                  ? "no answer within " + std::to_string(kCallTimeout.count()) + " ms"
                  : std::string(context->errstr);
      return nullptr;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      why = "the server answered " + std::string(reply->str, reply->len);
      return nullptr;
    }
    return reply;
  }

  // The command formatted and the reply parsed by hiredis, the bytes through TLS.
  Reply callThroughTls(std::vector<const char *> &words, const std::vector<size_t> &sizes, std::string &why) {
    char *command = nullptr;
    const int length = api.formatCommandArgv(&command, static_cast<int>(words.size()), words.data(), sizes.data());
    if (length < 0) {
      why = "out of memory";
      return nullptr;
    }
    llvm::Error written = tls->write(std::string_view(command, length));
    api.freeCommand(command);
    if (written) {
      why = llvm::toString(std::move(written));
      return nullptr;
    }
    for (;;) {
      void *reply = nullptr;
      if (api.readerGetReply(reader, &reply) != REDIS_OK) {
        why = "the server's answer does not parse";
        return nullptr;
      }
      if (reply) return Reply(static_cast<redisReply *>(reply), FreeReply{&api});
      char buffer[16384];
      auto got = tls->read(buffer, sizeof buffer);
      if (!got) {
        why = llvm::toString(got.takeError());
        return nullptr;
      }
      api.readerFeed(reader, buffer, *got);
    }
  }
};
#else
struct RemoteStore::Connection {};
#endif

RemoteStore::RemoteStore(RedisAddress address, TagKey key)
    : address_(std::move(address)), key_(std::move(key)), label_(address_.text()), source_("the remote store " + label_) {}

RemoteStore::~RemoteStore() {
  if (!Debug::get().on(Debug::Statistics) || stats_.hits + stats_.misses + stats_.stores == 0) return;
  report(std::to_string(stats_.hits) + " hits, " + std::to_string(stats_.misses) + " misses, " +
         std::to_string(stats_.stores) + " stored, " + std::to_string(stats_.refused) + " bad values refused; read " +
         bytesText(stats_.bytesRead) + ", wrote " + bytesText(stats_.bytesWritten));
}

void RemoteStore::report(const std::string &text) const {
  if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: remote " + label_ + ": " + text);
}

void RemoteStore::fail(const std::string &why) {
  failed_ = true;
  connection_.reset();
  report(why + "; not asked again by this process, which builds what its disk cache lacks");
}

bool RemoteStore::usable() const {
  std::lock_guard lock(mutex_);
  return !failed_;
}

RemoteStore::Connection *RemoteStore::connect() {
  if (failed_) return nullptr;
  if (connection_) return connection_.get();
#if DEVDL_HAVE_HIREDIS
  std::string why;
  const Hiredis *api = hiredis(why);
  if (!api) {
    fail(why);
    return nullptr;
  }
  redisContext *context = api->connectWithTimeout(address_.host.c_str(), address_.port, timevalOf(kConnectTimeout));
  if (!context || context->err) {
    why = context ? context->errstr : "out of memory";
    if (context) api->free(context);
    fail("cannot connect: " + why);
    return nullptr;
  }
  api->setTimeout(context, timevalOf(kCallTimeout));
  std::unique_ptr<Connection> connection(new Connection{*api, context, nullptr, nullptr});  // frees the context from here on
  if (address_.tls) {
    auto tls = TlsChannel::open(context->fd, address_.host, TlsSettings::fromEnvironment(), kCallTimeout);
    if (!tls) {
      fail(llvm::toString(tls.takeError()));
      return nullptr;
    }
    connection->tls = std::move(*tls);
    connection->reader = api->readerCreate();
  }
  if (!address_.password.empty()) {
    const bool named = !address_.user.empty();
    const auto reply = named ? connection->call({"AUTH", address_.user, address_.password}, why)
                             : connection->call({"AUTH", address_.password}, why);
    if (!reply) {
      fail("AUTH: " + why);
      return nullptr;
    }
  }
  if (address_.database) {
    const std::string database = std::to_string(address_.database);
    if (!connection->call({"SELECT", database}, why)) {
      fail("SELECT " + database + ": " + why);
      return nullptr;
    }
  }
  connection_ = std::move(connection);
  return connection_.get();
#else
  fail("this devdl was built without hiredis's header");
  return nullptr;
#endif
}

std::optional<Entry> RemoteStore::load(const Key &key) {
  std::lock_guard lock(mutex_);
  Connection *connection = connect();
  if (!connection) return std::nullopt;
#if DEVDL_HAVE_HIREDIS
  std::string why;
  const std::string name = keyName(key);
  const auto reply = connection->call({"GET", name}, why);
  if (!reply) {
    fail("GET " + name + ": " + why);
    return std::nullopt;
  }
  if (reply->type == REDIS_REPLY_NIL) {
    ++stats_.misses;
    report("miss " + key.hex());
    return std::nullopt;
  }
  if (reply->type != REDIS_REPLY_STRING) {
    fail("GET " + name + ": a reply of type " + std::to_string(reply->type) + ", not a value");
    return std::nullopt;
  }
  stats_.bytesRead += reply->len;
  // The tag first: nothing of a value this node's key did not tag is read further.
  const std::string_view value(reply->str, reply->len);
  Entry entry;
  if (value.size() < kTagSize)
    why = "it is shorter than a tag";
  else if (!key_.verifies(name, value.substr(0, value.size() - kTagSize), value.substr(value.size() - kTagSize)))
    why = "its tag does not verify under this node's key (written under another key, changed, or moved from "
          "another name)";
  else
    why = verifyEntry(llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(value.data(), value.size() - kTagSize)), key,
                      entry);
  if (!why.empty()) {
    ++stats_.misses;
    ++stats_.refused;
    report("the value of " + name + " is refused: " + why + "; the program is built here and stored over it");
    return std::nullopt;
  }
  ++stats_.hits;
  entry.source = source_;
  report("hit " + key.hex() + ": " + std::to_string(entry.binary().size()) + " bytes");
  return entry;
#else
  return std::nullopt;
#endif
}

void RemoteStore::store(const Key &key, std::string_view description, std::string_view binary,
                        uint64_t buildNanoseconds) {
  std::lock_guard lock(mutex_);
  description = description.substr(0, Entry::kMaxDescription);
  std::string value = entryHeader(key, description, binary, buildNanoseconds);
  if (value.size() + binary.size() + description.size() + kTagSize > kMaxValue) {
    report("an entry of " + bytesText(value.size() + binary.size() + description.size()) +
           " is more than Redis takes: not stored");
    return;
  }
  Connection *connection = connect();
  if (!connection) return;
#if DEVDL_HAVE_HIREDIS
  value.append(binary);
  value.append(description);
  std::string why;
  const std::string name = keyName(key);
  value.append(key_.tag(name, value));
  if (!connection->call({"SET", name, value}, why)) {
    fail("SET " + name + ": " + why);
    return;
  }
  ++stats_.stores;
  stats_.bytesWritten += value.size();
#endif
}

BuildTurn LayeredStore::awaitTurn(const Key &key) {
  BuildTurn turn = local_.awaitTurn(key);
  if (turn.entry) return turn;
  if (std::optional<Entry> entry = remote_->load(key)) {
    local_.storeCopy(key, *entry);
    turn.entry = std::move(entry);
  }
  return turn;
}

void LayeredStore::store(const Key &key, std::string_view description, std::string_view binary,
                         uint64_t buildNanoseconds) {
  local_.store(key, description, binary, buildNanoseconds);
  remote_->store(key, description, binary, buildNanoseconds);
}

BinaryStore &processStore() {
  static BinaryStore &store = []() -> BinaryStore & {
    DiskCache &local = DiskCache::process();
    const char *url = devdlVariable("DEVDL_CACHE_REMOTE");
    if (!url || !*url) return local;
    const bool saying = Debug::get().on(Debug::Statistics);
    if (!local.enabled()) {
      if (saying) Debug::get().print("cache: DEVDL_CACHE_REMOTE is not used: there is no disk cache in front of it");
      return local;
    }
    auto address = parseRedisUrl(url);
    if (!address) {
      const std::string why = llvm::toString(address.takeError());
      if (saying) Debug::get().print("cache: " + why + "; the disk cache serves alone");
      return local;
    }
    // Whoever can write to the server could otherwise hand this node a program.
    const char *keyFile = devdlVariable("DEVDL_CACHE_KEY_FILE");
    if (!keyFile || !*keyFile) {
      if (Debug::get().any())
        Debug::get().print("cache: DEVDL_CACHE_REMOTE is not used without DEVDL_CACHE_KEY_FILE (the cluster's shared "
                           "secret, which tags its entries); the disk cache serves alone");
      return local;
    }
    auto key = TagKey::fromFile(keyFile);
    if (!key) {
      const std::string why = llvm::toString(key.takeError());
      // Set, and refused: said whatever DEVDL_DEBUG says, as ld.so says an LD_PRELOAD it ignores.
      Debug::get().warn("cache: " + why + "; DEVDL_CACHE_REMOTE is not used");
      return local;
    }
    static LayeredStore layered(local, std::make_unique<RemoteStore>(std::move(*address), std::move(*key)));
    return layered;
  }();
  return store;
}

}  // namespace devdl::store
