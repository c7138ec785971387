// A loader of its own for each test, over the fake backend (unit/fake_backend.h) and no binary
// store, with its calls turned into test failures where they fail.
#pragma once

#include "cache/disk_cache.h"
#include "loader/loader.h"
#include "test_support.h"
#include "unit/fake_backend.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {

class LoaderFixture : public ::testing::Test {
 protected:
  /// `hostLockWait`: Loader::Options::hostLockWait.
  explicit LoaderFixture(std::chrono::milliseconds hostLockWait = std::chrono::seconds(1))
      : loader_({fake::backends(), noStore, "", hostLockWait}) {}

  void SetUp() override {
    std::lock_guard lock(fake::linksMutex());
    fake::links().clear();
  }

  static cache::BinaryStore &noStore() {
    static cache::DiskCache none("", 0);
    return none;
  }

  void *open(const std::string &name, int flags) {
    auto handle = loader_.open(image(name).c_str(), flags);
    if (!handle) {
      ADD_FAILURE() << name << ": " << llvm::toString(handle.takeError());
      return nullptr;
    }
    return *handle;
  }
  void *symbol(void *handle, std::string_view name) {
    auto found = loader_.symbol(handle, name);
    if (!found) {
      ADD_FAILURE() << name << ": " << llvm::toString(found.takeError());
      return nullptr;
    }
    return *found;
  }
  void close(void *handle) { EXPECT_FALSE(!!loader_.close(handle)); }

  /// The links made so far, each as the file names of its inputs.
  static std::vector<std::vector<std::string>> links() {
    std::lock_guard lock(fake::linksMutex());
    std::vector<std::vector<std::string>> named;
    for (const fake::Link &link : fake::links()) {
      named.emplace_back();
      for (const std::string &label : link.inputs)
        named.back().push_back(std::filesystem::path(label.substr(0, label.find(':'))).filename().string());
    }
    return named;
  }

  Loader loader_;
};

}  // namespace devdl::test
