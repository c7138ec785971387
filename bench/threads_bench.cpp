// devdl from many threads (the loader issue, part 5), side by side with the anchors in one run:
//
//   BM_DeviceDlsym/threads:N   device_dlsym of a linked kernel from N threads at once (the seed's
//                              AppKernel: SPIR-V on OpenCL, or with --cuda cubins on CUDA)
//   BM_GlibcDlsym/threads:N    glibc's dlsym of a loaded library's symbol (libm's cos) likewise
//   BM_DeviceDlsymManyNames/threads:N
//                              device_dlsym of 1,000 kernels in turn, each thread all of them,
//                              through a handle on this program's own file, which carries them
//   BM_DeviceDlsymGlobalScope/threads:N
//                              the same kernels through the global scope: images of a host
//                              object (this program), answered while that object is loaded
//   BM_BuildTwoOneThread       one thread builds two programs (the seed's, the chain's), one after
//                              the other: open, device_dlsym, close everything
//   BM_BuildTwoTwoThreads      two threads build one of them each, at once
//   BM_LookupAlone / BM_LookupWhileBuilding
//                              device_dlsyminfo of a linked kernel (it takes the loader's lock),
//                              alone and while another thread builds programs over and over
//   BM_ThreadAlone / BM_ThreadsFirstLookup
//                              a thread started and joined, doing nothing, and one whose only
//                              work is its first device_dlsym of AppKernel: on OpenCL its own
//                              kernel object made, and released as it ends (the difference is
//                              what a kernel object costs a thread); the heap a live thread's
//                              object takes, as malloc counts it (bytes_per_kernel)
//
// Items per second are totals over the threads. Builds are real: devdl's disk cache and PoCL's
// kernel cache are off (DEVDL_CACHE=0, POCL_KERNEL_CACHE=0). Needs the test images: run from the
// build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "devdl.h"

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

bool cuda = false;  // --cuda: the seed's cubins on the CUDA driver

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

std::string error() {
  const char *e = device_dlerror();
  return e ? e : "unknown error";
}

// The seed's application, linked once for the whole run.
void *linkedApplication(std::string *why) {
  static void *app = [&]() -> void * {
    const char *suffix = cuda ? ".cubin" : ".spv";
    if (!device_dlopen(image(std::string("lib") + suffix).c_str(), DEVDL_NOW | DEVDL_GLOBAL)) return nullptr;
    void *handle = device_dlopen(image(std::string("app") + suffix).c_str(), DEVDL_NOW);
    if (!handle || !device_dlsym(handle, "AppKernel")) return nullptr;
    return handle;
  }();
  if (!app && why) *why = error();
  return app;
}

void BM_DeviceDlsym(benchmark::State &state) {
  std::string why;
  void *app = linkedApplication(&why);
  if (!app) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(device_dlsym(app, "AppKernel"));
  state.SetItemsProcessed(state.iterations());
}

// The kernels this program carries (bench/CMakeLists.txt: many_kernels), and two ways to them:
// the global scope, and a handle on this program's file. Linked once, outside the timing.
constexpr int kManyKernels = 1000;
const std::vector<std::string> &manyKernels() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> made;
    for (int i = 0; i < kManyKernels; ++i) made.push_back("Kernel" + std::to_string(i));
    return made;
  }();
  return names;
}

void *manyKernelsScope(bool global, std::string *why) {
  static void *const scopes[2] = {device_dlopen("/proc/self/exe", DEVDL_LAZY), device_dlopen(nullptr, DEVDL_LAZY)};
  void *scope = scopes[global];
  if (!scope || !device_dlsym(scope, manyKernels().front().c_str())) {
    *why = error();
    return nullptr;
  }
  return scope;
}

void lookUpMany(benchmark::State &state, bool global) {
  std::string why;
  void *scope = manyKernelsScope(global, &why);
  if (!scope) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::vector<std::string> &names = manyKernels();
  for (const std::string &name : names)  // each thread's first lookups take the loader's lock
    if (!device_dlsym(scope, name.c_str())) {
      state.SkipWithError(error().c_str());
      return;
    }
  size_t next = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(device_dlsym(scope, names[next].c_str()));
    if (++next == names.size()) next = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DeviceDlsymManyNames(benchmark::State &state) { lookUpMany(state, false); }
void BM_DeviceDlsymGlobalScope(benchmark::State &state) { lookUpMany(state, true); }

void BM_GlibcDlsym(benchmark::State &state) {
  static void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!libm) {
    state.SkipWithError("cannot load libm.so.6");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(dlsym(libm, "cos"));
  state.SetItemsProcessed(state.iterations());
}

// Opens a program's images, finds its kernel (the build), and closes them again.
struct Program {
  std::vector<std::string> libraries;  // opened DEVDL_GLOBAL
  std::string user;
  const char *kernel;
};
const Program kSeed{{"lib.spv"}, "app.spv", "AppKernel"};
const Program kChain{{"chain_base.spv", "chain_mid.spv"}, "chain_top.spv", "ChainKernel"};

bool build(const Program &program, std::string &why) {
  std::vector<void *> handles;
  for (const std::string &library : program.libraries)
    handles.push_back(device_dlopen(image(library).c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
  void *user = device_dlopen(image(program.user).c_str(), DEVDL_LAZY);
  const bool built = user && device_dlsym(user, program.kernel);
  if (!built) why = error();
  if (user) device_dlclose(user);
  for (void *handle : handles)
    if (handle) device_dlclose(handle);
  return built;
}

void BM_BuildTwoOneThread(benchmark::State &state) {
  std::string why;
  for (auto _ : state)
    if (!build(kSeed, why) || !build(kChain, why)) {
      state.SkipWithError(why.c_str());
      return;
    }
  state.SetItemsProcessed(2 * state.iterations());
}

void BM_BuildTwoTwoThreads(benchmark::State &state) {
  const Program &mine = state.thread_index() == 0 ? kSeed : kChain;
  std::string why;
  for (auto _ : state)
    if (!build(mine, why)) {
      state.SkipWithError(why.c_str());
      return;
    }
  state.SetItemsProcessed(state.iterations());
}

// device_dlsyminfo takes the loader's lock on every call: a lookup that would wait were builds
// made under it.
void lookUp(benchmark::State &state, bool whileBuilding) {
  void *lib = device_dlopen(image("kernel_lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  if (!lib) {
    state.SkipWithError(error().c_str());
    return;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> builds{0};
  std::thread builder;
  if (whileBuilding)
    builder = std::thread([&] {
      std::string why;
      while (!stop && build(kSeed, why)) ++builds;
    });
  devdl_symbol_info info{};
  info.size = sizeof info;
  for (auto _ : state) benchmark::DoNotOptimize(device_dlsyminfo(lib, "LibKernel", &info));
  stop = true;
  if (builder.joinable()) builder.join();
  state.counters["builds meanwhile"] = builds.load();
  state.SetItemsProcessed(state.iterations());
  device_dlclose(lib);
}

void BM_ThreadAlone(benchmark::State &state) {
  for (auto _ : state) std::thread([] {}).join();
  state.SetItemsProcessed(state.iterations());
}

void BM_ThreadsFirstLookup(benchmark::State &state) {
  std::string why;
  void *app = linkedApplication(&why);
  if (!app) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) std::thread([app] { benchmark::DoNotOptimize(device_dlsym(app, "AppKernel")); }).join();
  state.SetItemsProcessed(state.iterations());
  // The heap 64 live threads' objects take: each thread looks its kernel up, and all wait until
  // the heap is counted.
  constexpr int kLive = 64;
  std::barrier looked(kLive + 1), counted(kLive + 1);
  const size_t before = mallinfo2().uordblks;
  std::vector<std::thread> threads;
  for (int t = 0; t < kLive; ++t)
    threads.emplace_back([&] {
      benchmark::DoNotOptimize(device_dlsym(app, "AppKernel"));
      looked.arrive_and_wait();
      counted.arrive_and_wait();
    });
  looked.arrive_and_wait();
  const size_t after = mallinfo2().uordblks;
  counted.arrive_and_wait();
  for (auto &t : threads) t.join();
  state.counters["bytes_per_kernel"] = after > before ? double(after - before) / kLive : 0.0;
}

void BM_LookupAlone(benchmark::State &state) { lookUp(state, false); }
void BM_LookupWhileBuilding(benchmark::State &state) { lookUp(state, true); }

}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cuda") == 0) cuda = true;
  setenv("DEVDL_CACHE", "0", 1);
  setenv("POCL_KERNEL_CACHE", "0", 1);  // before OpenCL starts: every build is a real build
  benchmark::Initialize(&argc, argv);
  for (int threads : {1, 2, 4, 8, 16}) {
    benchmark::RegisterBenchmark("BM_DeviceDlsym", BM_DeviceDlsym)->Threads(threads)->UseRealTime();
    benchmark::RegisterBenchmark("BM_GlibcDlsym", BM_GlibcDlsym)->Threads(threads)->UseRealTime();
  }
  for (int threads : {1, 2, 4, 8, 16})
    benchmark::RegisterBenchmark("BM_DeviceDlsymManyNames", BM_DeviceDlsymManyNames)->Threads(threads)->UseRealTime();
  for (int threads : {1, 2, 4, 8, 16})
    benchmark::RegisterBenchmark("BM_DeviceDlsymGlobalScope", BM_DeviceDlsymGlobalScope)->Threads(threads)->UseRealTime();
  if (!cuda) {
    benchmark::RegisterBenchmark("BM_BuildTwoOneThread", BM_BuildTwoOneThread)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_BuildTwoTwoThreads", BM_BuildTwoTwoThreads)
        ->Threads(2)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_ThreadAlone", BM_ThreadAlone)->UseRealTime();
    benchmark::RegisterBenchmark("BM_ThreadsFirstLookup", BM_ThreadsFirstLookup)->UseRealTime();
    benchmark::RegisterBenchmark("BM_LookupAlone", BM_LookupAlone)->UseRealTime();
    benchmark::RegisterBenchmark("BM_LookupWhileBuilding", BM_LookupWhileBuilding)->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
