// The end-to-end suite (e2e/dlopen_fixture.h): which images satisfy imports on the device: those it
// links, of its formats, with the aspects they need (SYCL's optional kernel features); a virtual-
// function set's images from every file that holds it, its dummy where the device lacks an aspect
// (seed 003).
#include "e2e/dlopen_fixture.h"

#include <string>
#include <vector>

namespace devdl::test {
namespace {

// Optional kernel features: an image needing an aspect the device lacks (gpu on a CPU, cpu on a
// GPU: SYCL's device types) is no candidate, and the error names the aspect and the device.
TEST_F(DeviceDlopen, AnImageNeedingAnAspectTheDeviceLacksIsNoCandidate) {
  const std::string lacking = cpu_ ? "gpu" : "cpu";
  const std::string bundle = image("lib-needs-" + lacking + extension_ + ".devdl");
  void *lib = device_dlopen(bundle.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error(), where("app") + ": undefined device symbol `LibDeviceFunc` (" + bundle + ": image 0 (" +
                         imageWords_ + ") defines it, but it needs aspect " + lacking + ", which " + deviceWords_ +
                         " lacks)");
  device_dlclose(lib);
  // The aspects the device has (the GPU's: gpu and fp64): the same library links.
  const std::string having = image("lib-needs-" + std::string(cpu_ ? "cpu" : "gpu") + extension_ + ".devdl");
  lib = device_dlopen(having.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
  device_dlclose(app);
  device_dlclose(lib);
}

// fp16 as the OpenCL device reports it (cl_khr_fp16): Intel's CPU runtime has it, PoCL 3.1 here
// has not. An image needing it is a candidate where the device has it, and only there.
TEST_F(DeviceDlopen, AnImageNeedingFp16IsACandidateWhereTheDeviceHasIt) {
  DEVDL_ONLY_ON_OPENCL("fp16 as cl_khr_fp16 says");
  const bool fp16 = hasFp16();
  if (kIntelOpenCl) {
    EXPECT_TRUE(fp16) << "Intel's CPU runtime reports cl_khr_fp16";
  }
  const std::string bundle = scratchDir() + "/lib-needs-fp16.devdl";
  CommandResult packed = devdl::test::run({DEVDL_PACK, "-o", bundle, "--aspects", "fp16", deviceImage("lib")});
  ASSERT_EQ(packed.status, 0) << packed.err;
  void *lib = device_dlopen(bundle.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  if (fp16) {
    ASSERT_NE(app, nullptr) << error();
    EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
    device_dlclose(app);
  } else {
    EXPECT_EQ(app, nullptr);
    EXPECT_EQ(error(), where("app") + ": undefined device symbol `LibDeviceFunc` (" + bundle + ": image 0 (" +
                           imageWords_ + ") defines it, but it needs aspect fp16, which " + deviceWords_ + " lacks)");
  }
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, ImagesTheDeviceCannotLinkAreNoCandidates) {
  // The same library in the other formats the tests have: none satisfies the application's
  // import here. One of the application's family that the device does not link is named as the
  // reason; another family's is not even considered.
  const bool cuda = backend_ == DEVDL_BACKEND_CUDA;
  std::vector<std::string> others{"lib.bc", cuda ? "lib.spv" : "lib.cubin"};
  if (!cuda && !DEVDL_TEST_CUDA_IMAGES) others.pop_back();
  for (const std::string &name : others) {
    void *lib = device_dlopen(image(name).c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    ASSERT_NE(lib, nullptr) << error();
    EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr) << name;
    const std::string undefined = where("app") + ": undefined device symbol `LibDeviceFunc`";
    if (name == "lib.bc" && !cuda) {
      EXPECT_EQ(error(), undefined + " (" + image(name) + ": image 0 (spir-bc) defines it, but " + deviceWords_ +
                             " does not link spir-bc images)");
    } else {
      EXPECT_EQ(error(), undefined) << name;
    }
    device_dlclose(lib);
  }
  void *bitcodeApp = device_dlopen(image("app.bc").c_str(), DEVDL_LAZY);
  ASSERT_NE(bitcodeApp, nullptr) << error();
  EXPECT_EQ(device_dlsym(bitcodeApp, "AppKernel"), nullptr);
  // On CUDA the backend that links SPIR-V's family is not in use.
  const std::string why = cuda ? "the opencl backend is not used: DEVDL_BACKEND=cuda"
                               : deviceWords_ + " does not link spir-bc images";
  EXPECT_EQ(error(), image("app.bc") + ": image 0 (spir-bc): `AppKernel` is in a spir-bc image, which cannot be "
                                       "linked here: " + why);
  device_dlclose(bitcodeApp);
}

// Virtual functions (seed 003): a kernel's image that calls set A gets every image of set A in
// its scope, here from two files; without the set, their functions bind to nothing.
TEST_F(DeviceDlopen, AVirtualFunctionSetComesFromEveryFileThatHoldsIt) {
  void *a1 = device_dlopen(image("vf-a1" + extension_ + ".devdl").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *a2 = device_dlopen(image("vf-a2" + extension_ + ".devdl").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_TRUE(a1 && a2) << error();
  EXPECT_EQ(device_dlopen(deviceImage("vf_user").c_str(), DEVDL_NOW), nullptr) << "no set called";
  auto unset = [&](const char *symbol, const char *file) {
    return where("vf_user") + ": undefined device symbol `" + symbol + "` (" + image(file + extension_ + ".devdl") +
           ": image 0 (" + imageWords_ + ") defines it, in virtual functions set A, which no image of the program "
           "calls or creates)";
  };
  EXPECT_EQ(error(), unset("VfTwice", "vf-a1") + "\n" + unset("VfPlusTen", "vf-a2"));
  const std::string user = image("vf-user" + extension_ + ".devdl");
  void *app = device_dlopen(user.c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(app, "VfCallKernel"), 4), (std::vector<int>{10, 13, 16, 19}));
  const char *plan = device_dlplan(app, "VfCallKernel");
  ASSERT_NE(plan, nullptr) << error();
  EXPECT_NE(std::string(plan).find(image("vf-a1" + extension_ + ".devdl") + ": image 0 (" + imageWords_ +
                                   "): calls set A\n"),
            std::string::npos)
      << plan;
  EXPECT_NE(std::string(plan).find(image("vf-a2" + extension_ + ".devdl") + ": image 0 (" + imageWords_ +
                                   "): calls set A\n"),
            std::string::npos)
      << plan;
  device_dlclose(app);
  // Without set A's images, the call is an error naming the set.
  device_dlclose(a2);
  device_dlclose(a1);
  EXPECT_EQ(device_dlopen(user.c_str(), DEVDL_NOW), nullptr);
  EXPECT_NE(error().find(user + ": image 0 (" + imageWords_ + ") calls virtual functions set A, which no image in "
                         "its scope holds"),
            std::string::npos)
      << error();
}

// A kernel's image that creates objects of set B gets B's image where the device has the aspect
// it needs, else B's dummy (its functions emptied), and the plan says why.
TEST_F(DeviceDlopen, CreatingObjectsOfASetTakesItsDummyWhereTheDeviceLacksAnAspect) {
  for (const std::string variant : {"cpu", "gpu"}) {
    SCOPED_TRACE(variant);
    const bool real = variant == (cpu_ ? "cpu" : "gpu");
    const std::string set = image("vf-b-" + variant + extension_ + ".devdl");
    void *b = device_dlopen(set.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    void *maker = device_dlopen(image("vf-maker" + extension_ + ".devdl").c_str(), DEVDL_NOW);
    ASSERT_TRUE(b && maker) << error();
    EXPECT_EQ(run(device_dlsym(maker, "VfMakeKernel"), 3),
              real ? (std::vector<int>{100, 101, 102}) : (std::vector<int>{0, 0, 0}));
    const char *plan = device_dlplan(maker, "VfMakeKernel");
    ASSERT_NE(plan, nullptr) << error();
    const std::string why = real ? set + ": image 0 (" + imageWords_ + "): creates set B\n"
                                 : set + ": image 1 (" + imageWords_ + "): creates set B: dummy, as " + set +
                                       ": image 0 (" + imageWords_ + ") cannot be linked here: it needs aspect " +
                                       variant + ", which " + deviceWords_ + " lacks\n";
    EXPECT_NE(std::string(plan).find(why), std::string::npos) << plan;
    device_dlclose(maker);
    device_dlclose(b);
  }
}

// The same by fp16: a set's real image needing it on Intel's CPU runtime, its dummy on PoCL 3.1.
TEST_F(DeviceDlopen, CreatingObjectsOfASetTakesItsRealImageWhereTheDeviceHasFp16) {
  DEVDL_ONLY_ON_OPENCL("fp16 as cl_khr_fp16 says");
  const std::string set = scratchDir() + "/vf-b-fp16.devdl";
  CommandResult packed = devdl::test::run({DEVDL_PACK, "-o", set, "--vf-set", "B", "--aspects", "fp16",
                                           image("vf_b_real" + extension_), "--vf-set", "B", "--dummy-image",
                                           image("vf_b_dummy" + extension_)});
  ASSERT_EQ(packed.status, 0) << packed.err;
  void *b = device_dlopen(set.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *maker = device_dlopen(image("vf-maker" + extension_ + ".devdl").c_str(), DEVDL_NOW);
  ASSERT_TRUE(b && maker) << error();
  const bool real = hasFp16();
  EXPECT_EQ(run(device_dlsym(maker, "VfMakeKernel"), 3),
            real ? (std::vector<int>{100, 101, 102}) : (std::vector<int>{0, 0, 0}));
  device_dlclose(maker);
  device_dlclose(b);
}

}  // namespace
}  // namespace devdl::test
