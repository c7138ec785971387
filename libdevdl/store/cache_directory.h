// Whether the cache's directory and the entry files in it can be trusted: another user's, or one
// others can write to, could hand this process programs of their choice. docs/cache-format.md
// ("Where", "Entry").
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace devdl::store {

/// Why an opened entry file cannot be trusted ("" when it can): it must be a plain file of
/// `user` (this user) that nobody else can write.
std::string untrustedEntry(const struct stat &st, uid_t user);
/// Why the cache's directory cannot be trusted ("" when it can), said after its path: it must
/// be `user`'s (this user's), and nobody else may write to it.
std::string untrustedDirectory(const struct stat &st, uid_t user);

}  // namespace devdl::store
