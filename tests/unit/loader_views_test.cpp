// Views (device_dlview) over the fake backend (unit/fake_backend.h): the same handle on another
// device links programs of its own, with their own kernels and variables, decides which images
// are candidates by what that device takes, and lives as long as its handle.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace devdl::test {
namespace {

class LoaderViews : public LoaderFixture {
 protected:
  /// The view of `handle` on the fake device `device` names (a GPU on fake::kGpu's platform);
  /// null, failing the test, where there is none.
  void *view(void *handle, uintptr_t device, void *platform = nullptr) {
    const devdl_native native{sizeof native, fake::kBackendNumber, platform, reinterpret_cast<void *>(device), nullptr};
    auto made = loader_.view(handle, native);
    if (!made) {
      ADD_FAILURE() << llvm::toString(made.takeError());
      return nullptr;
    }
    return *made;
  }
};

TEST_F(LoaderViews, AViewLinksAProgramOfItsOwnAndTheHandleKeepsItsProgram) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  void *onDefault = symbol(app, "AppKernel");
  void *other = view(app, 1);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, app);
  EXPECT_EQ(view(app, 1), other) << "one view for a handle and a device";
  EXPECT_EQ(view(other, 1), other) << "a view's view is of its handle";
  EXPECT_NE(view(app, 2), other) << "another device, another view";
  void *onOther = symbol(other, "AppKernel");
  EXPECT_NE(onOther, onDefault);
  EXPECT_EQ(symbol(app, "AppKernel"), onDefault);
  EXPECT_EQ(symbol(other, "AppKernel"), onOther);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}, {"app.spv", "lib.spv"}})) << "one link for each device";
  // The variable the kernels of each program read: each program's own instance.
  EXPECT_NE(symbol(other, "LibCounter"), symbol(app, "LibCounter"));
  EXPECT_EQ(definitionOf(other, "LibDeviceFunc"), image("lib.spv") + ": image 0 (spirv)");
  auto plan = loader_.planText(other, "AppKernel");
  ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
  EXPECT_NE(plan->find("LibDeviceFunc"), std::string::npos) << *plan;
  // The global scope's handle has views too, and they find the same programs.
  auto global = loader_.open(nullptr, DEVDL_LAZY);
  ASSERT_TRUE(!!global);
  void *globalOther = view(*global, 1);
  EXPECT_EQ(symbol(*global, "LibCounter"), symbol(app, "LibCounter"));
  EXPECT_EQ(symbol(globalOther, "LibCounter"), symbol(other, "LibCounter"));
  EXPECT_EQ(links().size(), 2u) << "nothing linked again";

  // Closing a view drops nothing; closing its handle ends it.
  EXPECT_FALSE(!!loader_.close(other));
  EXPECT_EQ(symbol(other, "AppKernel"), onOther);
  close(app);
  EXPECT_EQ(errorText(loader_.symbol(other, "AppKernel")), "invalid handle");
  EXPECT_EQ(errorText(loader_.view(other, {sizeof(devdl_native), fake::kBackendNumber, nullptr, nullptr, nullptr})),
            "device_dlview: invalid handle");
  close(lib);
}

// Whether an image is a candidate is asked of the device that links it there: a library needing
// a GPU resolves nothing on the default device (a CPU), and the application links on a GPU's view.
TEST_F(LoaderViews, CandidatesAreWhatTheViewsDeviceTakes) {
  const std::string needsGpu = image("lib-needs-gpu.spv.devdl");
  void *lib = openPath(needsGpu, DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  EXPECT_EQ(errorText(loader_.symbol(app, "AppKernel")),
            label("app.spv") + ": undefined device symbol `LibDeviceFunc` (" + needsGpu +
                ": image 0 (spirv) defines it, but it needs aspect gpu, which fake device lacks)");
  void *gpu = view(app, 1, fake::kGpu);
  EXPECT_NE(symbol(gpu, "AppKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib-needs-gpu.spv.devdl"}}));
  EXPECT_NE(errorText(loader_.symbol(app, "AppKernel")), "") << "the default device still lacks it";
  close(app);
  close(lib);
}

// A handle opened DEVDL_NOW is linked on a view's device when the view is made.
TEST_F(LoaderViews, AViewOfAHandleOpenedNowLinksAtOnce) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  EXPECT_EQ(links().size(), 1u);
  void *other = view(app, 1);
  EXPECT_EQ(links().size(), 2u);
  symbol(other, "AppKernel");
  EXPECT_EQ(links().size(), 2u);
  close(app);
  close(lib);
}

// Specialization constants are the handle's: set through a view, the programs linked after on
// every device have the value.
TEST_F(LoaderViews, ASpecializationThroughAViewIsTheHandles) {
  void *spec = open("spec_kernel.spv", DEVDL_LAZY);
  void *other = view(spec, 1);
  const uint32_t value = 42;
  ASSERT_FALSE(!!loader_.specialize(other, 7, std::string_view(reinterpret_cast<const char *>(&value), sizeof value)));
  symbol(spec, "SpecKernel");
  symbol(other, "SpecKernel");
  const std::string bytes(reinterpret_cast<const char *>(&value), sizeof value);
  {
    std::lock_guard lock(fake::linksMutex());
    ASSERT_EQ(fake::links().size(), 2u);
    for (const fake::Link &link : fake::links())
      EXPECT_EQ(link.specConstants, (std::vector<backend::SpecConstants>{{{7, bytes}}}));
  }
  close(spec);
}

// Two backends of two families (SPIR-V's and CUDA's), as an OpenCL device beside a GPU: a view on
// a second cubin device links the cubins there, and leaves the SPIR-V to its default device.
class LoaderViewsOfTwoFamilies : public LoaderFixture {
 protected:
  LoaderViewsOfTwoFamilies() : LoaderFixture(std::chrono::seconds(1), fake::backendsWithCubins()) {}
};

TEST_F(LoaderViewsOfTwoFamilies, EachImageIsLinkedWhereItsFamilyGoes) {
  if (!std::filesystem::exists(image("app.cubin"))) GTEST_SKIP() << "no cubins: nvcc made none here";
  void *libSpirv = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *libCubin = open("lib.cubin", DEVDL_LAZY | DEVDL_GLOBAL);
  void *spirv = open("app.spv", DEVDL_LAZY);
  void *cubin = open("app.cubin", DEVDL_LAZY);
  const devdl_native second{sizeof second, fake::kCubinBackendNumber, nullptr, reinterpret_cast<void *>(uintptr_t{2}),
                            nullptr};
  auto spirvView = loader_.view(spirv, second), cubinView = loader_.view(cubin, second);
  ASSERT_TRUE(spirvView && cubinView);
  EXPECT_EQ(symbol(*spirvView, "AppKernel"), symbol(spirv, "AppKernel")) << "SPIR-V stays on its device";
  EXPECT_NE(symbol(*cubinView, "AppKernel"), symbol(cubin, "AppKernel")) << "the cubins' second device";
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}, {"app.cubin", "lib.cubin"}, {"app.cubin", "lib.cubin"}}));
  close(cubin);
  close(spirv);
  close(libCubin);
  close(libSpirv);
}

// Views made, used and ended with their handles from many threads at once (under
// ThreadSanitizer in `scripts/test.sh --tsan`): each thread's lookups answer, on every device.
TEST_F(LoaderViews, ViewsFromManyThreadsAtOnce) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        auto app = loader_.open(image("app.spv").c_str(), DEVDL_LAZY);
        if (!app) {
          llvm::consumeError(app.takeError());
          ++failures;
          continue;
        }
        const devdl_native native{sizeof native, fake::kBackendNumber, nullptr,
                                  reinterpret_cast<void *>(uintptr_t(1 + (t + round) % 3)), nullptr};
        auto view = loader_.view(*app, native);
        auto onView = view ? loader_.symbol(*view, "AppKernel") : llvm::Expected<void *>(view.takeError());
        auto onDefault = loader_.symbol(*app, "AppKernel");
        if (!onView || !onDefault || *onView == *onDefault) ++failures;
        if (!onView) llvm::consumeError(onView.takeError());
        if (!onDefault) llvm::consumeError(onDefault.takeError());
        if (llvm::Error err = loader_.close(*app)) {
          llvm::consumeError(std::move(err));
          ++failures;
        }
      }
    });
  for (auto &thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  close(lib);
}

}  // namespace
}  // namespace devdl::test
