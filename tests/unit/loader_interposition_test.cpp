// Interposition by symbol over the fake backend (unit/fake_backend.h), as ld.so's: when a plan
// takes a name from one image and needs another that defines it too for something else, the
// link sees the other's definition local to it; a variable as a function. The fake's links
// record what each input was to have local.
#include "image/instance_cells.h"
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <string>
#include <vector>

namespace devdl::test {
namespace {

using LoaderInterposition = LoaderFixture;
using Interposed = std::vector<std::vector<std::string>>;

TEST_F(LoaderInterposition, AnInterposedVariableIsMadeLocalWhereItIsNotTheOneUsed) {
  // interpose_var_app takes Level from interpose_var_first, first in search order, and Offset and
  // Base from interpose_var_other, whose own Level Base keeps using: the one instance of
  // interpose_var_other's Level, which its own program, linked alone first, holds (with Offset),
  // and which the application's program reaches through the cell of its position.
  void *first = open("interpose_var_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_var_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_var_app.spv", DEVDL_NOW);
  ASSERT_EQ(links(), (Links{{"interpose_var_other.spv"},
                            {"interpose_var_app.spv", "interpose_var_other.spv", "interpose_var_first.spv"}}));
  EXPECT_EQ(fake::links()[1].interposed, (Interposed{{}, {"Level"}, {}}));
  EXPECT_EQ(fake::links()[1].elsewhere, (Interposed{{"Offset"}, {"Offset", "Level (interposed)"}, {}}));
  // The host reads by the name the instance the application's kernel uses.
  void *level = symbol(app, "Level");
  EXPECT_NE(level, nullptr);
  EXPECT_EQ(symbol(first, "Level"), level);
  // interpose_var_other's own, which its Base reaches in the application's program.
  void *own = symbol(other, "Level");
  EXPECT_NE(own, level);
  EXPECT_EQ(fake::links()[1].values->at(interposedCellName("Level", 1)), reinterpret_cast<uint64_t>(own));
  EXPECT_EQ(links().size(), 2u);
  close(app);
  close(other);
  close(first);
}

// Among what a handle's images depend on, a name is the definition their plan binds it to, not
// one the plan makes local (it was the first image defining it, before).
TEST_F(LoaderInterposition, TheInterposedNameIsDescribedAsTheDefinitionItsKernelsUse) {
  void *first = open("interpose_var_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_var_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_var_app.spv", DEVDL_NOW);
  EXPECT_EQ(definitionOf(app, "Level"), label("interpose_var_first.spv"));
  EXPECT_EQ(definitionOf(app, "Offset"), label("interpose_var_other.spv"));
  close(app);
  close(other);
  close(first);
}

// A library's handle answers its own variable, which its Base uses, from a program where that
// definition is the program's: not interpose_var_app's, where interpose_var_first's interposes it
// (it was, before; and linking the library for it then made interpose_var_app's program again,
// without end).
TEST_F(LoaderInterposition, AnInterposedLibrarysHandleAnswersItsOwnVariable) {
  void *first = open("interpose_var_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_var_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_var_app.spv", DEVDL_NOW);
  EXPECT_EQ(definitionOf(other, "Level"), label("interpose_var_other.spv"));
  EXPECT_NE(symbol(other, "Level"), symbol(first, "Level"));
  close(app);
  close(other);
  close(first);
}

TEST_F(LoaderInterposition, AStaticVariableOfTheSameNameIsNotInterposed) {
  // static_var_lib's Level is static: not a definition of the name, nothing to make local.
  void *first = open("interpose_var_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *lib = open("static_var_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("static_var_app.spv", DEVDL_NOW);
  ASSERT_EQ(links(), (Links{{"static_var_app.spv", "static_var_lib.spv", "interpose_var_first.spv"}}));
  EXPECT_EQ(fake::links()[0].interposed, (Interposed{{}, {}, {}}));
  EXPECT_EQ(definitionOf(app, "Level"), label("interpose_var_first.spv"));
  EXPECT_EQ(definitionOf(lib, "Level"), image("static_var_lib.spv") + ": undefined device symbol `Level`");
  close(app);
  close(lib);
  close(first);
}

TEST_F(LoaderInterposition, AHandleAnswersTheInterposedNameWithTheDefinitionItsKernelsUse) {
  void *first = open("interpose_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_app.spv", DEVDL_LAZY);
  EXPECT_EQ(definitionOf(app, "Answer"), label("interpose_first.spv"));
  EXPECT_EQ(definitionOf(app, "Other"), label("interpose_other.spv"));
  void *answer = symbol(app, "Answer");
  EXPECT_NE(answer, nullptr);
  EXPECT_EQ(links(), (Links{{"interpose_app.spv", "interpose_first.spv", "interpose_other.spv"}}))
      << "the program the handle's kernel runs";
  EXPECT_NE(symbol(app, "InterposeKernel"), nullptr);
  EXPECT_EQ(links().size(), 1u);
  close(app);
  close(other);
  close(first);
}

TEST_F(LoaderInterposition, AnImageTheProgramDoesNotNeedIsNotLinkedForItsDuplicate) {
  // interpose_other first: its Answer and Other serve, and interpose_first, which defines only
  // Answer, stays out of the program.
  void *other = open("interpose_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *first = open("interpose_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_app.spv", DEVDL_NOW);
  ASSERT_EQ(links(), (Links{{"interpose_app.spv", "interpose_other.spv"}}));
  EXPECT_EQ(fake::links()[0].interposed, (Interposed{{}, {}}));
  EXPECT_EQ(definitionOf(app, "Answer"), label("interpose_other.spv"));
  close(app);
  close(first);
  close(other);
}

}  // namespace
}  // namespace devdl::test
