// A program's variables in host memory (backend/opencl/host_variables.h): where the region goes,
// and the binary the OpenCL backend stores for a program, read back or refused.
#include "backend/opencl/host_variables.h"
#include "support/error.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <llvm/ADT/StringExtras.h>

#include <cstring>

namespace devdl::test {
namespace {

using backend::VariableLayout;
using backend::opencl::HostVariables;
using backend::opencl::readStoredProgram;
using backend::opencl::storedProgram;

VariableLayout counterAndTable() {
  VariableLayout layout;
  layout.size = 4096 + 16;
  layout.variables = {{"Counter", 0, 4}, {"Table", 4096, 16}};
  layout.initial = std::string("\x07\0\0\0", 4);
  layout.relocations = {{4096 + 8, 4}};  // Table[1] = &Counter + 4
  return layout;
}

TEST(HostVariables, TheSameProgramGetsTheSameAddressWhereItIsFree) {
  uint64_t first = 0;
  {
    auto region = HostVariables::place(counterAndTable(), 42);
    ASSERT_TRUE(!!region) << errorText(region);
    first = (*region)->address();
    const VariableLayout::Variable *counter = (*region)->find("Counter");
    ASSERT_NE(counter, nullptr);
    int value = 0;
    std::memcpy(&value, (*region)->data(*counter), sizeof value);
    EXPECT_EQ(value, 7) << "initialized as the layout says";
    const char *table = (*region)->data(*(*region)->find("Table"));
    EXPECT_EQ(table[0], 0) << "the rest is zero";
    uint64_t address = 0;
    std::memcpy(&address, table + 8, sizeof address);
    EXPECT_EQ(address, first + 4) << "relocated";
    EXPECT_EQ((*region)->find("Other"), nullptr);
    // Taken: the next place for the same program is another, and at() refuses the address.
    auto second = HostVariables::place(counterAndTable(), 42);
    ASSERT_TRUE(!!second) << errorText(second);
    EXPECT_NE((*second)->address(), first);
    auto again = HostVariables::at(counterAndTable(), first);
    ASSERT_FALSE(!!again);
    char at[32];
    std::snprintf(at, sizeof at, "%llx", static_cast<unsigned long long>(first));
    llvm::Error taken = again.takeError();
    EXPECT_TRUE(hasCode(taken, ErrorCode::Busy)) << "a sound stored program, which another process may take";
    EXPECT_EQ(llvm::toString(std::move(taken)), "the program's variables were placed at 0x" + std::string(at) +
                                                    " (8192 bytes), which cannot be mapped in this process: it is taken");
  }
  auto region = HostVariables::place(counterAndTable(), 42);
  ASSERT_TRUE(!!region) << errorText(region);
  EXPECT_EQ((*region)->address(), first) << "freed with the program, the address is the program's again";
  auto other = HostVariables::place(counterAndTable(), 43);
  ASSERT_TRUE(!!other) << errorText(other);
  EXPECT_NE((*other)->address(), first) << "another program";
}

TEST(HostVariables, AStoredProgramReadsBackAsItWasStored) {
  auto region = HostVariables::place(counterAndTable(), 7);
  ASSERT_TRUE(!!region) << errorText(region);
  const std::string binary = storedProgram(region->get(), "driver's binary");
  auto stored = readStoredProgram(binary);
  ASSERT_TRUE(!!stored) << errorText(stored);
  EXPECT_EQ(stored->driverBinary, "driver's binary");
  ASSERT_TRUE(stored->variables.has_value());
  const auto &[address, layout] = *stored->variables;
  EXPECT_EQ(address, (*region)->address());
  EXPECT_EQ(layout.size, 4096u + 16);
  ASSERT_EQ(layout.variables.size(), 2u);
  EXPECT_EQ(layout.variables[1].name, "Table");
  EXPECT_EQ(layout.variables[1].offset, 4096u);
  EXPECT_EQ(layout.variables[1].size, 16u);
  EXPECT_EQ(layout.initial, counterAndTable().initial);
  ASSERT_EQ(layout.relocations.size(), 1u);
  EXPECT_EQ(layout.relocations[0].at, 4096u + 8);
  EXPECT_EQ(layout.relocations[0].addend, 4u);

  const std::string withNone = storedProgram(nullptr, "driver's binary");  // what it reads is a view of it
  auto none = readStoredProgram(withNone);
  ASSERT_TRUE(!!none) << errorText(none);
  EXPECT_FALSE(none->variables.has_value());
  EXPECT_EQ(none->driverBinary, "driver's binary");
}

TEST(HostVariables, ADamagedStoredProgramIsRefusedSayingWhy) {
  auto region = HostVariables::place(counterAndTable(), 9);
  ASSERT_TRUE(!!region) << errorText(region);
  const std::string binary = storedProgram(region->get(), "");
  const std::string prefix = "not a program binary devdl stored for OpenCL: ";
  EXPECT_EQ(errorText(readStoredProgram("\x7f" "ELF")), prefix + "no magic");
  // Every cut of the header and what follows it is refused, never read past.
  for (size_t size = 8; size < binary.size(); ++size) {
    auto cut = readStoredProgram(std::string_view(binary).substr(0, size));
    ASSERT_FALSE(!!cut) << size;
    EXPECT_NE(errorText(cut).find("cut short"), std::string::npos) << errorText(cut);
  }
  std::string version = binary;
  version[8] = 1;
  EXPECT_EQ(errorText(readStoredProgram(version)), prefix + "version 1, not 2");
  std::string outside = binary;
  const uint64_t large = 1 << 20;
  std::memcpy(&outside[48 + 16 + 8], &large, sizeof large);  // after the relocation and Counter's offset: its size
  EXPECT_EQ(errorText(readStoredProgram(outside)), prefix + "variable `Counter` lies outside its region");
  std::string relocation = binary;
  const uint64_t at = 4096 + 16 - 7;
  std::memcpy(&relocation[48], &at, sizeof at);
  EXPECT_EQ(errorText(readStoredProgram(relocation)), prefix + "a relocation lies outside its region");
  // The header's address and sizes (at 16, 24 and 32): what devdl maps and writes is bounded.
  auto with = [&](size_t at, uint64_t value) {
    std::string changed = binary;
    std::memcpy(&changed[at], &value, sizeof value);
    return errorText(readStoredProgram(changed));
  };
  const uint64_t address = (*region)->address();
  EXPECT_EQ(with(16, address + 8), prefix + "address 0x" + llvm::utohexstr(address + 8, true) +
                                       ", not at the start of a page");
  EXPECT_EQ(with(16, 0), prefix + "a region of 4112 bytes at address 0x0");
  EXPECT_EQ(with(24, backend::kMaxRegion + 1),
            prefix + "a region of " + std::to_string(backend::kMaxRegion + 1) + " bytes, more than devdl places");
  EXPECT_EQ(with(32, 4096 + 17), prefix + "more initial bytes than its variables have");
}

}  // namespace
}  // namespace devdl::test
