// device_dlsym against glibc's dlsym as the loaded exports grow (issue 3, benchmark a).
//
// devdl: a bundle of N exported functions (N/1000 images) in the global scope, then the seeds'
// library and application (DEVDL_GLOBAL); the measured call is device_dlsym(global scope,
// "AppKernel"), a lookup among N + 3 exports, after the first call has linked the program.
// glibc: a generated shared library with N exported symbols; the measured call is
// dlsym(handle, last symbol). Same process, same run, N from 1k to 1M.
//
// Needs the test images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "devdl.h"
#include "synthetic_bundle.h"

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace {

std::string workDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/devdl-dlsym-bench-XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  return dir;
}

std::string imagesDir() {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return dir ? dir : "tests/images";
}

// One size's devdl state: the handles stay open for the rest of the process.
void *devdlScope(int exports) {
  static std::map<int, void *> scopes;
  if (auto it = scopes.find(exports); it != scopes.end()) return it->second;
  const std::string path = workDir() + "/exports-" + std::to_string(exports) + ".devdl";
  const std::string bundle = devdl::bench::syntheticBundle(exports / 1000, 1000, "s" + std::to_string(exports) + "_", false);
  std::ofstream(path, std::ios::binary).write(bundle.data(), static_cast<std::streamsize>(bundle.size()));
  if (!device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_GLOBAL)) return nullptr;
  for (const char *name : {"lib.spv", "app.spv"})
    if (!device_dlopen((imagesDir() + "/" + name).c_str(), DEVDL_LAZY | DEVDL_GLOBAL)) return nullptr;
  void *global = device_dlopen(nullptr, DEVDL_LAZY);
  if (!device_dlsym(global, "AppKernel")) return nullptr;  // links once, outside the timing
  return scopes[exports] = global;
}

// A shared library with `exports` global data symbols, assembled and linked once per size.
void *glibcLibrary(int exports) {
  static std::map<int, void *> libraries;
  if (auto it = libraries.find(exports); it != libraries.end()) return it->second;
  const std::string base = workDir() + "/exports-" + std::to_string(exports);
  {
    std::ofstream s(base + ".s");
    s << ".data\n";
    for (int i = 0; i < exports; ++i) s << ".globl g" << i << "\n.type g" << i << ",@object\ng" << i << ": .byte 0\n";
  }
  const std::string command = "cc -shared -nostdlib -o " + base + ".so " + base + ".s";
  if (std::system(command.c_str()) != 0) return nullptr;
  return libraries[exports] = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
}

void BM_DeviceDlsym(benchmark::State &state) {
  void *global = devdlScope(static_cast<int>(state.range(0)));
  if (!global) {
    const char *e = device_dlerror();
    state.SkipWithError(e ? e : "setup failed");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(device_dlsym(global, "AppKernel"));
}

void BM_GlibcDlsym(benchmark::State &state) {
  const int exports = static_cast<int>(state.range(0));
  void *library = glibcLibrary(exports);
  if (!library) {
    state.SkipWithError("cannot build the generated library");
    return;
  }
  const std::string name = "g" + std::to_string(exports - 1);
  for (auto _ : state) benchmark::DoNotOptimize(dlsym(library, name.c_str()));
}

}  // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  for (int exports : {1000, 10000, 100000, 1000000}) {
    benchmark::RegisterBenchmark("BM_DeviceDlsym", BM_DeviceDlsym)->Arg(exports);
    benchmark::RegisterBenchmark("BM_GlibcDlsym", BM_GlibcDlsym)->Arg(exports);
  }
  benchmark::RunSpecifiedBenchmarks();
  std::filesystem::remove_all(workDir());
  return 0;
}
