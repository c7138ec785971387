// What programs are keyed by (the seed's key and nested key), and building once in the process.
#include "cache/program_cache.h"
#include "test_support.h"

#include <thread>

namespace devdl::test {
namespace {

using cache::ContentHash;
using cache::ProgramKey;

ContentHash hash(uint64_t n) { return {n, n * 7}; }

// A plan of `ids` (image id n has hash(n)), with `interposed` names made local in each.
LinkPlan planOf(std::vector<uint32_t> ids, std::vector<std::vector<std::string_view>> interposed = {}) {
  LinkPlan plan;
  plan.images = std::move(ids);
  plan.interposed = std::move(interposed);
  plan.interposed.resize(plan.images.size());
  return plan;
}
ProgramKey keyOf(const LinkPlan &plan) {
  return ProgramKey::of(plan, [](uint32_t id) { return hash(id); });
}

TEST(ProgramKey, IsTheImagesHashesWhateverTheirOrderInThePlan) {
  EXPECT_EQ(keyOf(planOf({3, 1, 2})), keyOf(planOf({1, 2, 3})));
  EXPECT_NE(keyOf(planOf({1, 2})), keyOf(planOf({1, 2, 3})));
}

TEST(ProgramKey, AnImageWithNamesMadeLocalIsAnotherImage) {
  const ProgramKey plain = keyOf(planOf({1, 2}));
  const ProgramKey interposed = keyOf(planOf({1, 2}, {{}, {"f"}}));
  EXPECT_NE(plain, interposed);
  EXPECT_NE(interposed, keyOf(planOf({1, 2}, {{}, {"g"}})));
  EXPECT_EQ(interposed, keyOf(planOf({2, 1}, {{"f"}, {}}))) << "the names go with their image";
}

TEST(ProgramKey, AProgramServesEveryPlanWhoseImagesItHolds) {
  const ProgramKey application = keyOf(planOf({1, 2, 3}));
  EXPECT_TRUE(application.includes(keyOf(planOf({2, 3}))));
  EXPECT_TRUE(application.includes(application));
  EXPECT_FALSE(application.includes(keyOf(planOf({2, 4}))));
  EXPECT_FALSE(keyOf(planOf({2, 3})).includes(application));
}

TEST(ProgramKey, SpecializationConstantsMakeAnotherImage) {
  const backend::SpecConstants none, one{{1, std::string("\x01\0\0\0", 4)}}, other{{1, std::string("\x02\0\0\0", 4)}};
  EXPECT_EQ(ContentHash::specialized(hash(5), none), hash(5));
  EXPECT_NE(ContentHash::specialized(hash(5), one), hash(5));
  EXPECT_NE(ContentHash::specialized(hash(5), one), ContentHash::specialized(hash(5), other));
  EXPECT_EQ(ContentHash::specialized(hash(5), one), ContentHash::specialized(hash(5), one));
}

TEST(ProgramKey, TheStoresKeyNamesTheDevice) {
  const ProgramKey key = keyOf(planOf({1, 2}));
  EXPECT_EQ(key.storeKey("pocl cpu"), key.storeKey("pocl cpu"));
  EXPECT_NE(key.storeKey("pocl cpu").hex(), key.storeKey("cuda sm_90").hex());
  EXPECT_NE(key.storeKey("pocl cpu").hex(), keyOf(planOf({1, 3})).storeKey("pocl cpu").hex());
}

store::BinaryStore &noStore() {
  ADD_FAILURE() << "nothing is built here";
  std::abort();
}

TEST(ProgramCache, FindsTheProgramOfAPlanInOneThatHoldsItsImagesOnThatDevice) {
  cache::ProgramCache programs(noStore, std::chrono::seconds(1));
  auto *device = reinterpret_cast<backend::Device *>(0x1000), *other = reinterpret_cast<backend::Device *>(0x2000);
  cache::LinkedProgram *application = programs.add(keyOf(planOf({1, 2, 3})), {1, 2, 3}, {{}, {"f"}, {}}, {}, device, nullptr);
  EXPECT_EQ(programs.find(device, keyOf(planOf({3, 2}))), application);
  EXPECT_EQ(programs.find(device, keyOf(planOf({2, 4}))), nullptr);
  EXPECT_EQ(programs.find(other, keyOf(planOf({2, 3}))), nullptr);
  EXPECT_EQ(programs.defining(1, "f", device), application);
  EXPECT_EQ(programs.defining(2, "f", device), nullptr) << "made local there";
  EXPECT_EQ(programs.defining(2, "g", device), application);
  EXPECT_EQ(programs.defining(1, "f", other), nullptr) << "each device's program has its own instance";
  EXPECT_TRUE(programs.anyOn(device));
  EXPECT_FALSE(programs.anyOn(other));
}

TEST(ProgramCache, ASecondThreadWaitsForTheFirstsTurnAndThenLooksAgain) {
  cache::ProgramCache programs(noStore, std::chrono::seconds(1));
  const auto *device = reinterpret_cast<const backend::Device *>(0x1000);
  const ProgramKey key = keyOf(planOf({1}));
  std::mutex mutex;
  std::unique_lock held(mutex);
  std::optional<cache::ProgramCache::Turn> first = programs.takeTurn(held, device, key);
  ASSERT_TRUE(first.has_value());
  std::atomic<bool> returned{false};
  bool secondGotATurn = true;
  std::thread second([&] {
    std::unique_lock lock(mutex);
    secondGotATurn = programs.takeTurn(lock, device, key).has_value();
    returned = true;
  });
  held.unlock();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned) << "it waits while the first builds";
  held.lock();
  first.reset();  // the build finished
  held.unlock();
  second.join();
  EXPECT_FALSE(secondGotATurn) << "it looks in memory again";
  held.lock();
  EXPECT_TRUE(programs.takeTurn(held, device, key).has_value()) << "no build under way now";
  EXPECT_TRUE(programs.takeTurn(held, device, keyOf(planOf({2}))).has_value()) << "another key, another turn";
}

}  // namespace
}  // namespace devdl::test
