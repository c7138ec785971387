// Compiled into every test program (devdl_test_support's interface): a program that links
// devdl_core itself has no devdl-translate beside it, as a program finds it beside libdevdl.so.
// It is told where the build put it, where no one has said already.
#include <cstdlib>

namespace {

[[maybe_unused]] const bool kTranslatorNamed = [] {
  if (*DEVDL_TEST_TRANSLATOR) setenv("DEVDL_TRANSLATOR", DEVDL_TEST_TRANSLATOR, /*overwrite=*/0);
  return true;
}();

}  // namespace
