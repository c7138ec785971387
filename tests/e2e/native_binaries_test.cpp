// The end-to-end suite's native OpenCL binaries (e2e/dlopen_fixture.h): objects the device compiled,
// packed with their symbols, linked with each other and, where the device takes IL, with SPIR-V.
#include "e2e/dlopen_fixture.h"

#include <string>
#include <utility>
#include <vector>

namespace devdl::test {
namespace {

// Native OpenCL binaries: the test data's OpenCL C compiled by this device (clCompileProgram)
// into objects, packed by devdl-pack with the symbols of the SPIR-V made from the same source.
class NativeBinaries : public DeviceDlopen {
 protected:
  void SetUp() override {
    DeviceDlopen::SetUp();
    DEVDL_ONLY_ON_OPENCL("native OpenCL binaries");
  }

  // The compiled object of tests/data/e2e/NAME.cl, written to the scratch folder.
  std::string compile(const std::string &name) {
    const auto &cl = *backend::opencl::api();
    const std::string source = readFile(std::string(DEVDL_TEST_DATA) + "/e2e/" + name + ".cl");
    const char *text = source.c_str();
    cl_int err = CL_SUCCESS;
    cl_program program = cl.clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    const std::string options = "-I " + std::string(DEVDL_TEST_DATA) + "/e2e";  // device.h
    EXPECT_EQ(cl.clCompileProgram(program, 1, &device_, options.c_str(), 0, nullptr, nullptr, nullptr, nullptr),
              CL_SUCCESS);
    size_t size = 0;
    cl.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
    std::string binary(size, '\0');
    unsigned char *pointer = reinterpret_cast<unsigned char *>(binary.data());
    cl.clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof pointer, &pointer, nullptr);
    cl.clReleaseProgram(program);
    const std::string path = dir_ + "/" + name + ".clobj";
    writeFile(path, binary);
    return path;
  }
  // A bundle of native binaries, each packed with the symbols of its source's SPIR-V.
  std::string pack(const std::string &output, const std::vector<std::pair<std::string, std::string>> &binaries) {
    std::vector<std::string> argv = {DEVDL_PACK, "-o", dir_ + "/" + output};
    for (const auto &[binary, source] : binaries) {
      argv.push_back("--opencl-binary-of");
      argv.push_back(image(source));
      argv.push_back(binary);
    }
    CommandResult packed = devdl::test::run(argv);
    EXPECT_EQ(packed.status, 0) << packed.err;
    return dir_ + "/" + output;
  }
  std::string dir_ = scratchDir();
};

TEST_F(NativeBinaries, LinkWithEachOtherAndRun) {
  const std::string bundle = pack("native.devdl", {{compile("kernel_lib"), "kernel_lib.spv"},
                                                   {compile("kernel_app"), "kernel_app.spv"}});
  CommandResult listed = devdl::test::run({DEVDL_NM, bundle});
  EXPECT_NE(listed.out.find("K UserKernel"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("U LibTwice"), std::string::npos) << listed.out;
  void *handle = device_dlopen(bundle.c_str(), DEVDL_NOW);
  ASSERT_NE(handle, nullptr) << error();
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(handle, "UserKernel", &info), 0) << error();
  EXPECT_STREQ(info.format, "opencl-binary");
  void *user = device_dlsym(handle, "UserKernel");
  void *library = device_dlsym(handle, "LibKernel");
  ASSERT_NO_FATAL_FAILURE(expectKernelLibraryKernels(user, library));
  EXPECT_EQ(device_dlclose(handle), 0);
}

TEST_F(NativeBinaries, WithSpirvOnlyWhereTheDeviceTakesIl) {
  void *lib = device_dlopen(deviceImage("kernel_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  const std::string bundle = pack("app.devdl", {{compile("kernel_app"), "kernel_app.spv"}});
  void *app = device_dlopen(bundle.c_str(), DEVDL_NOW);
  char il[256] = {};
  (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_IL_VERSION, sizeof il - 1, il, nullptr);
  if (std::string(il).find("SPIR-V") != std::string::npos) {
    ASSERT_NE(app, nullptr) << error();
    EXPECT_EQ(run(device_dlsym(app, "UserKernel"), 4), (std::vector<int>{1, 3, 5, 7}));
    device_dlclose(app);
  } else {
    EXPECT_EQ(app, nullptr);
    EXPECT_EQ(error(), bundle + ": image 0 (opencl-binary): OpenCL device " + deviceName_ +
                           " takes no SPIR-V IL, so its native binaries link only with each other, not with " +
                           deviceImage("kernel_lib") + ": image 0 (spirv)");
  }
  device_dlclose(lib);
}

TEST_F(NativeBinaries, ABinaryTheDriverRefusesIsNoCandidate) {
  const std::string garbage = dir_ + "/garbage.clobj";
  writeFile(garbage, std::string(64, 'x'));
  const std::string bundle = pack("garbage.devdl", {{garbage, "kernel_app.spv"}});
  void *handle = device_dlopen(bundle.c_str(), DEVDL_LAZY);
  ASSERT_NE(handle, nullptr) << error();
  EXPECT_EQ(device_dlsym(handle, "UserKernel"), nullptr);
  const std::string message = error();
  EXPECT_NE(message.find("`UserKernel` is in a opencl-binary image, which cannot be linked here: OpenCL device " +
                         deviceName_ + " does not take this native binary: clCreateProgramWithBinary failed: "),
            std::string::npos)
      << message;
  device_dlclose(handle);
}

}  // namespace
}  // namespace devdl::test
