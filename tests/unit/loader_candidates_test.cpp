// Which images may satisfy an import, over the fake backend (unit/fake_backend.h: a CPU with
// fp64 that takes SPIR-V alone): an image the device cannot take, by format or by an aspect it
// needs, is no candidate, and the error says why; a virtual-function set's images join a program
// that calls or creates the set, its dummy where the device cannot take the real one.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <string>

namespace devdl::test {
namespace {

using LoaderCandidates = LoaderFixture;

TEST_F(LoaderCandidates, AnImageNeedingAnAspectTheDeviceLacksIsNoCandidate) {
  // lib.spv needing the aspects gpu and fp64: the fake device has fp64 alone.
  const std::string needsGpu = image("lib-needs-gpu.spv.devdl");
  void *lib = openPath(needsGpu, DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_EQ(openError("app.spv", DEVDL_NOW), label("app.spv") + ": undefined device symbol `LibDeviceFunc` (" +
                                                 needsGpu + ": image 0 (spirv) defines it, but it needs aspect gpu, "
                                                            "which fake device lacks)");
  close(lib);
  // One needing cpu, which the device has: the same library links.
  lib = openPath(image("lib-needs-cpu.spv.devdl"), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib-needs-cpu.spv.devdl"}}));
  close(app);
  close(lib);
}

TEST_F(LoaderCandidates, AnImageTheDeviceDoesNotTakeIsNoCandidateAndSaysWhy) {
  // The seed's library as SPIR bitcode: of SPIR-V's family, but the fake device takes SPIR-V alone.
  void *lib = open("lib.bc", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_EQ(openError("app.spv", DEVDL_NOW), label("app.spv") + ": undefined device symbol `LibDeviceFunc` (" +
                                                 image("lib.bc") + ": image 0 (spir-bc) defines it, but the fake "
                                                                   "device takes SPIR-V only)");
  close(lib);
  void *bitcodeApp = open("app.bc", DEVDL_LAZY);
  EXPECT_EQ(errorText(loader_.symbol(bitcodeApp, "AppKernel")),
            image("app.bc") + ": image 0 (spir-bc): `AppKernel` is in a spir-bc image, which cannot be linked here: "
                              "the fake device takes SPIR-V only");
  close(bitcodeApp);
  EXPECT_TRUE(links().empty());
}

TEST_F(LoaderCandidates, AVirtualFunctionSetComesFromEveryFileThatHoldsIt) {
  // vf-user calls set A, which vf-a1 and vf-a2 hold; vf_user.spv, the same image without the
  // property, calls no set, and the set's functions are candidates for no one else.
  const std::string a1 = image("vf-a1.spv.devdl"), a2 = image("vf-a2.spv.devdl"), user = image("vf-user.spv.devdl");
  void *first = openPath(a1, DEVDL_LAZY | DEVDL_GLOBAL);
  void *second = openPath(a2, DEVDL_LAZY | DEVDL_GLOBAL);
  auto unset = [&](const char *symbol, const std::string &file) {
    return label("vf_user.spv") + ": undefined device symbol `" + symbol + "` (" + file +
           ": image 0 (spirv) defines it, in virtual functions set A, which no image of the program calls or creates)";
  };
  EXPECT_EQ(openError("vf_user.spv", DEVDL_NOW), unset("VfTwice", a1) + "\n" + unset("VfPlusTen", a2));
  void *app = openPath(user, DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"vf-user.spv.devdl", "vf-a1.spv.devdl", "vf-a2.spv.devdl"}}));
  auto plan = loader_.planText(app, "VfCallKernel");
  ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
  EXPECT_NE(plan->find(a1 + ": image 0 (spirv): calls set A\n"), std::string::npos) << *plan;
  EXPECT_NE(plan->find(a2 + ": image 0 (spirv): calls set A\n"), std::string::npos) << *plan;
  close(app);
  // Without set A's images, the call is an error naming the set.
  close(second);
  close(first);
  const std::string where = user + ": image 0 (spirv)";
  EXPECT_EQ(errorText(loader_.open(user.c_str(), DEVDL_NOW)),
            where + ": undefined device symbol `VfTwice`\n" + where + ": undefined device symbol `VfPlusTen`\n" + where +
                " calls virtual functions set A, which no image in its scope holds");
  EXPECT_EQ(links().size(), 1u);
}

TEST_F(LoaderCandidates, CreatingObjectsOfASetTakesItsDummyWhereTheDeviceLacksAnAspect) {
  // vf-maker creates objects of set B; vf-b-VARIANT holds B's real image needing aspect VARIANT,
  // then B's dummy. The fake device is a CPU.
  for (const std::string variant : {"cpu", "gpu"}) {
    SCOPED_TRACE(variant);
    const bool real = variant == "cpu";
    const std::string set = image("vf-b-" + variant + ".spv.devdl");
    void *b = openPath(set, DEVDL_LAZY | DEVDL_GLOBAL);
    void *maker = openPath(image("vf-maker.spv.devdl"), DEVDL_NOW);
    ASSERT_TRUE(b && maker);
    ASSERT_FALSE(fake::links().empty());
    const std::string taken = set + (real ? ": image 0 (spirv)" : ": image 1 (spirv)");
    EXPECT_EQ(fake::links().back().inputs, (std::vector<std::string>{image("vf-maker.spv.devdl") + ": image 0 (spirv)", taken}));
    auto plan = loader_.planText(maker, "VfMakeKernel");
    ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
    const std::string why = real ? taken + ": creates set B\n"
                                 : taken + ": creates set B: dummy, as " + set +
                                       ": image 0 (spirv) cannot be linked here: it needs aspect gpu, which fake "
                                       "device lacks\n";
    EXPECT_NE(plan->find(why), std::string::npos) << *plan;
    close(maker);
    close(b);
  }
  EXPECT_EQ(links().size(), 2u);
}

}  // namespace
}  // namespace devdl::test
