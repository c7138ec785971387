// What an image file holds, kept in the disk cache beside the programs, so that a process that
// opens the file again, unchanged, reads it only to link it: its images' formats, targets,
// symbols and properties, and the hash (the programs' key) and head of each one's bytes.
//
// A summary is found by the file's identity, as git's index and Bazel trust a file's digest
// while its status is the same: its device and inode, its size, and its modification and change
// times to the nanosecond. Writing to a file moves its change time, which no user can set back.
// No summary is made or used for a file changed in the last kSettledSeconds, whose times a change
// in the same clock tick could repeat; nor for a small file, which costs less to read than its
// summary.
#pragma once

#include "store/binary_store.h"
#include "image/read_image.h"

#include <llvm/Support/Error.h>

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

namespace devdl::store {

/// Files smaller than this are read whole: a summary costs as much to read.
inline constexpr uint64_t kSummaryFrom = 64 * 1024;
/// How long before now a file must have last changed to be summarized, or known by its summary.
inline constexpr int64_t kSettledSeconds = 2;

/// The key of the summary of the file whose status is `status`, `now`; nullopt where it has none:
/// smaller than kSummaryFrom, or changed since kSettledSeconds before `now`.
std::optional<Key> summaryKey(const struct stat &status, const struct timespec &now);

/// The summary of the images of a file just read (every image has its bytes); "" where one of
/// them is a native binary, which only its driver judges, from its bytes (Device::accepts).
std::string summarize(const ImageFile &read);

/// A file's images from its summary (`entry`: the disk cache's, which it keeps), with no bytes:
/// each `unread` from `file`, named as `file` is. Fails (BadFormat) saying what is wrong where
/// the entry holds no summary.
llvm::Expected<ImageFile> imagesOfSummary(Entry entry, std::shared_ptr<const RegularFile> file);

class DiskCache;

/// The images of `file`: from its summary where `cache` (null: none) has one, else read, and
/// summarized there for the next process. A summary that is not one is reported (statistics)
/// and the file read as if it had none.
llvm::Expected<ImageFile> readImageFileSummarized(const std::shared_ptr<const RegularFile> &file, DiskCache *cache);

}  // namespace devdl::store
