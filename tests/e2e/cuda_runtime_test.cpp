// The CUDA runtime's registration of nvcc -rdc=true objects (include/devdl_cuda.h) as far as it
// runs without a GPU: libraries' constructors calling devdl in the host loader's order, and a
// library linked with devdl-pack --cuda-register's object seen as carrying its objects' device
// code. On the GPU machine, samples/cuda-runtime runs the rest (scripts/gpu-run.sh).
#include "test_images.h"
#include "test_support.h"

#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include <filesystem>
#include <map>

namespace devdl::test {
namespace {

TEST(CudaRuntime, ConstructorsRunInTheHostLoadersOrderWhileARegistrationScansTheProcess) {
  // The first library's constructor registers with devdl, which reads the other loaded objects'
  // files: taking a reference on one (dlopen RTLD_NOLOAD) would run its constructors there, before
  // their turn, and a library's program would be linked before the one it needs.
  CommandResult r = run({DEVDL_TEST_CUDA_REGISTER_PROBE});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "the second library's constructor saw the first's finished: 1\n");
  // The first has no device code: said as ld.so says a lookup error, naming the library.
  EXPECT_NE(r.err.find("device symbol lookup error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("libdevdl_test_cuda_first.so: no relocatable device code was found in its file"),
            std::string::npos)
      << r.err;
}

TEST(CudaRuntime, ARegistrationRunsPreloadedToolsConstructorsFirstAndLeavesPreloadedCarriersTheirTurn) {
  // The host loader runs preloaded objects' constructors after those of the libraries the
  // program needs; a tool injected with LD_PRELOAD (compute-sanitizer) must be initialized
  // before CUDA starts, which the first library's registration may do. A preloaded library that
  // carries CUDA objects for devdl registers in its turn.
  const std::string preload =
      std::string("LD_PRELOAD=") + DEVDL_TEST_PRELOADED_TOOL + ":" + DEVDL_TEST_PRELOADED_CARRIER;
  // Under AddressSanitizer the preloaded objects would come before its runtime, which it refuses.
  const char *asan = std::getenv("ASAN_OPTIONS");
  const std::string asanOptions = "ASAN_OPTIONS=" + std::string(asan ? asan : "") + ":verify_asan_link_order=0";
  CommandResult r =
      run({"/usr/bin/env", preload, asanOptions, "DEVDL_DEBUG=libs", DEVDL_TEST_CUDA_REGISTER_PROBE});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "the second library's constructor saw the first's finished: 1\n"
            "the preloaded tool's and carrier's constructors had run 1 and 0 times when the first library's "
            "registration returned, 1 and 1 at main\n");
  EXPECT_NE(r.err.find(std::string("devdl: before CUDA starts, LD_PRELOAD's ") + DEVDL_TEST_PRELOADED_TOOL +
                       " is initialized (now, if it was not yet)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find(std::string("LD_PRELOAD's ") + DEVDL_TEST_PRELOADED_CARRIER), std::string::npos) << r.err;
}

TEST(CudaRuntime, ALibraryLinkedWithItsRegistrationObjectCarriesItsObjectsCode) {
  if (!*DEVDL_TEST_CUDA_RUNTIME_SAMPLE)
    GTEST_SKIP() << "samples/cuda-runtime was not built: no nvcc at build time (PATH, /usr/local/cuda/bin)";
  // libcudauser.so needs libcudamath.so: both constructors register, each library's code read
  // from its file's __nv_relfatbin; a library opened RTLD_LOCAL stays out of the global scope.
  CommandResult r = run({DEVDL_TEST_CUDA_REGISTER_PROBE, std::string(DEVDL_TEST_CUDA_RUNTIME_SAMPLE) + "/libcudauser.so"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("libcudamath.so 0 fatbin 3 local\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libcudauser.so 0 fatbin 4 local\n"), std::string::npos) << r.out;
  // Linked where there is a GPU; elsewhere each registration says why not, and the process goes on.
  if (!r.err.empty()) {
    EXPECT_NE(r.err.find("device symbol lookup error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("libcudauser.so"), std::string::npos) << r.err;
  }
}

// The symbols of a relocatable object: name -> (defined, hidden).
std::map<std::string, std::pair<bool, bool>> symbolsOf(const std::string &path) {
  std::map<std::string, std::pair<bool, bool>> symbols;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) return symbols;
  auto object = llvm::object::ObjectFile::createObjectFile((*buffer)->getMemBufferRef());
  if (!object) {
    llvm::consumeError(object.takeError());
    return symbols;
  }
  for (const llvm::object::ELFSymbolRef symbol : llvm::cast<llvm::object::ELFObjectFileBase>(object->get())->symbols()) {
    auto name = symbol.getName();
    auto flags = symbol.getFlags();
    if (!name || !flags) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(flags.takeError());
      continue;
    }
    if (name->empty()) continue;
    symbols[name->str()] = {!(*flags & llvm::object::SymbolRef::SF_Undefined),
                            symbol.getOther() == llvm::ELF::STV_HIDDEN};
  }
  return symbols;
}

TEST(DevdlPack, CudaRegisterDefinesEachObjectsRegistrationHidden) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  const std::string dir = scratchDir();
  // An object, and the same in a static library: one registration, as nvcc -dlink takes them.
  ASSERT_EQ(run({DEVDL_AR, "rcs", dir + "/librdc.a", image("lib_rdc.o")}).status, 0);
  for (const std::string &input : {image("lib_rdc.o"), dir + "/librdc.a"}) {
    SCOPED_TRACE(input);
    const std::string out = dir + "/register.o";
    CommandResult r = run({DEVDL_PACK, "--cuda-register", "-o", out, input});
    ASSERT_EQ(r.status, 0) << r.err;
    std::string registers;
    for (const auto &[name, what] : symbolsOf(out)) {
      if (!name.starts_with("__cudaRegisterLinkedBinary_")) continue;
      registers = name;
      EXPECT_TRUE(what.first && what.second) << name << ": defined and hidden";
    }
    // The one the object's constructor calls.
    ASSERT_FALSE(registers.empty());
    EXPECT_EQ(symbolsOf(image("lib_rdc.o")).count(registers), 1u);
    const auto symbols = symbolsOf(out);
    for (const char *imported : {"device_dlregister_cuda", "device_dlunregister_cuda", "__cudaRegisterFatBinary",
                                 "__cudaRegisterFunction", "cudaGetFuncBySymbol"})
      EXPECT_TRUE(symbols.count(imported) && !symbols.at(imported).first) << imported;
    // A link with the static library takes its object, as with nvcc -dlink's object: the
    // registration object names the object's fat binary wrapper. (A relocatable link: the test's
    // object is not position-independent.)
    const std::string linked = dir + "/linked.o";
    CommandResult link = run({DEVDL_CXX, "-r", "-nostdlib", "-o", linked, out, dir + "/librdc.a"});
    ASSERT_EQ(link.status, 0) << link.err;
    CommandResult nm = run({DEVDL_NM, linked});
    EXPECT_EQ(nm.status, 0) << nm.err;
    EXPECT_EQ(linesOf(nm.out), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc"})) << nm.out;
  }
}

// The registrations of an object's file: the __cudaRegisterLinkedBinary_* it defines.
std::vector<std::string> registrationsOf(const std::string &path) {
  std::vector<std::string> names;
  for (const auto &[name, what] : symbolsOf(path))
    if (name.starts_with("__cudaRegisterLinkedBinary_") && what.first) names.push_back(name);
  return names;
}

// nvcc -dlink's arguments, as CMake's device link passes them: -lNAME is libNAME.a of a -L
// directory; the device runtime (-lcudadevrt, or its file) is libdevdl's to link, never
// registered (its objects would then be linked into the program, and read as its own code);
// host libraries found in no -L directory are passed over.
TEST(DevdlPack, CudaRegisterTakesLibrariesAsNvccDlinkDoesButNotTheDeviceRuntime) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  const std::string dir = scratchDir();
  ASSERT_EQ(run({DEVDL_AR, "rcs", dir + "/librdc.a", image("lib_rdc.o")}).status, 0);
  const std::string object = dir + "/register.o";
  CommandResult alone = run({DEVDL_PACK, "--cuda-register", "-o", object, image("lib_rdc.o")});
  ASSERT_EQ(alone.status, 0) << alone.err;
  const std::vector<std::string> expected = registrationsOf(object);
  ASSERT_EQ(expected.size(), 1u);
  CommandResult byName = run({DEVDL_PACK, "--cuda-register", "-o", object, "-L", dir, "-lrdc", "-lrt", "-lcudart"});
  ASSERT_EQ(byName.status, 0) << byName.err;
  EXPECT_EQ(registrationsOf(object), expected);
  // With the toolkit's device runtime beside them, by name and by path: the same one registration.
  const std::string toolkit = std::filesystem::path(DEVDL_TEST_NVCC).parent_path().parent_path() / "lib64";
  if (!std::filesystem::exists(toolkit + "/libcudadevrt.a")) GTEST_SKIP() << "no libcudadevrt.a in " << toolkit;
  CommandResult devrt = run({DEVDL_PACK, "--cuda-register", "-o", object, image("lib_rdc.o"), "-L" + toolkit,
                             "-lcudadevrt", toolkit + "/libcudadevrt.a"});
  ASSERT_EQ(devrt.status, 0) << devrt.err;
  EXPECT_EQ(registrationsOf(object), expected);
}

// Hostile and careless input (issue 65): the module ids go into the registration object's C
// source, so a name that is not one nvcc writes is refused, naming the object and the symbol
// (here one that would have compiled a constructor of its own); the output is never an input; a
// file that is not a regular one is refused at once; nothing is left behind where the compiler
// is missing or fails.
TEST(DevdlPack, CudaRegisterRefusesHostileNamesAndFilesAndLeavesNothingBehind) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  const std::string dir = scratchDir();
  const std::string object = dir + "/rdc.o", out = dir + "/register.o";
  std::filesystem::copy_file(image("lib_rdc.o"), object);
  std::string registers;
  for (const auto &[name, what] : symbolsOf(object))
    if (name.starts_with("__cudaRegisterLinkedBinary_")) registers = name;
  ASSERT_FALSE(registers.empty());
  const std::string hostile = dir + "/hostile.o";
  const std::string injected = "__cudaRegisterLinkedBinary_x(void){}\n__attribute__((constructor)) void injected";
  CommandResult renamed = run({DEVDL_OBJCOPY, "--redefine-sym", registers + "=" + injected, object, hostile});
  ASSERT_EQ(renamed.status, 0) << renamed.err;
  CommandResult refused = run({DEVDL_PACK, "--cuda-register", "-o", out, hostile});
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find(hostile + ": the object: `__cudaRegisterLinkedBinary_x(void){}"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("names no module id nvcc writes"), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(out));

  const auto before = readFile(object);
  CommandResult self = run({DEVDL_PACK, "--cuda-register", "-o", object, object});
  EXPECT_EQ(self.status, 1);
  EXPECT_NE(self.err.find("the output " + object + " is an input"), std::string::npos) << self.err;
  CommandResult spelledOtherwise = run({DEVDL_PACK, "--cuda-register", "-o", dir + "/./rdc.o", object});
  EXPECT_EQ(spelledOtherwise.status, 1) << spelledOtherwise.err;
  EXPECT_EQ(readFile(object), before);

  CommandResult device = run({DEVDL_PACK, "--cuda-register", "-o", out, "/dev/zero"});
  EXPECT_EQ(device.status, 1);
  EXPECT_NE(device.err.find("/dev/zero: not a regular file"), std::string::npos) << device.err;

  CommandResult noCompiler = run({DEVDL_PACK, "--cuda-register", "--cc", "/nonexistent/cc", "-o", out, object});
  EXPECT_EQ(noCompiler.status, 1);
  EXPECT_NE(noCompiler.err.find("the C compiler /nonexistent/cc was not found"), std::string::npos) << noCompiler.err;
  CommandResult failing = run({DEVDL_PACK, "--cuda-register", "--cc", "false", "-o", out, object});
  EXPECT_EQ(failing.status, 1);
  EXPECT_NE(failing.err.find("did not compile the registration object"), std::string::npos) << failing.err;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    EXPECT_TRUE(entry.path() == object || entry.path() == hostile) << entry.path() << " was left behind";
}

TEST(DevdlPack, CudaRegisterRefusesWhatRegistersNoDeviceCode) {
  const std::string dir = scratchDir();
  // A file that is no object, named; then a host object without relocatable device code.
  CommandResult spirv = run({DEVDL_PACK, "--cuda-register", "-o", dir + "/r.o", image("lib.spv")});
  EXPECT_EQ(spirv.status, 1);
  EXPECT_NE(spirv.err.find(image("lib.spv")), std::string::npos) << spirv.err;
  CommandResult plain = run({DEVDL_PACK, "--cuda-register", "-o", dir + "/r.o", DEVDL_TEST_HOST_OBJECT});
  EXPECT_EQ(plain.status, 1);
  EXPECT_NE(plain.err.find("no object calls __cudaRegisterLinkedBinary_*"), std::string::npos) << plain.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.o"));
  CommandResult usage = run({DEVDL_PACK, "--cuda-register", image("lib.spv")});
  EXPECT_EQ(usage.status, 2);
  EXPECT_NE(usage.err.find("--cuda-register needs -o FILE"), std::string::npos) << usage.err;
}

}  // namespace
}  // namespace devdl::test
