// A program linked in parts on an OpenCL device whose driver compiles and links SPIR-V IL (Intel's
// CPU runtime, the IntelOpenCl configuration): each part built in a helper process, each kernel and
// variable the one of the part that holds it, the program stored and loaded back whole.
#include "e2e/opencl_device_fixture.h"
#include "image/instance_cells.h"
#include "image/read_image.h"
#include "test_support.h"

#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <cstdlib>
#include <deque>

namespace devdl::test {
namespace {

using backend::opencl::Device;
using backend::opencl::ProgramOfParts;

class OpenClDriverLinkParts : public OnOpenClDevice {
 protected:
  void SetUp() override {
    OnOpenClDevice::SetUp();
    if (notSetUp()) return;
    if (!device_->capabilities().spirvIl || !device_->capabilities().linker)
      GTEST_SKIP() << "OpenCL device " << device_->name() << " has no linker of SPIR-V IL, where programs are "
                   << "linked in parts (the IntelOpenCl configuration runs this test on Intel's runtime)";
  }

  // The kernels a part's program holds, as the driver names them.
  std::vector<std::string> kernelsOf(const backend::opencl::Program &program) {
    size_t size = 0;
    const auto &cl = *backend::opencl::api();
    EXPECT_EQ(cl.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size), CL_SUCCESS);
    std::string names(size, '\0');
    EXPECT_EQ(cl.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr), CL_SUCCESS);
    std::vector<std::string> list;
    for (llvm::StringRef name : llvm::split(llvm::StringRef(names.c_str()), ';'))
      if (!name.empty()) list.push_back(name.str());
    std::sort(list.begin(), list.end());
    return list;
  }
};

TEST_F(OpenClDriverLinkParts, EachPartHoldsItsOwnKernelsAndTheVariableOnce) {
  read("parts.spv");
  std::string why;
  const std::vector<ProgramPart> parts = device_->planParts(inputs_, 4, &why);
  ASSERT_EQ(parts.size(), 4u) << why;
  std::vector<std::string> all;
  for (const ProgramPart &part : parts) {
    all.insert(all.end(), part.kernels.begin(), part.kernels.end());
    const bool shares = llvm::is_contained(part.kernels, "BumpShared");
    EXPECT_EQ(shares, llvm::is_contained(part.kernels, "ReadShared")) << "the kernels of one variable go together";
    EXPECT_EQ(part.variables, shares ? std::vector<std::string>{"Shared"} : std::vector<std::string>{});
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"BumpShared", "Negate", "NegateTwice", "ReadShared", "Square"}));

  auto linked = device_->linkParts(inputs_, parts);
  ASSERT_TRUE(!!linked) << errorText(linked);
  ProgramOfParts &program = **linked;
  ASSERT_EQ(program.parts().size(), 4u);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<std::string> expected = parts[i].kernels;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(kernelsOf(*program.parts()[i]), expected) << "part " << i << " holds its own kernels alone";
    // The variable is in its part alone: one instance, which its kernels and the host see.
    auto variable = program.parts()[i]->variable("Shared");
    EXPECT_EQ(!!variable, !parts[i].variables.empty()) << "part " << i;
    if (!variable) llvm::consumeError(variable.takeError());
  }

  EXPECT_EQ(run(program, "Square", 4), (std::vector<int>{0, 1, 4, 9}));
  EXPECT_EQ(run(program, "Negate", 3), (std::vector<int>{0, -1, -2}));
  EXPECT_EQ(run(program, "NegateTwice", 3), (std::vector<int>{0, -2, -4})) << "a kernel called as a function";
  EXPECT_EQ(run(program, "ReadShared", 2), (std::vector<int>{7, 7})) << "the initializer";
  EXPECT_EQ(run(program, "BumpShared", 1), (std::vector<int>{8}));
  EXPECT_EQ(run(program, "ReadShared", 1), (std::vector<int>{8})) << "one kernel's write seen by the other";
  int value = 0;
  ASSERT_FALSE(program.copyVariable("Shared", 0, &value, sizeof value, false));
  EXPECT_EQ(value, 8) << "the host reads the instance the kernels use";
  value = 40;
  ASSERT_FALSE(program.copyVariable("Shared", 0, &value, sizeof value, true));
  EXPECT_EQ(run(program, "ReadShared", 1), (std::vector<int>{40})) << "the host's write seen by the kernels";

  EXPECT_EQ(device_->planParts(inputs_, 1, &why).size(), 1u);
  EXPECT_EQ(why, "DEVDL_JOBS=1");
}

// A program in parts that reaches a variable whose instance another program holds (issue 51): the
// cell goes with the kernels that use it, in one part, and set there, it reaches the instance.
TEST_F(OpenClDriverLinkParts, APartReachesTheInstanceAnotherProgramHolds) {
  read("parts.spv");
  auto holder = device_->link(inputs_, nullptr);
  ASSERT_TRUE(!!holder) << errorText(holder);
  auto shared = (*holder)->variable("Shared");
  ASSERT_TRUE(!!shared) << errorText(shared);
  // The image as link() edits it for a program that reaches Shared elsewhere.
  const std::string_view names[] = {"Shared"};
  std::deque<std::string> edits;
  auto edited = editedForLink(inputs_[0].image->bytes, ImageFormat::SpirV, {}, {}, {}, names, {}, 0, edits);
  ASSERT_TRUE(!!edited) << errorText(edited);
  DeviceImage copy = *inputs_[0].image;
  copy.bytes = *edited;
  const std::vector<backend::LinkInput> reaching{{&copy, inputs_[0].label, nullptr, {}, names}};
  std::string why;
  const std::vector<ProgramPart> parts = device_->planParts(reaching, 4, &why);
  ASSERT_EQ(parts.size(), 4u) << why;
  const std::string cell = instanceCellName("Shared");
  for (const ProgramPart &part : parts)
    EXPECT_EQ(part.variables, llvm::is_contained(part.kernels, "BumpShared") ? std::vector<std::string>{cell}
                                                                            : std::vector<std::string>{});
  auto linked = device_->linkParts(reaching, parts);
  ASSERT_TRUE(!!linked) << errorText(linked);
  ProgramOfParts &program = **linked;
  void *address = shared->address;
  ASSERT_FALSE(program.copyVariable(cell, 0, &address, sizeof address, true));
  EXPECT_EQ(run(program, "ReadShared", 2), (std::vector<int>{7, 7})) << "the holder's instance";
  EXPECT_EQ(run(program, "BumpShared", 1), (std::vector<int>{8}));
  EXPECT_EQ(run(**holder, "ReadShared", 1), (std::vector<int>{8})) << "the holder's kernel sees the write";
  EXPECT_EQ(run(program, "Square", 3), (std::vector<int>{0, 1, 4}));
}

// Through link(), as the loader links: a library of 1,000 kernels in as many parts as jobs, each
// in a helper; its binary for the disk cache loads back as the same program of parts.
TEST_F(OpenClDriverLinkParts, ALargeLibraryIsLinkedInPartsAndLoadedBack) {
  read("app.spv");
  read("lib_kernels1000.spv");
  setenv("DEVDL_JOBS", "2", 1);
  std::string binary;
  auto linked = device_->link(inputs_, &binary);
  unsetenv("DEVDL_JOBS");
  ASSERT_TRUE(!!linked) << errorText(linked);
  auto *parted = dynamic_cast<ProgramOfParts *>(linked->get());
  ASSERT_NE(parted, nullptr) << "linked in parts";
  EXPECT_EQ(parted->parts().size(), 2u);
  EXPECT_EQ(run(**linked, "AppKernel", 4), (std::vector<int>{0, 2, 4, 6}));
  ASSERT_FALSE(binary.empty());
  auto loaded = device_->load(binary);
  ASSERT_TRUE(!!loaded) << errorText(loaded);
  auto *again = dynamic_cast<ProgramOfParts *>(loaded->get());
  ASSERT_NE(again, nullptr) << "loaded as a program of parts";
  EXPECT_EQ(again->names(), parted->names());
  EXPECT_EQ(run(**loaded, "AppKernel", 4), (std::vector<int>{0, 2, 4, 6}));
  auto far = (*loaded)->kernel("SmallKernel999");
  EXPECT_TRUE(!!far) << "every kernel stays in the program: " << errorText(far);

  // A small program is linked whole: helpers would cost more than they save.
  inputs_.pop_back();
  read("lib_kernels1.spv");
  auto small = device_->link(inputs_, nullptr);
  ASSERT_TRUE(!!small) << errorText(small);
  EXPECT_EQ(dynamic_cast<ProgramOfParts *>(small->get()), nullptr);
}

}  // namespace
}  // namespace devdl::test
