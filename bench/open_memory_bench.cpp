// device_dlopen_mem reads a copy of the caller's bytes, so that its images may outlive the handle
// (issue 35): what the copy costs beside the open. Each iteration opens a file's bytes from
// memory (DEVDL_LAZY: read and checked, nothing linked) and closes the handle; the anchor copies
// the same bytes as the open does (into a new llvm::MemoryBuffer). Same process, same run; the
// ratio of the two is the copy's share of the open.
//
// Needs the test images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "devdl.h"

#include <benchmark/benchmark.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace {

const char *const kFiles[] = {"lib.spv", "lib_large.spv", "lib_large.cubin"};

std::string bytesOf(int file) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  std::ifstream in(std::string(dir ? dir : "tests/images") + "/" + kFiles[file], std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void BM_OpenMemory(benchmark::State &state) {
  const std::string bytes = bytesOf(static_cast<int>(state.range(0)));
  state.SetLabel(std::string(kFiles[state.range(0)]) + ", " + std::to_string(bytes.size()) + " bytes");
  for (auto _ : state) {
    void *handle = device_dlopen_mem(bytes.data(), bytes.size(), kFiles[state.range(0)], DEVDL_LAZY);
    if (!handle) {
      state.SkipWithError(device_dlerror());
      return;
    }
    device_dlclose(handle);
  }
}

void BM_CopyBytes(benchmark::State &state) {
  const std::string bytes = bytesOf(static_cast<int>(state.range(0)));
  state.SetLabel(std::string(kFiles[state.range(0)]) + ", " + std::to_string(bytes.size()) + " bytes");
  for (auto _ : state) {
    auto copy = llvm::MemoryBuffer::getMemBufferCopy(bytes, kFiles[state.range(0)]);
    benchmark::DoNotOptimize(copy->getBufferStart());
  }
}

}  // namespace

BENCHMARK(BM_OpenMemory)->DenseRange(0, 2);
BENCHMARK(BM_CopyBytes)->DenseRange(0, 2);
BENCHMARK_MAIN();
