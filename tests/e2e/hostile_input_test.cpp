// Hostile and careless input through the C API and the tools, as a user would give it: files
// that are not regular files, files changed while open, names the demangler would recurse on, a
// setuid program's environment, and every input the fuzzers found (tests/data/fuzz-regressions)
// opened DEVDL_NOW. Nothing may crash, hang or eat memory; errors name the file.
#include "devdl.h"
#include "e2e/opencl_run.h"
#include "test_support.h"

#include <fcntl.h>
#include <spirv-tools/libspirv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace devdl::test {
namespace {

// A command limited in time and, unless sanitized (ASan reserves terabytes of address space), in
// memory: a refusal is immediate, what the limits stop is a failure.
std::vector<std::string> bounded(std::vector<std::string> argv) {
  std::vector<std::string> limits = {"/usr/bin/timeout", "-s", "KILL", "30"};
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  limits.insert(limits.begin(), {"/usr/bin/prlimit", "--as=4294967296"});
#endif
  argv.insert(argv.begin(), limits.begin(), limits.end());
  return argv;
}

std::string assembleSpirv(const std::string &text) {
  spv_context context = spvContextCreate(SPV_ENV_UNIVERSAL_1_0);
  spv_binary binary = nullptr;
  spv_diagnostic diagnostic = nullptr;
  const spv_result_t result = spvTextToBinary(context, text.data(), text.size(), &binary, &diagnostic);
  EXPECT_EQ(result, SPV_SUCCESS) << (diagnostic ? diagnostic->error : "");
  std::string words = result == SPV_SUCCESS ? std::string(reinterpret_cast<const char *>(binary->code), binary->wordCount * 4) : "";
  spvBinaryDestroy(binary);
  spvDiagnosticDestroy(diagnostic);
  spvContextDestroy(context);
  return words;
}

// The environment variables the tests set, restored after each.
class HostileInput : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char *name : {"DEVDL_PRELOAD", "DEVDL_DEBUG", "DEVDL_DEBUG_OUTPUT", "DEVDL_LIBRARY_PATH", "DEVDL_BACKEND",
                             "DEVDL_TRANSLATOR_TIMEOUT", "POCL_CACHE_DIR"})
      unsetenv(name);
  }
};

TEST_F(HostileInput, WhatIsNotARegularFileIsRefusedNamingItsKind) {
  const std::string dir = scratchDir();
  const std::string fifo = dir + "/fifo.spv";  // no writer: opening it for reading would wait for one
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto &[path, kind] : {std::pair<std::string, std::string>{"/dev/zero", "character device"},
                                   {fifo, "FIFO"},
                                   {dir, "directory"}}) {
    const std::string refusal = path + ": not a regular file (" + kind + ")";
    EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY), nullptr);
    EXPECT_EQ(error(), refusal);
    for (const auto &argv : {std::vector<std::string>{DEVDL_NM, path}, {DEVDL_PACK, "-o", dir + "/out.devdl", path}}) {
      CommandResult tool = run(bounded(argv));
      EXPECT_EQ(tool.status, 1) << argv[0] << " " << path << ": " << tool.err;
      EXPECT_NE(tool.err.find(refusal), std::string::npos) << tool.err;
    }
    // In DEVDL_PRELOAD, as in LD_PRELOAD: reported and passed over.
    setenv("DEVDL_PRELOAD", path.c_str(), 1);
    CommandResult probe = run(bounded({DEVDL_TEST_OPEN_PROBE, image("lib.spv")}));
    EXPECT_EQ(probe.status, 0) << probe.err;
    EXPECT_EQ(probe.out, image("lib.spv") + ": opened\n");
    EXPECT_NE(probe.err.find("devdl: DEVDL_PRELOAD: " + refusal + ": ignored"), std::string::npos) << probe.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.devdl"));
}

// `_Z1f` and 100,000 `P`s: LLVM's demangler recurses once a `P` and overflowed the stack.
TEST_F(HostileInput, ALongMangledNameIsReadAndListedAsItIs) {
  const std::string dir = scratchDir();
  const std::string name = "_Z1f" + std::string(100000, 'P') + "i";
  writeFile(dir + "/long.spv", assembleSpirv("OpCapability Addresses\nOpCapability Linkage\nOpCapability Kernel\n"
                                             "OpMemoryModel Physical64 OpenCL\n"
                                             "OpDecorate %f LinkageAttributes \"" + name + "\" Import\n"
                                             "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n"
                                             "%f = OpFunction %void None %fn\nOpFunctionEnd\n"));
  writeFile(dir + "/long.ptx", ".version 7.0\n.target sm_50\n.address_size 64\n.extern .func " + name + "\n();\n");
  for (const std::string &file : {dir + "/long.spv", dir + "/long.ptx"}) {
    void *handle = device_dlopen(file.c_str(), DEVDL_LAZY);
    ASSERT_NE(handle, nullptr) << error();
    EXPECT_EQ(device_dlclose(handle), 0) << error();
    for (const auto &argv : {std::vector<std::string>{DEVDL_NM, file}, {DEVDL_NM, "-C", file}}) {
      CommandResult nm = run(argv);
      EXPECT_EQ(nm.status, 0) << nm.err;
      EXPECT_EQ(nm.out, "U " + name + "\n");
    }
    CommandResult check = run({DEVDL_PACK, "--check", file});
    EXPECT_EQ(check.status, 1) << check.err;
    EXPECT_NE(check.err.find("undefined device symbol `" + name + "`"), std::string::npos) << "reported unresolved";
    setenv("DEVDL_PRELOAD", file.c_str(), 1);
    CommandResult probe = run({DEVDL_TEST_OPEN_PROBE, image("lib.spv")});
    EXPECT_EQ(probe.status, 0) << probe.err;
    EXPECT_EQ(probe.out, image("lib.spv") + ": opened\n");
  }
  // Still unresolved, and said so, when linked.
  EXPECT_EQ(device_dlopen((dir + "/long.spv").c_str(), DEVDL_NOW), nullptr);
  EXPECT_NE(error().find("undefined device symbol `" + name + "`"), std::string::npos);
}

// A name with control characters in it (`T fake\rK InjectedKernel` showed as a kernel line; an
// escape sequence could do anything to the terminal): devdl-nm writes them as escapes, one line a
// symbol, as --json does.
TEST_F(HostileInput, NmEscapesControlCharactersInNames) {
  const std::string dir = scratchDir();
  const std::string name = "fake\rK Injected\nU \x1b[2J\\ \xc2\x9b \xff caf\xc3\xa9";
  std::string quoted;  // for the assembler, which takes \\ for a backslash
  for (char c : name) quoted += c == '\\' ? std::string("\\\\") : std::string(1, c);
  writeFile(dir + "/names.spv", assembleSpirv("OpCapability Addresses\nOpCapability Linkage\nOpCapability Kernel\n"
                                              "OpMemoryModel Physical64 OpenCL\n"
                                              "OpDecorate %f LinkageAttributes \"" + quoted + "\" Export\n"
                                              "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n"
                                              "%f = OpFunction %void None %fn\n%l = OpLabel\nOpReturn\nOpFunctionEnd\n"));
  CommandResult nm = run({DEVDL_NM, dir + "/names.spv"});
  EXPECT_EQ(nm.status, 0) << nm.err;
  EXPECT_EQ(nm.out, "T fake\\rK Injected\\nU \\x1b[2J\\\\ \\xc2\\x9b \\xff caf\xc3\xa9\n");
}

// The same escaping for device_dlerror: a needed file's name with control characters and bytes
// of malformed UTF-8 is shown escaped in the error, never as the bytes themselves.
TEST_F(HostileInput, ErrorsEscapeControlCharactersInNames) {
  const std::string dir = scratchDir();
  CommandResult pack = run({DEVDL_PACK, "-o", dir + "/needs.devdl", "--needed", "evil\x1b[2J\rname\xff.devdl",
                            image("lib.spv")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  EXPECT_EQ(device_dlopen((dir + "/needs.devdl").c_str(), DEVDL_LAZY), nullptr);
  const std::string said = error();
  EXPECT_NE(said.find("needs evil\\x1b[2J\\rname\\xff.devdl: not found"), std::string::npos) << said;
  EXPECT_EQ(said.find_first_of("\x1b\r\xff"), std::string::npos) << said;
}

// devdl-pack -o X X replaced its input with a bundle of itself, also by another name of the file.
TEST_F(HostileInput, PackRefusesToWriteOverItsInput) {
  const std::string dir = scratchDir();
  const std::string input = dir + "/lib.spv", other = dir + "/other-name.spv";
  writeFile(input, readFile(image("lib.spv")));
  ASSERT_EQ(symlink(input.c_str(), other.c_str()), 0);
  for (const std::string &output : {input, other}) {
    CommandResult pack = run({DEVDL_PACK, "-o", output, image("app.spv"), input});
    EXPECT_EQ(pack.status, 1);
    EXPECT_EQ(pack.err, "devdl-pack: " + output + ": is the input " + input + ", which it would replace\n");
    EXPECT_EQ(readFile(input), readFile(image("lib.spv")));
  }
}

// A module that declares an extension the device does not take: Intel's OpenCL CPU runtime ends
// the process on one it does not know (exit 10), where PoCL's path refuses it. devdl refuses it
// before the driver sees it, naming the extension, and hands over one the driver takes though it
// does not report it (Intel's runtime reports 9 of the 99 it takes), in a child process each: a
// driver that ended one would be seen.
TEST_F(HostileInput, AnExtensionTheDeviceDoesNotTakeIsRefusedNamingIt) {
  if (!std::filesystem::exists(DEVDL_TEST_INTEL_OPENCL_ICD))
    GTEST_SKIP() << DEVDL_TEST_INTEL_OPENCL_ICD << " is missing (scripts/setup-debian.sh unpacks Intel's runtime)";
  const std::string dir = scratchDir();
  auto write = [&](const std::string &extension) {
    const std::string file = dir + "/" + extension + ".spv";
    writeFile(file, assembleSpirv("OpCapability Addresses\nOpCapability Kernel\nOpExtension \"" + extension +
                                  "\"\nOpMemoryModel Physical64 OpenCL\nOpEntryPoint Kernel %k \"K\"\n"
                                  "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n%k = OpFunction %void None %fn\n"
                                  "%l = OpLabel\nOpReturn\nOpFunctionEnd\n"));
    return file;
  };
  const std::string unknown = write("SPV_devdl_unknown"), unreported = write("SPV_KHR_no_integer_wrap_decoration"),
                    renamed = write("SPV_INTEL_long_constant_composite");  // the translator 15's name
  auto refused = [](const std::string &file, const std::string &extension) {
    return file + ": image 0 (spirv): SPIR-V extension `" + extension + "`";
  };
  const char *given = std::getenv("OCL_ICD_VENDORS");
  const std::string before = given ? given : "";
  for (const char *vendors : {"/etc/OpenCL/vendors/pocl.icd", DEVDL_TEST_INTEL_OPENCL_ICD}) {
    SCOPED_TRACE(vendors);
    setenv("OCL_ICD_VENDORS", vendors, 1);
    CommandResult probe = run(bounded({DEVDL_TEST_OPEN_PROBE, "now:" + unknown, "now:" + unreported, "now:" + renamed}));
    if (given) setenv("OCL_ICD_VENDORS", before.c_str(), 1);
    else unsetenv("OCL_ICD_VENDORS");
    ASSERT_EQ(probe.status, 0) << probe.out << probe.err;
    const std::vector<std::string> lines = linesOf(probe.out);
    ASSERT_EQ(lines.size(), 3u) << probe.out;
    EXPECT_EQ(lines[0].rfind(refused(unknown, "SPV_devdl_unknown"), 0), 0u) << lines[0];
    EXPECT_EQ(lines[1], unreported + ": opened");
    if (std::string_view(vendors) == DEVDL_TEST_INTEL_OPENCL_ICD)
      EXPECT_EQ(lines[2].rfind(refused(renamed, "SPV_INTEL_long_constant_composite"), 0), 0u) << lines[2];
    else
      EXPECT_EQ(lines[2], renamed + ": opened");
  }
}

// The same address with another size is another image: a bundle of app.spv followed by one of
// lib.spv is one image at the first's size and two at both's (the first handle came back).
TEST_F(HostileInput, MemoryIsIdentifiedByAddressAndSize) {
  const std::string dir = scratchDir();
  for (const char *name : {"app", "lib"}) {
    CommandResult pack = run({DEVDL_PACK, "-o", dir + "/" + name + ".devdl", image(std::string(name) + ".spv")});
    ASSERT_EQ(pack.status, 0) << pack.err;
  }
  const std::string app = readFile(dir + "/app.devdl"), both = app + readFile(dir + "/lib.devdl");
  void *first = device_dlopen_mem(both.data(), app.size(), "app", DEVDL_LAZY);
  ASSERT_NE(first, nullptr) << error();
  void *whole = device_dlopen_mem(both.data(), both.size(), "app and lib", DEVDL_LAZY);
  ASSERT_NE(whole, nullptr) << error();
  EXPECT_NE(whole, first);
  devdl_symbol_info info{};
  info.size = sizeof info;
  EXPECT_NE(device_dlsyminfo(first, "LibDeviceFunc", &info), 0);
  EXPECT_EQ(device_dlsyminfo(whole, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(device_dlopen_mem(both.data(), app.size(), "app again", DEVDL_LAZY), first) << "same address and size";
  for (void *handle : {first, first, whole}) EXPECT_EQ(device_dlclose(handle), 0) << error();
}

// A setuid program run by another user (CI runs as root; the test makes a setuid-root copy of a
// probe and runs it as nobody): the invoking user's environment and current directory must not
// steer it, as glibc's loader ignores LD_LIBRARY_PATH, LD_PRELOAD and LD_DEBUG there. The same
// copy without the setuid bit, run the same way, honours all of it: the test can tell.
TEST_F(HostileInput, ASetuidProgramIgnoresTheInvokingUsersEnvironment) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to make a setuid-root program to run as another user";
  const std::string dir = scratchDir();
  const std::string libraries = dir + "/libraries", output = dir + "/output";
  std::filesystem::create_directories(libraries);
  std::filesystem::create_directories(output);
  ASSERT_EQ(chmod(output.c_str(), 0777), 0);
  writeFile(dir + "/value_one.spv", readFile(image("value_one.spv")));  // in the current directory
  writeFile(libraries + "/lib.spv", readFile(image("lib.spv")));
  writeFile(dir + "/preload.spv", readFile(image("value_two.spv")));
  const std::string probe = dir + "/probe";
  std::filesystem::copy_file(DEVDL_TEST_OPEN_PROBE, probe);
  setenv("DEVDL_LIBRARY_PATH", libraries.c_str(), 1);
  setenv("DEVDL_PRELOAD", (dir + "/preload.spv").c_str(), 1);
  setenv("DEVDL_DEBUG", "libs", 1);
  setenv("DEVDL_DEBUG_OUTPUT", (output + "/debug").c_str(), 1);
  // A translator of the invoking user's, and a bound no translation meets.
  const char *named = std::getenv("DEVDL_TRANSLATOR");
  const std::string translator = named ? named : "";
  setenv("DEVDL_TRANSLATOR", (dir + "/no-translator").c_str(), 1);
  setenv("DEVDL_TRANSLATOR_TIMEOUT", "0.001", 1);
  const std::string kernel = dir + "/kernel.spv";  // a path: looked for even in secure execution
  writeFile(kernel, readFile(image("kernel_lib.spv")));
  const std::string pocl = dir + "/pocl";  // PoCL's kernel cache, where nobody may write
  std::filesystem::create_directories(pocl);
  ASSERT_EQ(chmod(pocl.c_str(), 0777), 0);
  setenv("POCL_CACHE_DIR", pocl.c_str(), 1);
  // Needed files: through $ORIGIN from the scratch directory (not in secure execution), and from
  // a folder of the installed directory (there too, as glibc trusts $ORIGIN in its own directories).
  const std::string installed = std::string(DEVDL_TEST_LIBRARY_DIR) + "/devdl";
  const std::string needs = dir + "/needs.devdl", trusted = installed + "/setuid-test-" + std::to_string(getpid());
  writeNeedingBundle(needs, image("app.spv"), "lib.spv", "$ORIGIN/libraries");
  writeNeedingBundle(trusted + "/needs.devdl", image("app.spv"), "lib.devdl", "$ORIGIN");
  writeNeedingBundle(trusted + "/lib.devdl", image("lib.spv"), "");
  struct Removed {
    std::string dir;
    ~Removed() { std::filesystem::remove_all(dir); }
  } removed{trusted};
  auto runAsNobody = [&] {
    return run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/env", "-C", dir, probe, "value_one.spv",
                "lib.spv", "now:" + kernel, needs, trusted + "/needs.devdl"});
  };
  auto debugOutput = [&] {
    std::string text;
    for (const auto &entry : std::filesystem::directory_iterator(output)) text += readFile(entry.path());
    std::filesystem::remove_all(output);
    std::filesystem::create_directories(output);
    chmod(output.c_str(), 0777);
    return text;
  };

  ASSERT_EQ(chmod(probe.c_str(), 0755), 0);
  // The build directory must be reachable by nobody (a checkout under a home of mode 700 is not).
  CommandResult reach = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/test",
                             "-x", probe, "-a", "-r", DEVDL_TEST_OPEN_PROBE});
  if (reach.status != 0) GTEST_SKIP() << "user nobody cannot reach " << dir << " and the build's libraries";
  // A name without a slash is never taken from the current directory; the installed directory
  // (beside libdevdl.so) is searched after DEVDL_LIBRARY_PATH, and alone in secure execution.
  CommandResult plain = runAsNobody();
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out, "value_one.spv: not found in DEVDL_LIBRARY_PATH, " + installed + "\nlib.spv: opened\n" + kernel +
                           ": image 0 (spirv): cannot start the SPIR-V translator (" + dir +
                           "/no-translator): No such file or directory\n" + needs + ": opened\n" + trusted +
                           "/needs.devdl: opened\n");
  EXPECT_NE(debugOutput().find("preload.spv"), std::string::npos) << "DEVDL_PRELOAD and DEVDL_DEBUG_OUTPUT honoured";

  ASSERT_EQ(chmod(probe.c_str(), 04755), 0);
  CommandResult secure = runAsNobody();
  ASSERT_EQ(secure.status, 0) << secure.err;
  const std::string refused =
      ": not found in " + installed + " (DEVDL_LIBRARY_PATH is not used in a secure-execution process)\n";
  EXPECT_EQ(secure.out, "value_one.spv" + refused + "lib.spv" + refused + kernel + ": opened\n" + needs +
                            " needs lib.spv: not found in $ORIGIN/libraries (not searched: $ORIGIN outside " + installed +
                            " in a secure-execution process), " + installed +
                            " (DEVDL_LIBRARY_PATH is not used in a secure-execution process)\n" + trusted +
                            "/needs.devdl: opened\n")
      << "DEVDL_TRANSLATOR and DEVDL_TRANSLATOR_TIMEOUT ignored: the helper beside libdevdl.so links it";
  setenv("DEVDL_TRANSLATOR", translator.c_str(), 1);
  EXPECT_EQ(debugOutput(), "") << "no DEVDL_DEBUG_OUTPUT file";
  EXPECT_EQ(secure.err.find("devdl:"), std::string::npos) << "no DEVDL_DEBUG output, no preload: " << secure.err;
}

// DEVDL_DEBUG=files says each place a name is looked for, as LD_DEBUG=libs does: the needer's run
// path, the library path's directories in turn, then the installed directory; the current
// directory never.
TEST_F(HostileInput, DebugFilesSaysEachPlaceANameIsLookedFor) {
  const std::string dir = scratchDir(), first = dir + "/first", second = dir + "/second";
  std::filesystem::create_directories(first);
  std::filesystem::create_directories(second);
  writeFile(second + "/lib.spv", readFile(image("lib.spv")));
  writeFile(dir + "/app.spv", readFile(image("app.spv")));  // in the current directory only
  setenv("DEVDL_DEBUG", "files", 1);
  setenv("DEVDL_LIBRARY_PATH", (first + ":" + second).c_str(), 1);
  // A file an image needs: its run path first ($ORIGIN made the needer's directory).
  writeNeedingBundle(dir + "/needs.devdl", image("app.spv"), "lib.spv", "$ORIGIN/deps");
  CommandResult probe = run({"/usr/bin/env", "-C", dir, DEVDL_TEST_OPEN_PROBE, "lib.spv", "app.spv", "./needs.devdl"});
  ASSERT_EQ(probe.status, 0) << probe.err;
  const std::string installed = std::string(DEVDL_TEST_LIBRARY_DIR) + "/devdl";
  EXPECT_EQ(probe.out, "lib.spv: opened\napp.spv: not found in DEVDL_LIBRARY_PATH, " + installed +
                           "\n./needs.devdl: opened\n");
  EXPECT_EQ(probe.err, "devdl: find file=lib.spv\n"
                       "devdl:   trying file=" + first + "/lib.spv\n"
                       "devdl:   trying file=" + second + "/lib.spv\n"
                       "devdl: find file=app.spv\n"
                       "devdl:   trying file=" + first + "/app.spv\n"
                       "devdl:   trying file=" + second + "/app.spv\n"
                       "devdl:   trying file=" + installed + "/app.spv\n"
                       "devdl: find file=lib.spv; needed by ./needs.devdl\n"
                       "devdl:   trying file=./deps/lib.spv\n"
                       "devdl:   trying file=" + first + "/lib.spv\n"
                       "devdl:   trying file=" + second + "/lib.spv\n");
}

// DEVDL_DEBUG_OUTPUT is opened as glibc opens LD_DEBUG_OUTPUT: a symbolic link in its place is
// not followed.
TEST_F(HostileInput, DebugOutputDoesNotFollowASymbolicLink) {
  const std::string dir = scratchDir();
  writeFile(dir + "/victim", "untouched\n");
  setenv("DEVDL_DEBUG", "libs", 1);
  setenv("DEVDL_DEBUG_OUTPUT", (dir + "/debug").c_str(), 1);
  // The output's name ends in the process id: the shell links it to its own, then is the probe.
  CommandResult probe = run({"/bin/sh", "-c", "ln -s \"$1\" \"$2.$$\" && exec \"$3\" \"$4\"", "sh", dir + "/victim",
                             dir + "/debug", DEVDL_TEST_OPEN_PROBE, image("lib.spv")});
  EXPECT_EQ(probe.status, 0) << probe.err;
  EXPECT_EQ(probe.out, image("lib.spv") + ": opened\n");
  EXPECT_EQ(readFile(dir + "/victim"), "untouched\n");
}

class HostileInputOnADevice : public HostileInput {
 protected:
  void SetUp() override {
    if (!devdlOpenClDevice(context_, device_)) GTEST_SKIP() << "no OpenCL device to link and run on: " << device_dlerror();
  }
  // ValueKernel of value_user.spv, which imports DupValue, run once.
  int dupValue() {
    void *user = device_dlopen(image("value_user.spv").c_str(), DEVDL_NOW);
    EXPECT_NE(user, nullptr) << error();
    void *kernel = user ? device_dlsym(user, "ValueKernel") : nullptr;
    EXPECT_NE(kernel, nullptr) << error();
    const int value = kernel ? runIntKernel(context_, device_, static_cast<cl_kernel>(kernel), 1)[0] : -1;
    if (user) device_dlclose(user);
    return value;
  }

  cl_context context_ = nullptr;
  cl_device_id device_ = nullptr;
};

// A file a process has open (lazily) is overwritten or cut short before it is linked. What was
// read at open is what is hashed (the disk cache's key) and what is linked: the process links
// what it opened, never the new bytes under the old key, and a cut-short file faults nothing.
// Bundles of 20 KB (a padding property): LLVM maps files of 16 KiB and more.
TEST_F(HostileInputOnADevice, AFileChangedWhileOpenChangesNothingRead) {
  const std::string dir = scratchDir();
  const std::string padding = "devdl/test:padding=str:" + std::string(20000, 'x');
  for (const char *value : {"one", "two"}) {
    CommandResult pack = run({DEVDL_PACK, "-o", dir + "/" + value + ".devdl", "--property", padding,
                              image(std::string("value_") + value + ".spv")});
    ASSERT_EQ(pack.status, 0) << pack.err;
  }
  const std::string one = readFile(dir + "/one.devdl"), two = readFile(dir + "/two.devdl");
  ASSERT_GE(one.size(), 16384u);
  const std::string live = dir + "/live.devdl";
  for (const std::string_view change : {"overwritten", "cut short"}) {
    writeFile(live, one);
    void *handle = device_dlopen(live.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    ASSERT_NE(handle, nullptr) << error();
    // In place, as cp does: the open file's own pages change.
    const int fd = open(live.c_str(), O_WRONLY | O_TRUNC);
    ASSERT_GE(fd, 0);
    if (change == "overwritten") {
      ASSERT_EQ(write(fd, two.data(), two.size()), static_cast<ssize_t>(two.size()));
    }
    close(fd);
    EXPECT_EQ(dupValue(), 1) << "the file as opened is linked, " << change;
    EXPECT_EQ(device_dlclose(handle), 0) << error();
  }
}

// The SPIR-V translator ends its process on some modules the validator accepts, so it runs in a
// helper process (devdl-translate): a helper that dies fails the link, naming the file and how
// the helper ended, and this process and its next link go on. Without DEVDL_TRANSLATOR the
// helper is the one beside libdevdl.so.
TEST_F(HostileInputOnADevice, ALinkWhoseTranslatorDiesFailsNamingTheFileAndTheNextLinkWorks) {
  auto api = backend::opencl::api();
  ASSERT_TRUE(!!api) << llvm::toString(api.takeError());
  size_t il = 0;
  api->clGetDeviceInfo(device_, CL_DEVICE_IL_VERSION, 0, nullptr, &il);
  if (il > 1) GTEST_SKIP() << "the OpenCL device takes SPIR-V itself: nothing is translated";
  const std::string dir = scratchDir(), helper = dir + "/dying-translator";
  writeFile(helper, "#!/bin/sh\necho 'about to fault' >&2\nkill -SEGV $$\n");
  ASSERT_EQ(chmod(helper.c_str(), 0755), 0);
  const char *named = std::getenv("DEVDL_TRANSLATOR");
  const std::string real = named ? named : "";
  void *definer = device_dlopen(image("value_one.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(definer, nullptr) << error();
  setenv("DEVDL_TRANSLATOR", helper.c_str(), 1);
  EXPECT_EQ(device_dlopen(image("value_user.spv").c_str(), DEVDL_NOW), nullptr);
  const std::string said = error();
  EXPECT_EQ(said.rfind(image("value_user.spv") + ": image 0 (spirv): the SPIR-V translator (", 0), 0u) << said;
  EXPECT_NE(said.find("the SPIR-V translator (" + helper +
                      ") was killed by signal 11 (Segmentation fault); it said: about "
                      "to fault"),
            std::string::npos)
      << said;
  unsetenv("DEVDL_TRANSLATOR");
  EXPECT_EQ(dupValue(), 1) << "linked through the helper beside libdevdl.so";
  setenv("DEVDL_TRANSLATOR", real.c_str(), 1);
  EXPECT_EQ(device_dlclose(definer), 0) << error();
}

// A bundle records its images' symbols, so opening it reads no image; each is still checked as a
// loose file is before it is linked, and refused naming it.
TEST_F(HostileInputOnADevice, ABundlesImagesAreCheckedBeforeTheyAreLinked) {
  const std::string dir = scratchDir();
  CommandResult pack = run({DEVDL_PACK, "-o", dir + "/values.devdl", image("value_user.spv"), image("value_one.spv")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  std::string bundle = readFile(dir + "/values.devdl");
  // value_one's OpTypeInt 32 made 31 bits wide: well formed words, invalid SPIR-V.
  const std::string module = readFile(image("value_one.spv"));
  const size_t at = bundle.find(module);
  ASSERT_NE(at, std::string::npos);
  const std::string intType("\x15\x00\x04\x00", 4);  // OpTypeInt, 4 words: result, width, signedness
  const size_t type = bundle.find(intType, at);
  ASSERT_NE(type, std::string::npos);
  ASSERT_EQ(bundle[type + 8], 32);
  bundle[type + 8] = 31;
  writeFile(dir + "/values.devdl", bundle);
  void *handle = device_dlopen((dir + "/values.devdl").c_str(), DEVDL_LAZY);
  ASSERT_NE(handle, nullptr) << error();
  EXPECT_EQ(device_dlsym(handle, "ValueKernel"), nullptr);
  EXPECT_EQ(error().rfind(dir + "/values.devdl: image 1 (spirv): invalid SPIR-V: ", 0), 0u) << error();
  EXPECT_EQ(device_dlclose(handle), 0) << error();
}

// Every input that once crashed a parser, the linker or the translator, opened DEVDL_NOW: linked,
// or refused naming the file.
TEST_F(HostileInputOnADevice, FuzzRegressionsOpenNowOrAreRefused) {
  size_t count = 0;
  for (const auto &entry : std::filesystem::directory_iterator(std::filesystem::path(DEVDL_TEST_DATA) / "fuzz-regressions")) {
    const std::string path = entry.path();
    void *handle = device_dlopen(path.c_str(), DEVDL_NOW);
    const std::string why = error();
    if (handle) EXPECT_EQ(device_dlclose(handle), 0) << error();
    else EXPECT_EQ(why.rfind(path + ": ", 0), 0u) << why;
    ++count;
  }
  EXPECT_GT(count, 0u);
}

}  // namespace
}  // namespace devdl::test
