// The parts of the CUDA backend that need no GPU: the driver's architecture rules as devdl
// applies them to candidates, and the driver's link log in devdl's words.
#include "backend/cuda/cuda_device.h"

#include <gtest/gtest.h>

namespace devdl::test {
namespace {

using backend::cuda::describeLinkLog;
using backend::cuda::runsOn;

TEST(CudaArch, CubinRunsOnItsMajorVersionAtTheSameOrAHigherMinor) {
  EXPECT_TRUE(runsOn(ImageFormat::Cubin, "sm_90", 90));
  EXPECT_TRUE(runsOn(ImageFormat::Cubin, "sm_80", 86));
  EXPECT_FALSE(runsOn(ImageFormat::Cubin, "sm_86", 80));
  EXPECT_FALSE(runsOn(ImageFormat::Cubin, "sm_80", 90));  // another major: no
  EXPECT_FALSE(runsOn(ImageFormat::Cubin, "sm_90", 100));
}

TEST(CudaArch, PtxIsCompiledForTheSameOrALaterDevice) {
  EXPECT_TRUE(runsOn(ImageFormat::Ptx, "sm_80", 90));
  EXPECT_TRUE(runsOn(ImageFormat::Ptx, "compute_90", 90));
  EXPECT_TRUE(runsOn(ImageFormat::Ptx, "sm_52", 120));
  EXPECT_FALSE(runsOn(ImageFormat::Ptx, "sm_90", 89));
}

TEST(CudaArch, ArchSpecificTargetsRunOnlyOnTheirOwnVersion) {
  EXPECT_TRUE(runsOn(ImageFormat::Cubin, "sm_90a", 90));
  EXPECT_FALSE(runsOn(ImageFormat::Cubin, "sm_90a", 91));
  EXPECT_TRUE(runsOn(ImageFormat::Ptx, "sm_90a", 90));
  EXPECT_FALSE(runsOn(ImageFormat::Ptx, "sm_90a", 100));
  // Family-specific PTX: the same major version.
  EXPECT_TRUE(runsOn(ImageFormat::Ptx, "sm_100f", 103));
  EXPECT_FALSE(runsOn(ImageFormat::Ptx, "sm_100f", 120));
}

TEST(CudaArch, FatbinRunsWhereOneMemberDoes) {
  EXPECT_TRUE(runsOn(ImageFormat::Fatbin, "sm_80,compute_80", 90));  // through its PTX
  EXPECT_TRUE(runsOn(ImageFormat::Fatbin, "sm_80,sm_90", 90));
  EXPECT_FALSE(runsOn(ImageFormat::Fatbin, "sm_80,sm_86", 90));
  EXPECT_FALSE(runsOn(ImageFormat::Fatbin, "", 90));
}

TEST(CudaArch, NonsenseRunsNowhere) {
  for (const char *arch : {"", "sm_", "sm_x", "gfx90a", "compute_-1", "sm_90aa"})
    EXPECT_FALSE(runsOn(ImageFormat::Cubin, arch, 90)) << arch;
  EXPECT_FALSE(runsOn(ImageFormat::SpirV, "sm_90", 90));
}

// The error log of cuLinkComplete on driver 580 (H100), app.cubin added without its library
// under the name devdl gives it: recorded by Cuda.DriverLogOfAMissingSymbol on the GPU machine.
constexpr const char *kUndefinedLog =
    "error   : Undefined reference to 'LibDeviceFunc' in 'app.cubin: image 0 (cubin)'\n";

TEST(CudaLinkLog, UndefinedReferenceBecomesDevdlsMessage) {
  EXPECT_EQ(describeLinkLog(kUndefinedLog), "app.cubin: image 0 (cubin): undefined device symbol `LibDeviceFunc`");
}

TEST(CudaLinkLog, EveryLineIsKeptInOrder) {
  const std::string log = std::string(kUndefinedLog) +
                          "error   : Undefined reference to 'ChainBase' in 'mid.ptx: image 0 (ptx)'\n"
                          "info    : 0 bytes gmem\n";
  EXPECT_EQ(describeLinkLog(log),
            "app.cubin: image 0 (cubin): undefined device symbol `LibDeviceFunc`\n"
            "mid.ptx: image 0 (ptx): undefined device symbol `ChainBase`\n"
            "info    : 0 bytes gmem");
}

TEST(CudaLinkLog, OddTextIsPassedOnNotLost) {
  EXPECT_EQ(describeLinkLog(""), "");
  EXPECT_EQ(describeLinkLog("error   : Undefined reference to 'x"), "Undefined reference to 'x");
  EXPECT_EQ(describeLinkLog("\n\nerror : something else\n"), "something else");
}

}  // namespace
}  // namespace devdl::test
