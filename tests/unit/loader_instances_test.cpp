// One instance of a loaded image's variables on a device, over the fake backend
// (unit/fake_backend.h): who holds an instance (the first program linked with the variable), how
// later programs reach it (their cells, set to its address), and when it ends (with the image's
// last reference, once no program reaching it lives).
#include "image/instance_cells.h"
#include "test_images.h"
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <future>
#include <string>
#include <thread>
#include <vector>

namespace devdl::test {
namespace {

class LoaderInstances : public LoaderFixture {
 protected:
  // The last link's inputs, each as "file: what it reaches elsewhere".
  static std::vector<std::string> lastElsewhere() {
    std::lock_guard lock(fake::linksMutex());
    std::vector<std::string> lines;
    const fake::Link &link = fake::links().back();
    for (size_t i = 0; i < link.inputs.size(); ++i) {
      std::string line = std::filesystem::path(link.inputs[i].substr(0, link.inputs[i].find(':'))).filename().string() + ":";
      for (const std::string &name : link.elsewhere[i]) line += " " + name;
      lines.push_back(line);
    }
    return lines;
  }
  // What the last link's cell for `name` was set to.
  static uint64_t lastCell(const std::string &name) {
    std::lock_guard lock(fake::linksMutex());
    const auto &values = *fake::links().back().values;
    auto it = values.find(instanceCellName(name));
    return it == values.end() ? 0 : it->second;
  }
  static size_t linkCount() {
    std::lock_guard lock(fake::linksMutex());
    return fake::links().size();
  }
};

TEST_F(LoaderInstances, TheLibrarysKernelFirstHoldsTheInstanceTheApplicationReaches) {
  void *lib = open("gstate_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(symbol(lib, "SetState"), nullptr);
  EXPECT_EQ(lastElsewhere(), (std::vector<std::string>{"gstate_lib.spv:"}));
  void *reader = open("gstate_read.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"gstate_lib.spv"}, {"gstate_read.spv", "gstate_lib.spv"}}));
  EXPECT_EQ(lastElsewhere(), (std::vector<std::string>{"gstate_read.spv: State", "gstate_lib.spv: State"}))
      << "the definition and its importer";
  void *state = symbol(lib, "State");
  EXPECT_EQ(lastCell("State"), reinterpret_cast<uint64_t>(state));
  EXPECT_EQ(symbol(reader, "State"), state) << "through the application's handle, the one instance";
  close(reader);
  close(lib);
}

// A static of the library's (gstatic_lib's Count) is an instance as an exported variable is,
// under the name every program exports it by: the library's program holds it, the
// application's reaches it.
TEST_F(LoaderInstances, ALibrarysStaticIsHeldByTheFirstProgramAndReachedByTheNext) {
  void *lib = open("gstatic_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(symbol(lib, "SetCount"), nullptr);
  EXPECT_EQ(lastElsewhere(), (std::vector<std::string>{"gstatic_lib.spv:"}));
  void *reader = open("gstatic_read.spv", DEVDL_NOW);
  ASSERT_NE(reader, nullptr);
  const std::vector<std::string> elsewhere = lastElsewhere();
  ASSERT_EQ(elsewhere.size(), 2u);
  EXPECT_EQ(elsewhere[0], "gstatic_read.spv:");
  const std::string prefix = "gstatic_lib.spv: " + std::string(kStaticPrefix);
  EXPECT_TRUE(elsewhere[1].starts_with(prefix) && elsewhere[1].ends_with("_Count")) << elsewhere[1];
  EXPECT_NE(lastCell(elsewhere[1].substr(std::string("gstatic_lib.spv: ").size())), 0u) << "set from the holder";
  close(reader);
  close(lib);
}

TEST_F(LoaderInstances, TheFirstApplicationsProgramHoldsItPastItsClose) {
  void *lib = open("gstate_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = open("gstate_bump.spv", DEVDL_NOW);
  void *reader = open("gstate_read.spv", DEVDL_NOW);
  // The reader's program is linked with the loaded bumper, which imports from its plan, as
  // every program is: the bumper's kernels run from the first.
  EXPECT_EQ(links(), (Links{{"gstate_bump.spv", "gstate_lib.spv"},
                            {"gstate_read.spv", "gstate_bump.spv", "gstate_lib.spv"}}));
  EXPECT_EQ(lastElsewhere(),
            (std::vector<std::string>{"gstate_read.spv: State", "gstate_bump.spv:", "gstate_lib.spv: State"}));
  void *state = symbol(lib, "State");
  EXPECT_EQ(lastCell("State"), reinterpret_cast<uint64_t>(state));
  close(bumper);
  EXPECT_EQ(symbol(lib, "State"), state) << "the instance stays while the library is loaded";
  EXPECT_NE(symbol(lib, "LibReadState"), nullptr);
  void *again = open("gstate_bump.spv", DEVDL_NOW);
  EXPECT_NE(symbol(again, "BumpKernel"), nullptr);
  EXPECT_EQ(linkCount(), 2u) << "the library's kernels and the bumper's from the programs linked";
  EXPECT_EQ(symbol(again, "State"), state);
  close(again);
  close(reader);
  close(lib);
}

TEST_F(LoaderInstances, TheInstanceEndsWithTheLibraryOnceNothingReachesIt) {
  void *lib = open("gstate_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = open("gstate_bump.spv", DEVDL_NOW);
  void *reader = open("gstate_read.spv", DEVDL_NOW);
  void *state = symbol(lib, "State");
  close(lib);
  close(bumper);
  // The reader's program still reaches the instance, whose program lives while it does.
  EXPECT_EQ(symbol(reader, "State"), state);
  close(reader);
  EXPECT_FALSE(isLoaded("gstate_lib.spv"));
  lib = open("gstate_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_NE(symbol(lib, "LibReadState"), nullptr);
  EXPECT_EQ(links().back(), (std::vector<std::string>{"gstate_lib.spv"})) << "linked again: a new instance";
  EXPECT_EQ(lastElsewhere(), (std::vector<std::string>{"gstate_lib.spv:"}));
  close(lib);
}

// Two builds holding the same library's variables natively at once (the library's own kernel, and
// an application opened meanwhile): the first kept holds the instance; the other is a second
// copy, never kept, and its plan looks again and is served by the first.
TEST_F(LoaderInstances, OfTwoBuildsAtOnceTheFirstKeptHoldsTheInstance) {
  void *lib = open("gstate_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  std::promise<void> held, bumperLinked;
  std::shared_future<void> go = bumperLinked.get_future().share();
  fake::setLinkHook([&](const fake::Link &link) {
    if (link.inputs.size() != 1) return;  // the library's own link waits for the bumper's
    held.set_value();
    go.wait();
  });
  void *state = nullptr;
  std::thread own([&] { symbol(lib, "SetState"); });
  held.get_future().wait();
  void *bumper = open("gstate_bump.spv", DEVDL_NOW);
  bumperLinked.set_value();
  own.join();
  fake::setLinkHook(nullptr);
  EXPECT_EQ(links(), (Links{{"gstate_lib.spv"}, {"gstate_bump.spv", "gstate_lib.spv"}}));
  state = symbol(bumper, "State");
  EXPECT_EQ(symbol(lib, "State"), state) << "one instance";
  EXPECT_EQ(symbol(lib, "SetState"), symbol(bumper, "SetState")) << "the library's kernels from the bumper's program";
  EXPECT_EQ(links().size(), 2u);
  close(bumper);
  close(lib);
}

// A cubin's variable that another image interposes cannot be reached elsewhere (its symbol cannot
// be a cell): the program that interposes it keeps the one copy, and a program that would hold a
// second is refused, naming both.
class LoaderInstancesOfCubins : public LoaderFixture {
 protected:
  LoaderInstancesOfCubins() : LoaderFixture(std::chrono::seconds(1), fake::backendsWithCubins()) {}
};

TEST_F(LoaderInstancesOfCubins, AnInterposedCopyIsTheOnlyOne) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  void *first = open("interpose_var_first.cubin", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_var_other.cubin", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_var_app.cubin", DEVDL_NOW);
  ASSERT_TRUE(first && other && app);
  EXPECT_EQ(links(), (Links{{"interpose_var_app.cubin", "interpose_var_other.cubin", "interpose_var_first.cubin"}}))
      << "the library is not linked alone first: its cubin could not reach what that would hold";
  auto own = loader_.symbol(other, "Level");
  const std::string why = errorText(own);
  EXPECT_NE(why.find("`Level` of " + image("interpose_var_other.cubin") + ": image 0 (cubin"), std::string::npos) << why;
  EXPECT_NE(why.find("has a copy in the program of " + image("interpose_var_app.cubin")), std::string::npos) << why;
  EXPECT_NE(why.find("this program would hold a second"), std::string::npos) << why;
  EXPECT_EQ(links().size(), 1u) << "nothing linked";
  // The same application's code opened again is served by the program that keeps the copy.
  const std::string bytes = readFile(image("interpose_var_app.cubin"));
  auto again = loader_.openMemory(bytes.data(), bytes.size(), "the application again", DEVDL_NOW);
  ASSERT_TRUE(!!again) << errorText(again);
  EXPECT_EQ(links().size(), 1u);
  close(*again);
  close(app);
  close(other);
  close(first);
}

// A cubin's static stays its machine code's own: the library's program holds it, and an
// application's program, which would hold a second, is refused naming the static by its name.
TEST_F(LoaderInstancesOfCubins, AStaticHeldElsewhereIsRefused) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  void *lib = open("gstatic_lib.cubin", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(symbol(lib, "SetCount"), nullptr);
  const std::string why = openError("gstatic_read.cubin", DEVDL_NOW);
  EXPECT_NE(why.find("Count` of " + image("gstatic_lib.cubin") + ": image 0 (cubin"), std::string::npos) << why;
  EXPECT_NE(why.find("which the program of " + image("gstatic_read.cubin") + ": image 0 (cubin sm_90) cannot reach: "
                     "a cubin's statics are its machine code's own"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find(kStaticPrefix), std::string::npos) << "named as the library names it: " << why;
  EXPECT_EQ(links().size(), 1u) << "nothing linked";
  close(lib);
}

}  // namespace
}  // namespace devdl::test
