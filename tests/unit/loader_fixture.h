// A loader of its own for each test, over the fake backend (unit/fake_backend.h) and no binary
// store, with its calls turned into test failures where they fail.
#pragma once

#include "store/disk_cache.h"
#include "loader/loader.h"
#include "test_support.h"
#include "unit/fake_backend.h"

#include "devdl.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace devdl::test {

/// An environment variable set while it lives; then as it was.
class ScopedVariable {
 public:
  ScopedVariable(const char *name, const std::string &value) : name_(name) {
    if (const char *before = std::getenv(name)) before_ = before;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (before_) setenv(name_, before_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedVariable(const ScopedVariable &) = delete;
  ScopedVariable &operator=(const ScopedVariable &) = delete;

 private:
  const char *name_;
  std::optional<std::string> before_;
};

class LoaderFixture : public ::testing::Test {
 protected:
  /// Links as links() gives them.
  using Links = std::vector<std::vector<std::string>>;

  /// `hostLockWait`: Loader::Options::hostLockWait.
  explicit LoaderFixture(std::chrono::milliseconds hostLockWait = std::chrono::seconds(1),
                         std::span<const backend::BackendEntry> backends = fake::backends())
      : loader_({backends, noStore, "", hostLockWait}) {}

  void SetUp() override {
    std::lock_guard lock(fake::linksMutex());
    fake::links().clear();
  }

  static store::BinaryStore &noStore() {
    static store::DiskCache none("", 0);
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

  /// A file's handle, opened by its path (a bundle, a copy in scratchDir()); null, failing the
  /// test, where it does not open.
  void *openPath(const std::string &path, int flags) {
    auto handle = loader_.open(path.c_str(), flags);
    if (!handle) {
      ADD_FAILURE() << path << ": " << llvm::toString(handle.takeError());
      return nullptr;
    }
    return *handle;
  }
  /// What a failing open of test image `name` says; "" where it opened (and the test fails).
  std::string openError(const std::string &name, int flags) {
    auto handle = loader_.open(image(name).c_str(), flags);
    if (handle) ADD_FAILURE() << name << " opened";
    return errorText(handle);
  }
  /// Whether test image `name` is loaded: asked with DEVDL_NOLOAD, whose reference is given back.
  bool isLoaded(const std::string &name) {
    auto handle = loader_.open(image(name).c_str(), DEVDL_LAZY | DEVDL_NOLOAD);
    if (!handle) {
      EXPECT_EQ(llvm::toString(handle.takeError()), image(name) + ": not loaded (DEVDL_NOLOAD)");
      return false;
    }
    close(*handle);
    return true;
  }
  /// The file and image a name in a handle's scope binds to, as "file: image N (format)"; else
  /// the error.
  std::string definitionOf(void *handle, std::string_view name) {
    devdl_symbol_info info{};
    info.size = sizeof info;
    if (llvm::Error err = loader_.symbolInfo(handle, name, info)) return llvm::toString(std::move(err));
    return std::string(info.file) + ": image " + std::to_string(info.image) + " (" + info.format + ")";
  }
  /// How the loader's messages name image `index` of test image `name`.
  static std::string label(const std::string &name, unsigned index = 0) {
    return image(name) + ": image " + std::to_string(index) + " (spirv)";
  }

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
