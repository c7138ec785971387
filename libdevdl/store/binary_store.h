// Where linked programs' native binaries are kept beyond one process, under a key made from
// everything that decides them: the disk cache is one such store; a remote store is another.
#pragma once

#include <llvm/Support/MemoryBuffer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace devdl::store {

/// What an entry is found by: XXH3-128 of everything that decides the binary.
struct Key {
  uint64_t low = 0, high = 0;
  bool operator==(const Key &) const = default;
  /// 32 hex digits, the entry's file name without its suffix.
  std::string hex() const;
};

/// Builds a key from its parts, in order; each part is length-prefixed, so parts cannot run
/// into each other ("ab","c" differs from "a","bc").
class KeyBuilder {
 public:
  KeyBuilder &add(std::string_view part);
  KeyBuilder &add(uint64_t value);
  Key finish() const;

 private:
  std::string parts_;
};

/// An entry as read back: the binary, and what building it cost the process that stored it.
struct Entry {
  std::unique_ptr<llvm::MemoryBuffer> file;  // the whole entry file, mapped where it is large
  uint64_t binarySize = 0;
  uint64_t buildNanoseconds = 0;

  /// At offset 64 of the file, so as aligned as the buffer (a page where mapped).
  std::string_view binary() const { return bytes().substr(kHeaderSize, binarySize); }
  /// What the binary is, for devdl-cache list.
  std::string_view description() const { return bytes().substr(kHeaderSize + binarySize); }

  static constexpr size_t kHeaderSize = 64;
  static constexpr uint64_t kMaxDescription = 64 * 1024;
  /// Where it came from, for what DEVDL_DEBUG=statistics says of a hit.
  std::string_view source = "the disk cache";

 private:
  std::string_view bytes() const { return std::string_view(file->getBufferStart(), file->getBufferSize()); }
};

/// An entry's header (docs/cache-format.md), to be followed by `binary` and `description` (at
/// most Entry::kMaxDescription bytes): the same bytes on disk and in a remote store.
std::string entryHeader(const Key &key, std::string_view description, std::string_view binary,
                        uint64_t buildNanoseconds);
/// Checks `bytes` as `key`'s entry, the header before anything else: "" with `out` holding the
/// entry, else why it is bad.
std::string verifyEntry(std::unique_ptr<llvm::MemoryBuffer> bytes, const Key &key, Entry &out);

/// Held by the process that builds a key's program, so that other processes that miss the same
/// key wait for its entry rather than build it too; let go when destroyed.
class BuildLock {
 public:
  virtual ~BuildLock() = default;
};

/// What waiting for a key's build gives: the lock under which this process builds it, or, with
/// the lock, the entry another process stored since the miss. Neither where the store locks
/// nothing, or where the wait ran past its bound: the process then builds without the lock.
struct BuildTurn {
  std::optional<Entry> entry;
  std::unique_ptr<BuildLock> lock;
};

/// A store of binaries by key. A store never fails a load: every problem is a miss (said under
/// DEVDL_DEBUG=statistics), and an entry is verified before it is handed out.
class BinaryStore {
 public:
  virtual ~BinaryStore() = default;
  /// Whether entries are looked up and stored at all.
  virtual bool enabled() const = 0;
  /// The entry for `key`, verified; nullopt on a miss or a bad entry.
  virtual std::optional<Entry> load(const Key &key) = 0;
  /// After load() missed: waits, within the store's bound, while another process builds `key`,
  /// then gives that process's entry, or this process's turn to build it.
  virtual BuildTurn awaitTurn(const Key &key) = 0;
  /// Stores an entry; failures only mean it is not there next time.
  virtual void store(const Key &key, std::string_view description, std::string_view binary,
                     uint64_t buildNanoseconds) = 0;
  /// An entry loaded but refused by the backend: dropped, so that the next load builds it again.
  virtual void discard(const Key &key, std::string_view why) = 0;
  /// An entry loaded, sound, that this process cannot take now (the backend said ErrorCode::Busy):
  /// kept for the others, and counted as a miss here.
  virtual void unusable(const Key &key, std::string_view why) = 0;
  /// Adds the build time a hit saved, less what loading it cost.
  virtual void saved(uint64_t buildNanoseconds, uint64_t loadNanoseconds) = 0;
};

}  // namespace devdl::store
