// The remote store (DEVDL_CACHE_REMOTE) on its own, against a real redis-server: entries round-trip,
// bad or foreign values are refused, a server gone only means misses, TLS takes only a trusted server.
#include "store/remote_store.h"
#include "e2e/remote_cache_fixture.h"
#include "test_support.h"

#include <signal.h>

#include <chrono>
#include <string>
#include <string_view>

namespace devdl {
namespace {

using store::Key;
using store::KeyBuilder;
using store::RedisAddress;
using store::RemoteStore;
using store::TagKey;
using test::Certificates;
using test::getRaw;
using test::makeCertificates;
using test::RedisServer;
using test::setRaw;
using test::tlsOptions;

Key keyOf(std::string_view what) { return KeyBuilder().add(what).finish(); }

std::string nameOf(const Key &key) { return "devdl:" + key.hex(); }

/// The cluster's key in these tests.
TagKey clusterKey() { return TagKey("the cluster's secret"); }

/// `value` with the tag `key` gives it under `name`, as a node stores it.
std::string tagged(const std::string &value, const std::string &name, const TagKey &key = clusterKey()) {
  return value + key.tag(name, value);
}

RedisAddress addressOf(const RedisServer &server) { return llvm::cantFail(store::parseRedisUrl(server.url())); }

std::string entryBytes(const Key &key, std::string_view binary) {
  return store::entryHeader(key, "a description", binary, 7) + std::string(binary) + "a description";
}

#define REQUIRE_SERVER(server) \
  if (!(server).why().empty()) GTEST_SKIP() << (server).why()

TEST(RedisUrl, PartsAndMistakes) {
  auto parsed = [](std::string_view url) { return llvm::cantFail(store::parseRedisUrl(url)); };
  EXPECT_EQ(parsed("redis://cache.example").host, "cache.example");
  EXPECT_EQ(parsed("redis://cache.example").port, 6379);
  const RedisAddress full = parsed("redis://builder:s3cret@10.1.2.3:7000/4");
  EXPECT_EQ(full.host, "10.1.2.3");
  EXPECT_EQ(full.port, 7000);
  EXPECT_EQ(full.user, "builder");
  EXPECT_EQ(full.password, "s3cret");
  EXPECT_EQ(full.database, 4);
  EXPECT_EQ(full.text(), "redis://10.1.2.3:7000/4") << "no password in messages";
  const RedisAddress v6 = parsed("redis://:pw@[::1]:6380");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 6380);
  EXPECT_EQ(v6.user, "");
  EXPECT_EQ(v6.password, "pw");
  EXPECT_EQ(v6.text(), "redis://[::1]:6380");
  EXPECT_FALSE(full.tls);
  const RedisAddress tls = parsed("rediss://:pw@cache.example:6380/2");
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.host, "cache.example");
  EXPECT_EQ(tls.text(), "rediss://cache.example:6380/2");
  for (const char *bad : {"http://host", "redis://", "rediss://", "redisss://host", "rediss:/host", "redis://:6379", "redis://host:0", "redis://host:65536",
                          "redis://host:port", "redis://host:", "redis://host/db", "redis://user@host",
                          "redis://host?timeout=1", "redis://[::1", "redis://[::1]x", "redis://:@host"}) {
    auto address = store::parseRedisUrl(bad);
    ASSERT_FALSE(address) << bad;
    const std::string message = llvm::toString(address.takeError());
    EXPECT_NE(message.find(std::string("DEVDL_CACHE_REMOTE=") + bad), std::string::npos) << message;
  }
}

TEST(RemoteStore, StoredEntriesLoadBackAsStored) {
  RedisServer server;
  REQUIRE_SERVER(server);
  RemoteStore store(addressOf(server), clusterKey());
  EXPECT_FALSE(store.load(keyOf("program")));
  store.store(keyOf("program"), "what it is", "the binary", 42);
  auto entry = store.load(keyOf("program"));
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->binary(), "the binary");
  EXPECT_EQ(entry->description(), "what it is");
  EXPECT_EQ(entry->buildNanoseconds, 42u);
  EXPECT_NE(entry->source.find(server.url()), std::string_view::npos) << entry->source;
  // The value is the disk cache's entry, byte for byte, and its tag.
  EXPECT_EQ(getRaw(server, nameOf(keyOf("program"))),
            tagged(store::entryHeader(keyOf("program"), "what it is", "the binary", 42) + "the binary" + "what it is",
                   nameOf(keyOf("program"))));
  EXPECT_EQ(store.statistics().hits, 1u);
  EXPECT_EQ(store.statistics().misses, 1u);
  EXPECT_EQ(store.statistics().stores, 1u);
  EXPECT_TRUE(store.usable());
}

// Tagged with the cluster's key, but no good entry for the key: refused as the disk cache refuses.
TEST(RemoteStore, ValuesThatAreNoGoodEntryForTheKeyAreRefused) {
  RedisServer server;
  REQUIRE_SERVER(server);
  RemoteStore store(addressOf(server), clusterKey());
  const Key key = keyOf("program");
  const std::string name = nameOf(key);
  std::string flipped = entryBytes(key, "the binary");
  flipped[70] ^= 1;
  const std::string good = entryBytes(key, "the binary");
  for (const std::string &value : {std::string("garbage"), std::string(), entryBytes(keyOf("another"), "the binary"),
                                   good.substr(0, good.size() - 3), good + "more", flipped}) {
    setRaw(server, name, tagged(value, name));
    EXPECT_FALSE(store.load(key)) << value.size() << " bytes";
  }
  EXPECT_EQ(store.statistics().refused, 6u);
  EXPECT_TRUE(store.usable()) << "a bad value is a miss; the store is still asked";
  setRaw(server, name, tagged(good, name));
  ASSERT_TRUE(store.load(key));
}

// What a client of the server without the cluster's key can write: nothing a node takes.
TEST(RemoteStore, ValuesNotTaggedUnderTheClustersKeyForTheirNameAreRefused) {
  RedisServer server;
  REQUIRE_SERVER(server);
  RemoteStore store(addressOf(server), clusterKey());
  const Key key = keyOf("program"), other = keyOf("another program");
  const std::string name = nameOf(key), good = entryBytes(key, "the binary");
  const std::string retagged = tagged(good, name, TagKey("another secret"));
  const std::string cut = tagged(good, name).substr(0, good.size() + store::kTagSize - 1);
  // Another program's entry and tag, replayed under this program's name.
  const std::string replayed = tagged(entryBytes(other, "the binary"), nameOf(other));
  for (const std::string &value : {good, retagged, cut, replayed, std::string("short")}) {
    setRaw(server, name, value);
    EXPECT_FALSE(store.load(key)) << value.size() << " bytes";
  }
  EXPECT_EQ(store.statistics().refused, 5u);
  setRaw(server, name, tagged(good, name));
  EXPECT_TRUE(store.load(key));
  // A node with another key takes nothing this cluster stored.
  RemoteStore stranger(addressOf(server), TagKey("another secret"));
  EXPECT_FALSE(stranger.load(key));
  EXPECT_EQ(stranger.statistics().refused, 1u);
}

TEST(RemoteStore, AServerKilledMidRunOnlyMeansMisses) {
  RedisServer server;
  REQUIRE_SERVER(server);
  RemoteStore store(addressOf(server), clusterKey());
  store.store(keyOf("program"), "", "the binary", 1);
  ASSERT_TRUE(store.load(keyOf("program")));
  server.kill(SIGKILL);
  EXPECT_FALSE(store.load(keyOf("program")));
  EXPECT_FALSE(store.usable());
  store.store(keyOf("other"), "", "the binary", 1);  // nothing, and no crash
  EXPECT_EQ(store.statistics().stores, 1u);
}

TEST(RemoteStore, AStoppedServerCostsOneBoundedWait) {
  RedisServer server;
  REQUIRE_SERVER(server);
  RemoteStore store(addressOf(server), clusterKey());
  ASSERT_FALSE(store.load(keyOf("program")));  // connected
  server.kill(SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(store.load(keyOf("program")));
  EXPECT_GE(std::chrono::steady_clock::now() - start, RemoteStore::kCallTimeout) << "it waited for an answer";
  EXPECT_FALSE(store.usable()) << "and then gave up on the store";
  EXPECT_FALSE(store.load(keyOf("program")));
  server.kill(SIGCONT);
}

TEST(RemoteStore, NoServerOnTheAddressMeansMisses) {
  RedisServer server;
  REQUIRE_SERVER(server);
  const RedisAddress address = addressOf(server);
  server.kill(SIGKILL);
  RemoteStore store(address, clusterKey());
  EXPECT_FALSE(store.load(keyOf("program")));
  EXPECT_FALSE(store.usable());
}

TEST(RemoteStore, PasswordAndDatabase) {
  RedisServer server({"--requirepass", "s3cret"});
  REQUIRE_SERVER(server);
  RemoteStore wrong(llvm::cantFail(store::parseRedisUrl("redis://:wrong@127.0.0.1:" + std::to_string(server.port()))),
                    clusterKey());
  EXPECT_FALSE(wrong.load(keyOf("program")));
  EXPECT_FALSE(wrong.usable());
  RemoteStore right(
      llvm::cantFail(store::parseRedisUrl("redis://default:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/3")),
      clusterKey());
  right.store(keyOf("program"), "", "the binary", 1);
  ASSERT_TRUE(right.load(keyOf("program")));
  EXPECT_TRUE(right.usable());
  RemoteStore database0(
      llvm::cantFail(store::parseRedisUrl("redis://:s3cret@127.0.0.1:" + std::to_string(server.port()))), clusterKey());
  EXPECT_FALSE(database0.load(keyOf("program"))) << "stored in database 3";
  EXPECT_TRUE(database0.usable());
}

// ---- TLS (rediss://) -----------------------------------------------------------------------------

class RemoteStoreTls : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char *name : {"DEVDL_CACHE_REMOTE_CA", "DEVDL_CACHE_REMOTE_CERT", "DEVDL_CACHE_REMOTE_KEY"}) unsetenv(name);
    certificates_ = makeCertificates(test::scratchDir());
    if (!certificates_.why.empty()) GTEST_SKIP() << certificates_.why;
  }
  void TearDown() override {
    for (const char *name : {"DEVDL_CACHE_REMOTE_CA", "DEVDL_CACHE_REMOTE_CERT", "DEVDL_CACHE_REMOTE_KEY"}) unsetenv(name);
  }
  void trust(const std::string &ca) { setenv("DEVDL_CACHE_REMOTE_CA", certificates_.file(ca).c_str(), 1); }
  // Whether a store at `server` takes an entry and gives it back.
  static bool roundTrips(const RedisServer &server) {
    RemoteStore store(addressOf(server), clusterKey());
    store.store(keyOf("program"), "what it is", "the binary", 42);
    auto entry = store.load(keyOf("program"));
    return entry && entry->binary() == "the binary" && store.usable();
  }
  Certificates certificates_;
};

TEST_F(RemoteStoreTls, EntriesRoundTripOverTls) {
  RedisServer server({}, tlsOptions(certificates_, "server", false));
  REQUIRE_SERVER(server);
  EXPECT_EQ(server.url().rfind("rediss://", 0), 0u);
  trust("ca.crt");
  RemoteStore store(addressOf(server), clusterKey());
  EXPECT_FALSE(store.load(keyOf("program")));
  store.store(keyOf("program"), "what it is", "the binary", 42);
  auto entry = store.load(keyOf("program"));
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->binary(), "the binary");
  EXPECT_NE(entry->source.find(server.url()), std::string_view::npos) << entry->source;
  EXPECT_TRUE(store.usable());
  // A value larger than a TLS record, read back in many.
  const std::string large(300000, 'x');
  store.store(keyOf("large"), "large", large, 1);
  auto back = store.load(keyOf("large"));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->binary(), large);
}

TEST_F(RemoteStoreTls, AServerNotSignedByTheTrustedCaOrNamingAnotherHostIsNotUsed) {
  RedisServer server({}, tlsOptions(certificates_, "server", false));
  REQUIRE_SERVER(server);
  trust("other-ca.crt");
  EXPECT_FALSE(roundTrips(server));
  RedisServer elsewhere({}, tlsOptions(certificates_, "elsewhere", false));
  REQUIRE_SERVER(elsewhere);
  trust("ca.crt");
  EXPECT_FALSE(roundTrips(elsewhere)) << "a certificate for elsewhere.example, not 127.0.0.1";
  EXPECT_TRUE(roundTrips(server));
}

TEST_F(RemoteStoreTls, AServerThatAsksForAClientCertificateGetsTheNodes) {
  RedisServer server({}, tlsOptions(certificates_, "server", true));
  REQUIRE_SERVER(server);
  trust("ca.crt");
  EXPECT_FALSE(roundTrips(server)) << "no client certificate";
  setenv("DEVDL_CACHE_REMOTE_CERT", certificates_.file("client.crt").c_str(), 1);
  EXPECT_FALSE(roundTrips(server)) << "a certificate without its key is refused";
  setenv("DEVDL_CACHE_REMOTE_KEY", certificates_.file("client.key").c_str(), 1);
  EXPECT_TRUE(roundTrips(server));
}

}  // namespace
}  // namespace devdl
