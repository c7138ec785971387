// The OpenCL backend's reading of a driver's answers (backend/opencl/opencl_info.h), with no
// driver: extension lists, and strings as info queries give them.
#include "backend/opencl/opencl_info.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace devdl::backend::opencl {
namespace {

TEST(OpenClInfo, AnExtensionIsAWholeWordOfTheList) {
  const std::string extensions = "cl_khr_fp64 cl_khr_spirv_linkonce_odr cl_khr_spir cl_khr_int64_base_atomics";
  for (const char *word : {"cl_khr_fp64", "cl_khr_spir", "cl_khr_int64_base_atomics", "cl_khr_spirv_linkonce_odr"})
    EXPECT_TRUE(hasWord(extensions, word)) << word;
  for (const char *word : {"cl_khr_fp", "khr_fp64", "cl_khr_spirv", "cl_khr_int64", "atomics", "cl_khr_fp64 cl"})
    EXPECT_FALSE(hasWord(extensions, word)) << word;
  // A part of a longer name first, the word itself later.
  EXPECT_TRUE(hasWord("cl_khr_spirv_linkonce_odr cl_khr_spir", "cl_khr_spir"));
  EXPECT_FALSE(hasWord("cl_khr_spirv_linkonce_odr", "cl_khr_spir"));
  EXPECT_TRUE(hasWord("cl_khr_spir ", "cl_khr_spir")) << "drivers end the list with a space";
  EXPECT_FALSE(hasWord("", "cl_khr_spir"));
}

// A query as clGetDeviceInfo answers: the size first, then the value, here `answer` with its
// terminating NUL; `fails` at one of the two calls, or none.
struct FakeQuery {
  std::string answer;
  int fails = 0;  // 1: the size, 2: the value
  int operator()(int object, int param, size_t size, void *value, size_t *sizeReturned) const {
    (void)object, (void)param;
    if (!value) {
      if (fails == 1) return CL_INVALID_VALUE;
      *sizeReturned = answer.size() + 1;
      return CL_SUCCESS;
    }
    if (fails == 2 || size < answer.size() + 1) return CL_INVALID_VALUE;
    std::memcpy(value, answer.c_str(), answer.size() + 1);
    return CL_SUCCESS;
  }
};

TEST(OpenClInfo, AStringAnswerEndsAtItsNulAndAFailedQueryIsEmpty) {
  EXPECT_EQ(infoString(FakeQuery{"Portable Computing Language"}, 0, 0), "Portable Computing Language");
  EXPECT_EQ(infoString(FakeQuery{std::string("3.0\0padding", 11)}, 0, 0), "3.0");
  EXPECT_EQ(infoString(FakeQuery{""}, 0, 0), "");
  EXPECT_EQ(infoString(FakeQuery{"lost", 1}, 0, 0), "");
  EXPECT_EQ(infoString(FakeQuery{"lost", 2}, 0, 0), "");
}

}  // namespace
}  // namespace devdl::backend::opencl
