// What the translator's helper process costs a miss (issue 39; goal: at most 5% of a cold SPIR
// build on PoCL). In every iteration, in turns, on the seeds' example (lib.spv and app.spv linked
// by devdl's SPIR-V link, as a build on PoCL links them):
//   in this process   its translation to SPIR with load-time LTO, in this process, as before the
//                     helper (backend::inProcess::spirvToSpir)
//   in the helper     the same in devdl-translate (backend::spirvToSpir): a process started, the
//                     module sent, the SPIR read back
//   cold build        the whole build the helper is part of, to the first kernel's end:
//                     backend::opencl::Device::link of the two images (devdl's link, the helper,
//                     PoCL's build of the SPIR) and AppKernel launched on one work-item, where
//                     PoCL compiles it (its kernel cache off), as bench_cache's cold runs
// The counters: each median in milliseconds, and the helper's cost (in the helper less in this
// process) over a cold build; a helper serves one translation after another, so the first
// translation, which starts it, is also given (first_*: the first iteration's). A hit translates
// nothing: it loads the stored binary.
//
// Needs the test images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "backend/opencl/opencl_device.h"
#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_process.h"
#include "image/read_image.h"
#include "child_process.h"
#include "opencl_launch.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using devdl::bench::median;

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

// AppKernel(global int *) of `program` run on one work-item; false where any step fails.
bool launch(devdl::backend::opencl::Device &device, devdl::backend::Program &program) {
  auto api = devdl::backend::opencl::api();
  auto kernel = program.kernel("AppKernel");
  if (!api || !kernel) {
    llvm::consumeError(api.takeError());
    llvm::consumeError(kernel.takeError());
    return false;
  }
  return devdl::bench::launchOnOneWorkItem(*api, device.id(), static_cast<cl_kernel>(*kernel));
}

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void BM_TranslatorHelperAgainstAColdSpirBuild(benchmark::State &state) {
  setenv("POCL_KERNEL_CACHE", "0", 1);
  if (!devdl::backend::hasTranslatorHelper()) return state.SkipWithError("this build has no SPIR-V translator helper");
  if (!std::getenv("DEVDL_TRANSLATOR")) {  // this program holds devdl itself: the build's helper
    const std::string built = std::string(DEVDL_BENCH_TRANSLATOR);
    setenv("DEVDL_TRANSLATOR", built.c_str(), 1);
  }
  auto device = devdl::backend::opencl::Device::openDefault();
  if (!device) return state.SkipWithError(("no OpenCL device: " + llvm::toString(device.takeError())).c_str());
  if (!(*device)->capabilities().spir || (*device)->capabilities().spirvIl)
    return state.SkipWithError("the OpenCL device is not one that takes SPIR alone (PoCL): nothing is translated");
  std::vector<devdl::ImageFile> files;
  for (const char *name : {"app.spv", "lib.spv"}) {
    auto file = devdl::readImageFile(image(name));
    if (!file) return state.SkipWithError(llvm::toString(file.takeError()).c_str());
    files.push_back(std::move(*file));
  }
  const std::vector<const devdl::DeviceImage *> images = {&files[0].images[0], &files[1].images[0]};
  const std::vector<std::string> labels = {"app.spv: image 0 (spirv)", "lib.spv: image 0 (spirv)"};
  auto linked = devdl::backend::linkSpirv(images, labels);
  if (!linked) return state.SkipWithError(llvm::toString(linked.takeError()).c_str());
  std::vector<devdl::backend::LinkInput> inputs = {{images[0], labels[0]}, {images[1], labels[1]}};

  std::vector<double> here, helper, cold;
  for (auto _ : state) {
    auto start = Clock::now();
    auto inProcess = devdl::backend::inProcess::spirvToSpir(*linked, {}, /*optimize=*/true);
    here.push_back(msSince(start));
    start = Clock::now();
    auto inHelper = devdl::backend::spirvToSpir(*linked, {}, /*optimize=*/true);
    helper.push_back(msSince(start));
    start = Clock::now();
    auto program = (*device)->link(inputs, nullptr);
    const bool ran = program && launch(**device, **program);
    cold.push_back(msSince(start));
    if (!inProcess || !inHelper || !program) {
      const std::string why = llvm::toString(llvm::joinErrors(
          inProcess.takeError(), llvm::joinErrors(inHelper.takeError(), program.takeError())));
      return state.SkipWithError(why.c_str());
    }
    if (*inProcess != *inHelper) return state.SkipWithError("the helper made other SPIR than this process");
    if (!ran) return state.SkipWithError("AppKernel did not run");
    state.SetIterationTime(helper.back() / 1000);
  }
  state.counters["in_process_ms"] = median(here);
  state.counters["in_helper_ms"] = median(helper);
  state.counters["cold_build_ms"] = median(cold);
  state.counters["helper_cost_of_cold_build"] = (median(helper) - median(here)) / median(cold);
  state.counters["first_in_helper_ms"] = helper.front();
  state.counters["first_helper_cost_of_cold_build"] = (helper.front() - median(here)) / median(cold);
}

}  // namespace

BENCHMARK(BM_TranslatorHelperAgainstAColdSpirBuild)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK_MAIN();
