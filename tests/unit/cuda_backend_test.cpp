// The parts of the CUDA backend that need no GPU: the driver's architecture rules as devdl
// applies them to candidates, the driver's link log in devdl's words, and linking with nvJitLink
// (a compiler library: it links for an sm_90 device on a machine without one).
#include "backend/cuda/architecture.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/function_table.h"
#include "backend/cuda/link_log.h"
#include "backend/cuda/nvjitlink.h"
#include "backend/cuda/program_parts.h"
#include "backend/cuda/toolkit.h"
#include "image/read_image.h"
#include "test_images.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <optional>
#include <set>

namespace devdl::test {
namespace {

using backend::cuda::describeLinkLog;
using backend::cuda::JitInput;
using backend::cuda::JitInputKind;
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
  EXPECT_TRUE(runsOn(ImageFormat::Fatbin, "compute_90,lto_90", 90));
  EXPECT_FALSE(runsOn(ImageFormat::Fatbin, "lto_90", 90)) << "LTO-IR alone is no candidate: nothing reads its symbols";
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

readers::FatbinMember member(ImageFormat format, std::string_view arch) {
  readers::FatbinMember m;
  m.format = format;
  m.arch = arch;
  return m;
}

TEST(CudaFatbinMember, TheHighestCubinThatRunsIsGivenBeforeAnyPtx) {
  const std::vector<readers::FatbinMember> members = {
      member(ImageFormat::Ptx, "compute_90"), member(ImageFormat::Cubin, "sm_80"),
      member(ImageFormat::Cubin, "sm_86"), member(ImageFormat::Cubin, "sm_90")};
  ASSERT_NE(backend::cuda::bestMember(members, 86, false), nullptr);
  EXPECT_EQ(backend::cuda::bestMember(members, 86, false)->arch, "sm_86");
  EXPECT_EQ(backend::cuda::bestMember(members, 90, false)->arch, "sm_90");
  EXPECT_EQ(backend::cuda::bestMember(members, 89, false)->arch, "sm_86");  // sm_90's does not run on 8.9
}

TEST(CudaFatbinMember, PtxWhereNoCubinRunsOrWherePtxAloneIsAsked) {
  const std::vector<readers::FatbinMember> members = {
      member(ImageFormat::Cubin, "sm_80"), member(ImageFormat::Ptx, "compute_75"),
      member(ImageFormat::Ptx, "compute_80"), member(ImageFormat::LtoIr, "lto_80")};
  ASSERT_NE(backend::cuda::bestMember(members, 90, false), nullptr);
  EXPECT_EQ(backend::cuda::bestMember(members, 90, false)->arch, "compute_80");
  EXPECT_EQ(backend::cuda::bestMember(members, 80, false)->arch, "sm_80");
  EXPECT_EQ(backend::cuda::bestMember(members, 80, true)->arch, "compute_80");
  EXPECT_EQ(backend::cuda::bestMember(members, 75, false)->arch, "compute_75");
  EXPECT_EQ(backend::cuda::bestMember(members, 70, false), nullptr);  // nothing runs on 7.0
  EXPECT_EQ(backend::cuda::bestMember(std::vector{member(ImageFormat::Cubin, "sm_90")}, 90, true), nullptr);
}

TEST(CudaFatbinMember, LtoIrCompilesForItsOwnVersionAndLaterOnes) {
  EXPECT_TRUE(backend::cuda::hasLtoIrFor(std::vector{member(ImageFormat::LtoIr, "lto_90")}, 90));
  EXPECT_TRUE(backend::cuda::hasLtoIrFor(std::vector{member(ImageFormat::LtoIr, "lto_80")}, 90));
  EXPECT_FALSE(backend::cuda::hasLtoIrFor(std::vector{member(ImageFormat::LtoIr, "lto_90")}, 80));
  EXPECT_FALSE(backend::cuda::hasLtoIrFor(std::vector{member(ImageFormat::LtoIr, "lto_90a")}, 100));
  EXPECT_FALSE(backend::cuda::hasLtoIrFor(
      std::vector{member(ImageFormat::Ptx, "compute_90"), member(ImageFormat::Cubin, "sm_90")}, 90));
}

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

TEST(CudaLinkLog, PtxasUnresolvedExternAfterLtoNamesTheSymbol) {
  // nvJitLink 13.0's log for app.lto.fatbin linked alone with -lto (NvJitLink.UndefinedSymbolIsNamed).
  EXPECT_EQ(describeLinkLog("ptxas fatal   : Unresolved extern function 'LibDeviceFunc'\n"
                            "ERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (ltoPtx)\n"),
            "undefined device symbol `LibDeviceFunc`\nERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (ltoPtx)");
}

TEST(CudaLinkLog, OddTextIsPassedOnNotLost) {
  EXPECT_EQ(describeLinkLog(""), "");
  EXPECT_EQ(describeLinkLog("error   : Undefined reference to 'x"), "Undefined reference to 'x");
  EXPECT_EQ(describeLinkLog("\n\nerror : something else\n"), "something else");
}

// nvJitLink as a machine without a GPU has it (the CUDA toolkit's), or a skip saying why.
class NvJitLink : public ::testing::Test {
 protected:
  void SetUp() override {
    DEVDL_REQUIRE_CUDA_IMAGES();
    file_ = backend::cuda::findNvJitLink();
    if (!file_) GTEST_SKIP() << "no libnvJitLink.so.13 or .so.12 here (a CUDA 12 or later toolkit installs it)";
  }

  // The images (read from the test images), and PTX `text` where given, as nvJitLink takes them.
  std::vector<JitInput> inputs(const std::vector<std::string> &names, const std::string &text = "") {
    labels_.assign(names.begin(), names.end());
    files_.clear();
    for (const std::string &name : names) files_.push_back(readFile(image(name)));
    if (!text.empty()) {
      labels_.push_back("table.ptx");
      files_.push_back(text + '\0');
    }
    std::vector<JitInput> inputs;
    for (size_t i = 0; i < files_.size(); ++i) {
      const ImageFormat format = sniffFormat(asBytes(files_[i]));
      inputs.push_back({format == ImageFormat::Fatbin  ? JitInputKind::Fatbin
                        : format == ImageFormat::Cubin ? JitInputKind::Cubin
                                                       : JitInputKind::Ptx,
                        asBytes(files_[i]), &labels_[i]});
    }
    return inputs;
  }

  // Links the images, and PTX `text` where given, for sm_90 and reads the cubin nvJitLink made.
  llvm::Expected<DeviceImage> link(const std::vector<std::string> &names, bool lto, const std::string &text = "") {
    auto cubin = backend::cuda::linkWithNvJitLink(*file_, inputs(names, text), 90, lto);
    if (!cubin) return cubin.takeError();
    cubin_ = std::move(*cubin);
    return readRawImage(asBytes(cubin_), ImageFormat::Cubin, nullptr);
  }

  std::optional<backend::cuda::NvJitLinkFile> file_;
  std::deque<std::string> labels_, files_;
  std::string cubin_;
};

TEST_F(NvJitLink, LtoInlinesTheLibraryIntoTheKernel) {
  // With -lto the library's function is inlined into the application's kernel and gone; linked
  // as compiled (-rdc cubins) it stays a function of its own, called across the image boundary.
  auto optimized = link({"app.lto.fatbin", "lib.lto.fatbin"}, true);
  ASSERT_TRUE(!!optimized) << errorText(optimized);
  EXPECT_EQ(symbolLines(*optimized), (std::vector<std::string>{"D LibCounter", "K AppKernel"}));
  auto compiled = link({"app.cubin", "lib.cubin"}, false);
  ASSERT_TRUE(!!compiled) << errorText(compiled);
  EXPECT_EQ(symbolLines(*compiled), (std::vector<std::string>{"D LibCounter", "K AppKernel", "T LibDeviceFunc"}));
  // Without -lto nvJitLink takes the LTO fatbins' PTX: linked, not optimized across.
  auto fromPtx = link({"app.lto.fatbin", "lib.lto.fatbin"}, false);
  ASSERT_TRUE(!!fromPtx) << errorText(fromPtx);
  EXPECT_TRUE(contains(symbolLines(*fromPtx), "T LibDeviceFunc"));
}

// devdl's table of a program's functions (backend/cuda/function_table.h) links beside -rdc
// cubins without LTO, where nvJitLink binds the declarations by name (what the table holds is
// checked on the GPU: Cuda.FunctionPointerAcrossImages); a name no image defines fails the link,
// named.
TEST_F(NvJitLink, TheFunctionTableLinksBesideCompiledImages) {
  const std::string_view names[] = {"LibDeviceFunc"};
  auto linked = link({"app.cubin", "lib.cubin"}, false, backend::cuda::functionTablePtx(names, 90));
  ASSERT_TRUE(!!linked) << errorText(linked);
  EXPECT_TRUE(contains(symbolLines(*linked), "T LibDeviceFunc"));
  const std::string_view missing[] = {"LibDeviceFunc", "NoSuchFunction"};
  auto refused = link({"app.cubin", "lib.cubin"}, false, backend::cuda::functionTablePtx(missing, 90));
  ASSERT_FALSE(!!refused);
  EXPECT_NE(errorText(refused).find("table.ptx: undefined device symbol `NoSuchFunction`"), std::string::npos);
}

// devdl's own PTX (the function table, the runtime's anchor kernel) targets the device, with the
// first PTX ISA that knows it: a program's PTX version is its oldest input's, which CUB checks.
TEST(CudaPtxHeader, TargetsTheDeviceWithTheFirstIsaThatKnowsIt) {
  EXPECT_EQ(backend::cuda::ptxHeader(90), ".version 7.8\n.target sm_90\n.address_size 64\n\n");
  EXPECT_EQ(backend::cuda::ptxHeader(80).rfind(".version 7.0\n.target sm_80\n", 0), 0u);
  EXPECT_EQ(backend::cuda::ptxHeader(120).rfind(".version 8.7\n.target sm_120\n", 0), 0u);
  EXPECT_EQ(backend::cuda::ptxHeader(101).rfind(".version 8.6\n.target sm_101\n", 0), 0u);  // as sm_100
  EXPECT_EQ(backend::cuda::ptxHeader(35).rfind(".version 4.0\n.target sm_50\n", 0), 0u);    // the oldest PTX knows
}

TEST(CudaFunctionTable, NamesPtxCannotSpellAreLeftOut) {
  EXPECT_EQ(backend::cuda::functionTablePtx({}, 90), "");
  const std::string_view odd[] = {"with.dot", "1digit", ""};
  EXPECT_EQ(backend::cuda::functionTablePtx(odd, 90), "");
  const std::string_view names[] = {"_Z1fi", "g$h", "with.dot"};
  const std::string ptx = backend::cuda::functionTablePtx(names, 90);
  EXPECT_NE(ptx.find(".extern .func _Z1fi;\n.extern .func g$h;\n.visible .global .align 8 .u64 "
                     "__devdl_function_addresses[2] = {_Z1fi, g$h};"),
            std::string::npos)
      << ptx;
  EXPECT_EQ(ptx.find("with.dot"), std::string::npos);
}

// The table is linked only where device code takes a function's address: app_pointer's
// initializer does (`LibPointer = LibDeviceFunc`); the seed's call does not, nor its own call's
// return address.
TEST(CudaFunctionTable, OnlyImagesThatTakeAFunctionsAddressNeedIt) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto takes = [](const std::string &name) {
    const std::string bytes = readFile(image(name));
    return backend::cuda::takesFunctionAddresses(asBytes(bytes), name.ends_with(".ptx"));
  };
  EXPECT_TRUE(takes("app_pointer.cubin"));
  EXPECT_TRUE(takes("app_pointer.ptx"));
  for (const char *name : {"app.cubin", "app.ptx", "lib.cubin", "lib.ptx", "app_counter.cubin"})
    EXPECT_FALSE(takes(name)) << name;
  // Written by hand: an address in code, a call's operands on lines of their own, a comment.
  const std::string ptx = ".version 7.0\n.target sm_50\n.address_size 64\n"
                          ".extern .func (.param .b32 r) f\n(\n.param .b32 f_param_0\n)\n;\n"
                          ".visible .entry k()\n{\n.reg .b64 %rd<2>;\n"
                          "// mov.u64 %rd1, f;\n"
                          "call.uni (retval0),\nf,\n(param0);\n";
  EXPECT_FALSE(backend::cuda::takesFunctionAddresses(asBytes(ptx + "ret;\n}\n"), true));
  EXPECT_TRUE(backend::cuda::takesFunctionAddresses(asBytes(ptx + "mov.u64 %rd1, f;\nret;\n}\n"), true));
  EXPECT_TRUE(backend::cuda::takesFunctionAddresses(asBytes(std::string("not an ELF file")), false))
      << "what cannot be read is taken to";
}

TEST(CudaFunctionTable, ReadBackByNameAndCheckedForAgreement) {
  const uint64_t addresses[] = {0x7f0000001000, 0x7f0000002000};
  const std::string_view words(reinterpret_cast<const char *>(addresses), sizeof addresses);
  auto table = backend::cuda::readFunctionTable(words, std::string_view("f\0g\0", 4));
  ASSERT_TRUE(!!table) << errorText(table);
  EXPECT_EQ(table->size(), 2u);
  EXPECT_EQ(table->lookup("g"), reinterpret_cast<void *>(0x7f0000002000));
  EXPECT_EQ(errorText(backend::cuda::readFunctionTable(words, std::string_view("f\0", 2))),
            "the function table holds 2 addresses for 1 names");
  EXPECT_EQ(errorText(backend::cuda::readFunctionTable(words, std::string_view("f\0g", 3))),
            "the function table's last name is not ended");
}

// The code and message of a failure.
std::pair<ErrorCode, std::string> failure(llvm::Error err) {
  std::pair<ErrorCode, std::string> out{ErrorCode::InvalidArgument, ""};
  llvm::handleAllErrors(std::move(err), [&](const Failure &f) { out = {f.code(), f.reason()}; });
  return out;
}

TEST_F(NvJitLink, UndefinedSymbolIsNamed) {
  auto lto = link({"app.lto.fatbin"}, true);
  ASSERT_FALSE(!!lto);
  auto [ltoCode, ltoText] = failure(lto.takeError());
  EXPECT_EQ(ltoCode, ErrorCode::Unresolved);
  EXPECT_NE(ltoText.find("undefined device symbol `LibDeviceFunc`"), std::string::npos) << ltoText;
  EXPECT_NE(ltoText.find("nvJitLinkComplete (-arch=sm_90 -lto) failed"), std::string::npos) << ltoText;
  auto compiled = link({"app.cubin"}, false);
  ASSERT_FALSE(!!compiled);
  auto [code, text] = failure(compiled.takeError());
  EXPECT_EQ(code, ErrorCode::Unresolved);
  EXPECT_NE(text.find("app.cubin: undefined device symbol `LibDeviceFunc`"), std::string::npos) << text;
}

// Each part's kernels, as sets, sorted: the parts' order is the plan's business.
std::vector<std::set<std::string>> kernelSets(std::span<const ProgramPart> parts) {
  std::vector<std::set<std::string>> out;
  for (const ProgramPart &part : parts) out.emplace_back(part.kernels.begin(), part.kernels.end());
  std::sort(out.begin(), out.end());
  return out;
}

// An LTO link in parts (backend/cuda/program_parts.h), planned from the fatbin's PTX and linked by
// nvJitLink here: every part's cubin holds its own kernels and variables, and no other part's.
TEST_F(NvJitLink, EachPartHoldsItsOwnKernelsAndVariablesAlone) {
  const auto in = inputs({"parts.lto.fatbin"});
  std::string why;
  const auto parts = backend::cuda::planLtoParts(in, 90, 8, &why);
  // Reaching one variable, taking one function's address, names one of which begins with the
  // other: together; Square alone.
  EXPECT_EQ(kernelSets(parts), (std::vector<std::set<std::string>>{{"AddressOfTwice", "TwiceAddress"},
                                                                    {"BumpShared", "ReadShared"},
                                                                    {"Negate", "NegateTwice"},
                                                                    {"Square"}}))
      << why;
  auto modules = backend::cuda::linkLtoParts(*file_, in, 90, parts, 2);
  ASSERT_TRUE(!!modules) << errorText(modules);
  ASSERT_EQ(modules->size(), parts.size());
  size_t withShared = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto linked = readRawImage(asBytes((*modules)[i].binary), ImageFormat::Cubin, nullptr);
    ASSERT_TRUE(!!linked) << errorText(linked);
    std::set<std::string> kernels;
    for (const std::string &line : symbolLines(*linked))
      if (line.starts_with("K ")) kernels.insert(line.substr(2));
    EXPECT_EQ(kernels, std::set<std::string>(parts[i].kernels.begin(), parts[i].kernels.end()));
    const bool shared = contains(symbolLines(*linked), "D Shared");
    EXPECT_EQ(shared, contains(parts[i].variables, "Shared")) << "part " << i;
    withShared += shared;
    // The names the module answers for: its kernels, then its variables.
    std::vector<std::string> names = parts[i].kernels;
    names.insert(names.end(), parts[i].variables.begin(), parts[i].variables.end());
    EXPECT_EQ((*modules)[i].names, names);
  }
  EXPECT_EQ(withShared, 1u) << "one instance of the variable";
  // As the disk cache keeps them, and back.
  const std::string packed = backend::cuda::packModules(*modules);
  ASSERT_TRUE(backend::cuda::isPackedModules(packed));
  auto unpacked = backend::cuda::unpackModules(packed);
  ASSERT_TRUE(!!unpacked) << errorText(unpacked);
  ASSERT_EQ(unpacked->size(), modules->size());
  for (size_t i = 0; i < modules->size(); ++i) {
    EXPECT_EQ((*unpacked)[i].binary, (*modules)[i].binary);
    EXPECT_EQ((*unpacked)[i].names, (*modules)[i].names);
  }
  EXPECT_FALSE(backend::cuda::isPackedModules((*modules)[0].binary)) << "a cubin is no program of parts";
  for (size_t cut : {packed.size() - 1, packed.size() / 2, size_t(30)}) {
    auto refused = backend::cuda::unpackModules(std::string_view(packed).substr(0, cut));
    EXPECT_FALSE(!!refused) << cut;
    if (!refused) {
      EXPECT_NE(errorText(refused).find("cut short"), std::string::npos);
    }
  }
}

TEST_F(NvJitLink, TheLargeLibraryIsPlannedInAsManyPartsAsThreads) {
  const auto in = inputs({"lib_large.lto.fatbin", "app.lto.fatbin"});
  std::string why;
  const auto parts = backend::cuda::planLtoParts(in, 90, 4, &why);
  ASSERT_EQ(parts.size(), 4u) << why;
  std::set<std::string> kernels;
  size_t count = 0;
  for (const ProgramPart &part : parts) {
    kernels.insert(part.kernels.begin(), part.kernels.end());
    count += part.kernels.size();
    // LargeKernel10 begins LargeKernel100's name: nvJitLink would keep both for either.
    EXPECT_EQ(contains(part.kernels, "LargeKernel10"), contains(part.kernels, "LargeKernel100"));
  }
  EXPECT_EQ(count, 97u);
  EXPECT_EQ(kernels.size(), 97u) << "each kernel in one part";
  EXPECT_TRUE(kernels.count("AppKernel"));
  // Balanced: no part holds more than twice its share.
  for (const ProgramPart &part : parts) EXPECT_LE(part.kernels.size(), 2 * 97 / 4u);
  // One thread, or an input without LTO-IR: one part, saying why.
  EXPECT_EQ(backend::cuda::planLtoParts(in, 90, 1, &why).size(), 1u);
  EXPECT_EQ(why, "DEVDL_JOBS=1");
  EXPECT_EQ(backend::cuda::planLtoParts(inputs({"lib.lto.fatbin", "app.lto.fatbin"}), 90, 4, &why).size(), 1u);
  EXPECT_EQ(why, "one kernel");
  const auto compiled = inputs({"lib_large.lto.fatbin", "app.cubin"});
  EXPECT_EQ(backend::cuda::planLtoParts(compiled, 90, 4, &why).size(), 1u);
  EXPECT_NE(why.find("app.cubin is no LTO-IR"), std::string::npos) << why;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char *name_;
  std::optional<std::string> old_;
};

TEST_F(NvJitLink, TheFileIsFoundAsNamedAndIdentifiedByItsState) {
  // DEVDL_NVJITLINK names the file; the identity (part of the disk cache's key) carries its path
  // and state, so that another nvJitLink, or the same one updated, links again.
  ScopedEnv named("DEVDL_NVJITLINK", file_->path.c_str());
  auto found = backend::cuda::findNvJitLink();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, file_->path);
  EXPECT_EQ(found->identity.find("nvJitLink " + file_->path + " "), 0u) << found->identity;
  auto version = backend::cuda::nvJitLinkVersion(*found);
  ASSERT_TRUE(!!version) << errorText(version);
  EXPECT_EQ(version->rfind(std::to_string(found->major) + ".", 0), 0u) << *version;
  ScopedEnv missing("DEVDL_NVJITLINK", "/nonexistent/libnvJitLink.so.13");
  EXPECT_FALSE(backend::cuda::findNvJitLink().has_value());
}

// The CUDA device runtime (backend/cuda/toolkit.h): a kernel launching another image's kernel from
// the device links only with it, as nvcc -dlink links libcudadevrt.a; without it the link names
// the call the device runtime defines. Where the toolkit has none, it is found nowhere, saying
// where it looked.
TEST_F(NvJitLink, TheDeviceRuntimeLinksDynamicParallelismAcrossImages) {
  auto runtime = backend::cuda::findDeviceRuntime();
  if (!runtime) GTEST_SKIP() << "no CUDA device runtime here: " << backend::cuda::deviceRuntimeSearch();
  auto code = backend::cuda::deviceRuntimeCode(*runtime);
  ASSERT_TRUE(!!code) << errorText(code);
  EXPECT_EQ(sniffFormat(*code), ImageFormat::Fatbin);
  auto without = link({"toolchain_app.cubin", "toolchain_lib.cubin"}, false);
  ASSERT_FALSE(!!without);
  EXPECT_NE(errorText(without).find("undefined device symbol `__cudaCDP2"), std::string::npos) << errorText(without);
  std::vector<JitInput> in = inputs({"toolchain_app.cubin", "toolchain_lib.cubin"});
  const std::string label = "the device runtime";
  in.push_back({JitInputKind::Fatbin, *code, &label});
  auto linked = backend::cuda::linkWithNvJitLink(*file_, in, 90, false);
  ASSERT_TRUE(!!linked) << errorText(linked);
  auto program = readRawImage(asBytes(*linked), ImageFormat::Cubin, nullptr);
  ASSERT_TRUE(!!program) << errorText(program);
  for (const char *kernel : {"K ChildKernel", "K ParentKernel", "K ScratchKernel"})
    EXPECT_TRUE(contains(symbolLines(*program), kernel)) << kernel;

  ScopedEnv elsewhere("DEVDL_CUDADEVRT", "/nonexistent/libcudadevrt.a");
  EXPECT_FALSE(backend::cuda::findDeviceRuntime().has_value());
  EXPECT_NE(backend::cuda::deviceRuntimeSearch().find("DEVDL_CUDADEVRT=/nonexistent/libcudadevrt.a"),
            std::string::npos);
  // A file that is no static library with device code is refused, naming it.
  const std::string notALibrary = image("lib.cubin");
  ScopedEnv cubin("DEVDL_CUDADEVRT", notALibrary.c_str());
  auto wrong = backend::cuda::findDeviceRuntime();
  ASSERT_TRUE(wrong.has_value());
  auto refused = backend::cuda::deviceRuntimeCode(*wrong);
  ASSERT_FALSE(!!refused);
  EXPECT_NE(errorText(refused).find(notALibrary + ": the CUDA device runtime cannot be read"), std::string::npos)
      << errorText(refused);
}

}  // namespace
}  // namespace devdl::test
