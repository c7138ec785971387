// A store of linked programs shared by many machines: a Redis server, the second level behind
// each machine's disk cache (DEVDL_CACHE_REMOTE), as ccache keeps its remote storage. A local
// miss asks it, a remote hit is written to the disk cache, a build goes to both. Its values are
// the disk cache's entries, byte for byte (docs/cache-format.md), followed by a tag made with the
// cluster's shared secret (DEVDL_CACHE_KEY_FILE, store/entry_tag.h): whoever else can write to
// the server cannot hand a node a program. A value is checked as an entry once its tag verifies.
//
// Nothing here may fail a load: a server that is down, slow (every call has a timeout) or sends
// something that is not a good entry for the key only means a build here, said under
// DEVDL_DEBUG=statistics. After a failed call the store is not asked again by this process.
#pragma once

#include "store/binary_store.h"
#include "store/disk_cache.h"
#include "store/entry_tag.h"

#include <llvm/Support/Error.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace devdl::store {

/// Where the store is: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or rediss:// for TLS
/// (store/redis_tls.h).
struct RedisAddress {
  bool tls = false;
  std::string host;
  int port = 6379;
  std::string user, password;  // for AUTH, where given
  int database = 0;            // for SELECT
  /// The address without its password, for messages.
  std::string text() const;
};

/// Parses DEVDL_CACHE_REMOTE's value; an error says what is wrong with it.
llvm::Expected<RedisAddress> parseRedisUrl(std::string_view url);

struct RemoteStatistics {
  uint64_t hits = 0, misses = 0, stores = 0, refused = 0;
  uint64_t bytesRead = 0, bytesWritten = 0;
};

/// One process's connection to the store, made on first use. Thread-safe (one call at a time).
class RemoteStore {
 public:
  /// How long connecting, and each call after it, may take.
  static constexpr std::chrono::milliseconds kConnectTimeout{500}, kCallTimeout{2000};

  /// `key` tags what is stored and verifies what is loaded.
  RemoteStore(RedisAddress address, TagKey key);
  ~RemoteStore();
  RemoteStore(const RemoteStore &) = delete;
  RemoteStore &operator=(const RemoteStore &) = delete;

  /// `key`'s entry, verified; nullopt on a miss, a bad value or a failure.
  std::optional<Entry> load(const Key &key);
  /// Stores an entry (its header, binary and description, as entryHeader() makes them).
  void store(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds);

  /// Whether it is still asked: no call of this process has failed.
  bool usable() const;
  const RemoteStatistics &statistics() const { return stats_; }
  const std::string &label() const { return label_; }

 private:
  struct Connection;
  /// The connection, made where there is none; null once a call failed.
  Connection *connect();
  /// Gives up on the store for the rest of the process, saying why.
  void fail(const std::string &why);
  void report(const std::string &text) const;

  mutable std::mutex mutex_;
  RedisAddress address_;
  TagKey key_;
  std::string label_;  // "redis://HOST:PORT", for messages and Entry::source
  std::string source_;
  std::unique_ptr<Connection> connection_;
  bool failed_ = false;
  RemoteStatistics stats_;
};

/// The disk cache in front of a remote store: what the loader uses when DEVDL_CACHE_REMOTE is
/// set. Only where the disk cache is on (DEVDL_CACHE=0 turns both off).
class LayeredStore final : public BinaryStore {
 public:
  LayeredStore(DiskCache &local, std::unique_ptr<RemoteStore> remote) : local_(local), remote_(std::move(remote)) {}

  bool enabled() const override { return local_.enabled(); }
  std::optional<Entry> load(const Key &key) override { return local_.load(key); }
  /// The disk cache's turn; then, with no entry yet, the remote store is asked (by the one
  /// process of the machine that holds the key's lock), and its entry written to the disk cache
  /// for the others that wait.
  BuildTurn awaitTurn(const Key &key) override;
  void store(const Key &key, std::string_view description, std::string_view binary,
             uint64_t buildNanoseconds) override;
  void discard(const Key &key, std::string_view why) override { local_.discard(key, why); }
  void unusable(const Key &key, std::string_view why) override { local_.unusable(key, why); }
  void saved(uint64_t buildNanoseconds, uint64_t loadNanoseconds) override {
    local_.saved(buildNanoseconds, loadNanoseconds);
  }

  RemoteStore &remote() { return *remote_; }

 private:
  DiskCache &local_;
  std::unique_ptr<RemoteStore> remote_;
};

/// The process's store, the loader's: the disk cache, in front of the remote store that
/// DEVDL_CACHE_REMOTE names where it is set, with the key DEVDL_CACHE_KEY_FILE holds (without a
/// key, or with an address that does not parse or a key file refused, the disk cache serves
/// alone, and DEVDL_DEBUG says why).
BinaryStore &processStore();

}  // namespace devdl::store
