// The registry of host objects (seed 002) on its own: registrations replace each other by
// address, survive compaction of many, keep addresses outside any host object, and leave with
// the host library whose address they are (the end-to-end suite unloads a real one).
#include "host/object_registry.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

namespace devdl {
namespace {

TEST(ObjectRegistry, TheLastRegistrationOfAnAddressIsTheOne) {
  host::ObjectRegistry registry;
  static int object;
  registry.add(&object, "first", "device_global");
  registry.add(&object, "second", "specialization_id");
  auto found = registry.find(&object);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->uniqueId, "second");
  EXPECT_EQ(found->kind, "specialization_id");
  EXPECT_EQ(registry.size(), 1u);
  int other = 0;
  EXPECT_FALSE(registry.find(&other).has_value());
  // Again after the table was settled: the log's registration wins over the table's.
  registry.add(&object, "third", "device_global");
  EXPECT_EQ(registry.find(&object)->uniqueId, "third");
}

TEST(ObjectRegistry, ManyRegistrationsOutOfOrderAndAgainAreEachFound) {
  host::ObjectRegistry registry;
  std::vector<int> objects(20000);
  // Backwards, then every other one again: compactions sort, merge and drop the replaced.
  for (size_t i = objects.size(); i-- > 0;)
    registry.add(&objects[i], ("id" + std::to_string(i)).c_str(), "device_global");
  for (size_t i = 0; i < objects.size(); i += 2)
    registry.add(&objects[i], ("again" + std::to_string(i)).c_str(), "device_global");
  EXPECT_EQ(registry.size(), objects.size());
  for (size_t i : {size_t{0}, size_t{1}, size_t{4097}, size_t{10000}, objects.size() - 1})
    EXPECT_EQ(registry.find(&objects[i])->uniqueId, (i % 2 ? "id" : "again") + std::to_string(i)) << i;
}

TEST(ObjectRegistry, HeapObjectsStayAndNullStringsAreEmpty) {
  host::ObjectRegistry registry;
  auto heap = std::make_unique<int>(0);
  registry.add(heap.get(), nullptr, nullptr);
  auto found = registry.find(heap.get());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->uniqueId, "");
  // A host library loaded and unloaded meanwhile does not take it away.
  void *library = dlopen(DEVDL_TEST_PLAIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  EXPECT_TRUE(registry.find(heap.get()).has_value());
  dlclose(library);
  EXPECT_TRUE(registry.find(heap.get()).has_value());
}

TEST(ObjectRegistry, RegistrationsLeaveWithTheirHostLibrary) {
  host::ObjectRegistry registry;
  void *library = dlopen(DEVDL_TEST_PLAIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  // An address inside the library: its entry point.
  void *inside = dlsym(library, "devdl_test_carrier");
  ASSERT_NE(inside, nullptr) << dlerror();
  registry.add(inside, "uid", "device_global");
  EXPECT_TRUE(registry.find(inside).has_value()) << "settled: the library owns it";
  ASSERT_EQ(dlclose(library), 0);
  ASSERT_EQ(dlopen(DEVDL_TEST_PLAIN, RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_FALSE(registry.find(inside).has_value());
  EXPECT_EQ(registry.size(), 0u);
}

}  // namespace
}  // namespace devdl
