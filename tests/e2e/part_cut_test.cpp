// A plan's SPIR-V cut to what one kernel uses (backend/part_cut.h), linked by an OpenCL device
// (PoCL here; Intel's CPU runtime in the IntelOpenCl configuration) and run: the program holds that
// kernel alone, computes what the whole would, and keeps each variable with the kernels using it.
#include "backend/part_cut.h"
#include "e2e/opencl_device_fixture.h"

namespace devdl::test {
namespace {

class OpenClPartCut : public OnOpenClDevice {
 protected:
  backend::CutInputs cutTo(std::string_view root, bool joinVariables) {
    const std::string_view roots[] = {root};
    auto cut = backend::cutToRoots(inputs_, roots, joinVariables);
    EXPECT_TRUE(!!cut) << errorText(cut);
    EXPECT_TRUE(cut && *cut) << "cut to " << root;
    return cut && *cut ? std::move(**cut) : backend::CutInputs();
  }

  std::unique_ptr<backend::Program> link(const backend::CutInputs &cut) {
    auto program = device_->link(cut.inputs, nullptr);
    EXPECT_TRUE(!!program) << errorText(program);
    return program ? std::move(*program) : nullptr;
  }
};

TEST_F(OpenClPartCut, AProgramCutToOneKernelHoldsThatKernelAndWhatItCalls) {
  read("app.spv");
  read("lib_kernels1000.spv");
  const backend::CutInputs cut = cutTo("AppKernel", false);
  ASSERT_EQ(cut.parts.size(), 2u);
  EXPECT_EQ(cut.parts[0].kernels, std::vector<std::string>{"AppKernel"});
  EXPECT_EQ(cut.parts[0].functions, std::vector<std::string>{"LibDeviceFunc"});
  EXPECT_EQ(cut.parts[1].kernels.size(), 1000u);
  ASSERT_EQ(cut.given.size(), 2u);
  EXPECT_EQ(cut.given[1].rfind("lib_kernels1000.spv: image 0 (spirv): 0 of 1000 kernels, 1 of 1 functions, 0 of 0 "
                               "variables; ",
                               0),
            0u)
      << cut.given[1];
  EXPECT_LT(cut.inputs[1].image->bytes.size() * 50, inputs_[1].image->bytes.size()) << cut.given[1];
  auto program = link(cut);
  ASSERT_NE(program, nullptr);
  std::vector<int> expected(8);
  for (int i = 0; i < 8; ++i) expected[i] = 2 * i;
  EXPECT_EQ(run(*program, "AppKernel", 8), expected) << "the library's function, called across images";
  auto absent = program->kernel("SmallKernel042");
  EXPECT_FALSE(!!absent) << "a kernel the application does not use is not in its program";
  llvm::consumeError(absent.takeError());
}

TEST_F(OpenClPartCut, AVariableStaysWithTheKernelsThatUseIt) {
  read("parts.spv");
  {
    const backend::CutInputs cut = cutTo("ReadShared", false);
    ASSERT_EQ(cut.parts.size(), 2u);
    EXPECT_EQ(cut.parts[0].kernels, std::vector<std::string>{"ReadShared"});
    EXPECT_EQ(cut.parts[0].variables, std::vector<std::string>{"Shared"});
    auto program = link(cut);
    ASSERT_NE(program, nullptr);
    EXPECT_EQ(run(*program, "ReadShared", 4), (std::vector<int>{7, 7, 7, 7})) << "Shared as it was initialized";
  }
  // Where another program cannot reach its instance, the kernels that reach it come along.
  const backend::CutInputs cut = cutTo("ReadShared", true);
  ASSERT_EQ(cut.parts.size(), 2u);
  EXPECT_EQ(cut.parts[0].kernels, (std::vector<std::string>{"BumpShared", "ReadShared"}));
  auto program = link(cut);
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(run(*program, "BumpShared", 1), std::vector<int>{8});
  EXPECT_EQ(run(*program, "ReadShared", 2), (std::vector<int>{8, 8})) << "one instance, which both kernels see";
  auto square = program->kernel("Square");
  EXPECT_FALSE(!!square);
  llvm::consumeError(square.takeError());
}

TEST_F(OpenClPartCut, WhatCannotBeCutIsLeftWhole) {
  read("parts.spv");
  const std::string_view nothing[] = {"NoSuchKernel"};
  auto cut = backend::cutToRoots(inputs_, nothing, false);
  ASSERT_TRUE(!!cut) << errorText(cut);
  EXPECT_FALSE(cut->has_value()) << "no kernel stands for the roots";
  const backend::SpecConstants set = {{1, std::string(4, '\0')}};
  inputs_[0].specConstants = &set;
  const std::string_view square[] = {"Square"};
  cut = backend::cutToRoots(inputs_, square, false);
  ASSERT_TRUE(!!cut) << errorText(cut);
  EXPECT_FALSE(cut->has_value()) << "specialization constants set";
}

}  // namespace
}  // namespace devdl::test
