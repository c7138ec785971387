// One instance of a library's variables on a CUDA device (issue 51), end to end through the C API:
// gstate_lib's State reached by programs linked after the one that holds it, in each format devdl
// can rewrite (PTX, a fat binary's PTX, a fat binary with LTO-IR, whose PTX is linked then), in
// both orders, and gstatic_lib's static Count likewise; and a cubin of machine code alone, which
// cannot reach them, refused with nothing changed. Without a driver (CI) the tests skip, saying so.
#include "devdl.h"
#include "e2e/cuda_fixture.h"
#include "test_images.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace devdl::test {
namespace {

class CudaInstances : public OnCuda<::testing::TestWithParam<const char *>> {
 protected:
  std::string file(const char *name) const { return image(std::string(name) + "." + GetParam()); }
  void *open(const char *name, int flags) {
    void *handle = device_dlopen(file(name).c_str(), flags);
    EXPECT_NE(handle, nullptr) << name << ": " << error();
    return handle;
  }
  // What `kernel` of `handle` writes over `n` threads.
  std::vector<int> run(void *handle, const char *kernel, unsigned n = 2) {
    void *found = device_dlsym(handle, kernel);
    EXPECT_NE(found, nullptr) << kernel << ": " << error();
    return found ? cuda::runIntKernel(*cu_, context_, found, n) : std::vector<int>{};
  }
  int state(void *handle) {
    int value = -1;
    EXPECT_EQ(device_dlread(handle, "State", 0, &value, sizeof value), 0) << error();
    return value;
  }
  static void closeAll(std::initializer_list<void *> handles) {
    for (void *handle : handles) {
      if (handle) {
        EXPECT_EQ(device_dlclose(handle), 0) << error();
      }
    }
  }

};

TEST_P(CudaInstances, TheLibrarysOwnKernelFirstThenApplications) {
  void *lib = open("gstate_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(run(lib, "SetState"), (std::vector<int>{0, 1}));
  void *reader = open("gstate_read", DEVDL_NOW);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(run(reader, "ReadKernel"), (std::vector<int>{100, 101})) << "through the library's function";
  EXPECT_EQ(run(reader, "ReadDirect"), (std::vector<int>{100, 101})) << "as the variable it imports";
  void *bumper = open("gstate_bump", DEVDL_NOW);
  ASSERT_NE(bumper, nullptr);
  EXPECT_EQ(run(bumper, "BumpKernel", 1), std::vector<int>{0});
  EXPECT_EQ(run(reader, "ReadDirect"), (std::vector<int>{101, 102}));
  EXPECT_EQ(state(reader), 101);
  EXPECT_EQ(state(lib), 101);
  EXPECT_EQ(device_dlsym(reader, "State"), device_dlsym(lib, "State"));
  closeAll({bumper, reader, lib});
}

TEST_P(CudaInstances, AnApplicationFirstThenAnotherAndTheLibrarysOwnKernel) {
  void *lib = open("gstate_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = open("gstate_bump", DEVDL_NOW);
  ASSERT_TRUE(lib && bumper);
  EXPECT_EQ(run(bumper, "BumpKernel", 1), std::vector<int>{0});
  void *reader = open("gstate_read", DEVDL_NOW);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(run(reader, "ReadKernel"), (std::vector<int>{6, 7}));
  EXPECT_EQ(run(reader, "ReadDirect"), (std::vector<int>{6, 7}));
  EXPECT_EQ(run(lib, "LibReadState"), (std::vector<int>{6, 7}));
  const int forty = 40;
  ASSERT_EQ(device_dlwrite(lib, "State", 0, &forty, sizeof forty), 0) << error();
  EXPECT_EQ(run(reader, "ReadKernel"), (std::vector<int>{40, 41}));
  closeAll({reader, bumper, lib});
}

// The interposed library's own Level, which its Base keeps using (-Bsymbolic), has one instance,
// held by the library's own program: written through the library's handle, the application's
// kernel sees it through Base.
TEST_P(CudaInstances, TheInterposedLibrarysOwnVariableHasOneInstance) {
  void *first = open("interpose_var_first", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_var_other", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_var_app", DEVDL_NOW);
  ASSERT_TRUE(first && other && app);
  EXPECT_EQ(run(app, "LevelKernel"), (std::vector<int>{1120, 1121}));
  const int three = 3;
  ASSERT_EQ(device_dlwrite(other, "Level", 0, &three, sizeof three), 0) << error();
  EXPECT_EQ(run(app, "LevelKernel"), (std::vector<int>{1320, 1321}));
  int level = 0;
  ASSERT_EQ(device_dlread(app, "Level", 0, &level, sizeof level), 0) << error();
  EXPECT_EQ(level, 2) << "the application's Level is interpose_var_first's";
  closeAll({app, other, first});
}

// A variable the library keeps to itself (gstatic_lib's static Count) has one instance too.
TEST_P(CudaInstances, ALibrarysStaticHasOneInstance) {
  void *lib = open("gstatic_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(run(lib, "SetCount"), (std::vector<int>{0, 1}));
  void *reader = open("gstatic_read", DEVDL_NOW);
  void *bumper = open("gstatic_bump", DEVDL_NOW);
  ASSERT_TRUE(reader && bumper);
  EXPECT_EQ(run(reader, "ReadCountKernel"), (std::vector<int>{100, 101}));
  EXPECT_EQ(run(bumper, "BumpCountKernel", 1), std::vector<int>{0});
  EXPECT_EQ(run(reader, "ReadCountKernel"), (std::vector<int>{101, 102}));
  EXPECT_EQ(run(lib, "LibReadCount"), (std::vector<int>{101, 102}));
  closeAll({bumper, reader, lib});
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaInstances, ::testing::Values("ptx", "fatbin", "lto.fatbin"),
                         [](const auto &info) { return std::string(info.param == std::string("lto.fatbin") ? "lto" : info.param); });

// A cubin of machine code alone cannot reach an instance elsewhere: the second program is
// refused, naming the variable, its image, both programs and what would do, and nothing changes.
class CudaSassOnly : public CudaInstances {};

TEST_P(CudaSassOnly, ASecondCopyOfTheVariableIsAnError) {
  void *lib = open("gstate_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(run(lib, "SetState"), (std::vector<int>{0, 1}));
  EXPECT_EQ(device_dlopen(file("gstate_read").c_str(), DEVDL_NOW), nullptr);
  const std::string why = error();
  for (const std::string &part :
       {"`State` of " + file("gstate_lib") + ": image 0 (cubin", std::string(") has its instance on CUDA device "),
        " in the program of " + file("gstate_lib") + ": image 0 (cubin",
        ", which the program of " + file("gstate_read") + ": image 0 (cubin", std::string(") cannot reach: "),
        std::string("`State` cannot be reached in another program from an image of format cubin"),
        std::string("(an image with PTX or LTO-IR beside its cubins, or opening the application before")})
    EXPECT_NE(why.find(part), std::string::npos) << part << "\nin: " << why;
  EXPECT_EQ(state(lib), 100) << "nothing changed";
  EXPECT_EQ(run(lib, "LibReadState"), (std::vector<int>{100, 101}));
  // Opened first, the application is linked with the library: one program, one instance.
  closeAll({lib});
  lib = open("gstate_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  void *reader = open("gstate_read", DEVDL_NOW);
  ASSERT_TRUE(lib && reader);
  EXPECT_EQ(run(lib, "SetState"), (std::vector<int>{0, 1}));
  EXPECT_EQ(run(reader, "ReadDirect"), (std::vector<int>{100, 101}));
  closeAll({reader, lib});
}

TEST_P(CudaSassOnly, ASecondInstanceOfAStaticIsAnError) {
  void *lib = open("gstatic_lib", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(run(lib, "SetCount"), (std::vector<int>{0, 1}));
  EXPECT_EQ(device_dlopen(file("gstatic_read").c_str(), DEVDL_NOW), nullptr);
  const std::string why = error();
  EXPECT_NE(why.find("Count` of " + file("gstatic_lib") + ": image 0 (cubin"), std::string::npos) << why;
  EXPECT_NE(why.find("cannot reach: a cubin's statics are its machine code's own"), std::string::npos) << why;
  EXPECT_EQ(run(lib, "LibReadCount"), (std::vector<int>{100, 101})) << "nothing changed";
  closeAll({lib});
}

INSTANTIATE_TEST_SUITE_P(Cubin, CudaSassOnly, ::testing::Values("cubin"));

}  // namespace
}  // namespace devdl::test
