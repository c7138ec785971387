// The tests' helpers that need nothing of LLVM: reading and writing files, and device_dlerror()
// as the tests of the C API read it. Apart from test_support.h (which includes this), for the
// CUDA tests built on the GPU machine without LLVM's headers.
#pragma once

#include "devdl.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace devdl::test {

/// The file's bytes; a test failure where it cannot be read.
inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `data` written at `path`, replacing the file; a test failure where it cannot be.
inline void writeFile(const std::string &path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

/// device_dlerror()'s message (which it clears), "" where there is none.
inline std::string error() {
  const char *message = device_dlerror();
  return message ? message : "";
}

}  // namespace devdl::test
