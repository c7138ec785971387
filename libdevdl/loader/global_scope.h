// The global scope as the loader changes it: images join it in search order (DEVDL_GLOBAL, the
// host's global objects) or leave it, and DEVDL_DEBUG=symbols says which definitions a join
// hides. The scope itself, its order and its index, is resolve/scopes.h's.
#pragma once

#include "loader/candidacies.h"
#include "loader/image_table.h"
#include "resolve/scopes.h"

#include <cstdint>
#include <span>
#include <vector>

namespace devdl {

class GlobalScope {
 public:
  GlobalScope(ImageTable &images, Scopes &scopes, Candidacies &candidacies)
      : images_(images), scopes_(scopes), candidacies_(candidacies) {}

  /// Image ids join the global scope, in search order, or leave it.
  void join(std::span<const uint32_t> ids);
  void leave(std::span<const uint32_t> ids);
  /// DEVDL_DEBUG=symbols: the definitions in `ids` that an earlier one in the global scope hides
  /// (those of undecided images once decided); from the first call of reportJoins on, those of
  /// each image that joins.
  void reportDuplicates(std::span<const uint32_t> ids);
  void reportJoins() { reportJoins_ = true; }
  /// Reports `ids` once their candidacies are decided (reportWaiting), and then what waited.
  void reportLater(std::span<const uint32_t> ids) { unreported_.insert(unreported_.end(), ids.begin(), ids.end()); }
  void reportWaiting();

 private:
  ImageTable &images_;
  Scopes &scopes_;
  Candidacies &candidacies_;
  bool reportJoins_ = false;
  std::vector<uint32_t> unreported_;  // joined the global scope undecided: DEVDL_DEBUG=symbols waits
};

}  // namespace devdl
