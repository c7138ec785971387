// The remote store (DEVDL_CACHE_REMOTE) against a real redis-server on a loopback port: on its
// own (entries round-trip with their tags, values another key tagged, changed, cut or moved are
// refused, as are bad entries, a server killed, stopped or absent only means misses; over TLS,
// a server whose certificate is not trusted or names another host is not used, and one that asks
// for a client certificate gets the node's), and end to end through devdl_cache_probe on PoCL,
// where each process with a fresh disk cache is another machine sharing the store and, unless
// said otherwise, the cluster's key.
#include "cache/remote_store.h"
#include "redis_server.h"
#include "test_support.h"

#include <hiredis/hiredis.h>

#include <sys/stat.h>

#include <regex>

namespace devdl {
namespace {

using cache::Key;
using cache::KeyBuilder;
using cache::RedisAddress;
using cache::RemoteStore;
using cache::TagKey;
using test::RedisServer;

Key keyOf(std::string_view what) { return KeyBuilder().add(what).finish(); }

std::string nameOf(const Key &key) { return "devdl:" + key.hex(); }

/// The cluster's key in these tests.
TagKey clusterKey() { return TagKey("the cluster's secret"); }

/// `value` with the tag `key` gives it under `name`, as a node stores it.
std::string tagged(const std::string &value, const std::string &name, const TagKey &key = clusterKey()) {
  return value + key.tag(name, value);
}

RedisAddress addressOf(const RedisServer &server) { return llvm::cantFail(cache::parseRedisUrl(server.url())); }

/// SET name value, as another client of the store could.
void setRaw(const RedisServer &server, const std::string &name, const std::string &value) {
  redisContext *context = redisConnect("127.0.0.1", server.port());
  ASSERT_TRUE(context && !context->err);
  const char *argv[] = {"SET", name.c_str(), value.data()};
  const size_t sizes[] = {3, name.size(), value.size()};
  auto *reply = static_cast<redisReply *>(redisCommandArgv(context, 3, argv, sizes));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->type, REDIS_REPLY_STATUS);
  freeReplyObject(reply);
  redisFree(context);
}

/// GET name: the value, or nullopt where there is none.
std::optional<std::string> getRaw(const RedisServer &server, const std::string &name) {
  redisContext *context = redisConnect("127.0.0.1", server.port());
  if (!context || context->err) return std::nullopt;
  auto *reply = static_cast<redisReply *>(redisCommand(context, "GET %s", name.c_str()));
  std::optional<std::string> value;
  if (reply && reply->type == REDIS_REPLY_STRING) value = std::string(reply->str, reply->len);
  if (reply) freeReplyObject(reply);
  redisFree(context);
  return value;
}

std::string entryBytes(const Key &key, std::string_view binary) {
  return cache::entryHeader(key, "a description", binary, 7) + std::string(binary) + "a description";
}

#define REQUIRE_SERVER(server) \
  if (!(server).why().empty()) GTEST_SKIP() << (server).why()

TEST(RedisUrl, PartsAndMistakes) {
  auto parsed = [](std::string_view url) { return llvm::cantFail(cache::parseRedisUrl(url)); };
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
    auto address = cache::parseRedisUrl(bad);
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
            tagged(cache::entryHeader(keyOf("program"), "what it is", "the binary", 42) + "the binary" + "what it is",
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
  const std::string cut = tagged(good, name).substr(0, good.size() + cache::kTagSize - 1);
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
  RemoteStore wrong(llvm::cantFail(cache::parseRedisUrl("redis://:wrong@127.0.0.1:" + std::to_string(server.port()))),
                    clusterKey());
  EXPECT_FALSE(wrong.load(keyOf("program")));
  EXPECT_FALSE(wrong.usable());
  RemoteStore right(
      llvm::cantFail(cache::parseRedisUrl("redis://default:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/3")),
      clusterKey());
  right.store(keyOf("program"), "", "the binary", 1);
  ASSERT_TRUE(right.load(keyOf("program")));
  EXPECT_TRUE(right.usable());
  RemoteStore database0(
      llvm::cantFail(cache::parseRedisUrl("redis://:s3cret@127.0.0.1:" + std::to_string(server.port()))), clusterKey());
  EXPECT_FALSE(database0.load(keyOf("program"))) << "stored in database 3";
  EXPECT_TRUE(database0.usable());
}

// ---- end to end: processes on PoCL, each with a disk cache of its own, one store ----------------

struct Load {
  test::CommandResult result;
  int localHits = -1, localMisses = -1, localStored = -1;
  int remoteHits = -1, remoteMisses = -1, remoteStored = -1, refused = -1;
  bool linked() const { return result.err.find(" linked in ") != std::string::npos; }
};

Load parse(test::CommandResult result) {
  Load load;
  load.result = std::move(result);
  static const std::regex local(R"(cache: (\d+) hits, (\d+) misses, (\d+) stored)");
  static const std::regex remote(R"(cache: remote rediss?://[^:]+:\d+: (\d+) hits, (\d+) misses, (\d+) stored, (\d+) bad)");
  if (std::smatch m; std::regex_search(load.result.err, m, local)) {
    load.localHits = std::stoi(m[1]);
    load.localMisses = std::stoi(m[2]);
    load.localStored = std::stoi(m[3]);
  }
  if (std::smatch m; std::regex_search(load.result.err, m, remote)) {
    load.remoteHits = std::stoi(m[1]);
    load.remoteMisses = std::stoi(m[2]);
    load.remoteStored = std::stoi(m[3]);
    load.refused = std::stoi(m[4]);
  }
  return load;
}

class RemoteCacheE2E : public ::testing::Test {
 protected:
  virtual std::unique_ptr<RedisServer> makeServer() { return std::make_unique<RedisServer>(); }
  void SetUp() override {
    for (const char *name : kVariables)
      if (const char *value = std::getenv(name)) saved_.emplace_back(name, value);
    scratch_ = test::scratchDir();
    server_ = makeServer();
    if (IsSkipped()) return;
    if (!server_->why().empty()) GTEST_SKIP() << server_->why();
    unsetenv("DEVDL_CACHE");  // the test runner turns it off
    setenv("DEVDL_DEBUG", "statistics", 1);
    setenv("DEVDL_CACHE_REMOTE", server_->url().c_str(), 1);
    useKey("the cluster's secret");
  }
  /// DEVDL_CACHE_KEY_FILE: a file holding `secret`, only its owner may read (`mode`).
  void useKey(const std::string &secret, mode_t mode = 0600) {
    const std::string path = scratch_ + "/key-" + std::to_string(keys_++);
    test::writeFile(path, secret);
    chmod(path.c_str(), mode);
    setenv("DEVDL_CACHE_KEY_FILE", path.c_str(), 1);
  }
  void TearDown() override {
    for (const char *name : kVariables) unsetenv(name);
    for (const auto &[name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

  /// The seeds' example in a process on "machine" `machine` (its own disk cache).
  Load seedOn(const std::string &machine) {
    const std::string dir = scratch_ + "/" + machine;
    setenv("DEVDL_CACHE_DIR", dir.c_str(), 1);
    Load load = parse(test::run({DEVDL_TEST_CACHE_PROBE, "1", "AppKernel", test::image("lib.spv"), test::image("app.spv")}));
    EXPECT_EQ(load.result.status, 0) << load.result.err;
    EXPECT_EQ(load.result.out, "0 2 4 6 8 10 12 14\n") << load.result.err;
    return load;
  }
  /// The store's one entry's name.
  std::string storedName() {
    redisContext *context = redisConnect("127.0.0.1", server_->port());
    auto *reply = static_cast<redisReply *>(redisCommand(context, "KEYS devdl:*"));
    std::string name = reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 ? reply->element[0]->str : "";
    if (reply) freeReplyObject(reply);
    redisFree(context);
    return name;
  }

  std::unique_ptr<RedisServer> server_;
  std::string scratch_;
  int keys_ = 0;

 private:
  static constexpr const char *kVariables[] = {"DEVDL_CACHE",          "DEVDL_CACHE_DIR",       "DEVDL_CACHE_REMOTE",
                                               "DEVDL_DEBUG",          "DEVDL_CACHE_KEY_FILE",  "DEVDL_CACHE_REMOTE_CA",
                                               "DEVDL_CACHE_REMOTE_CERT", "DEVDL_CACHE_REMOTE_KEY"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(RemoteCacheE2E, ASecondMachineLoadsWhatTheFirstBuilt) {
  Load first = seedOn("first");
  EXPECT_TRUE(first.linked());
  EXPECT_EQ(first.localStored, 1);
  EXPECT_EQ(first.remoteMisses, 1);
  EXPECT_EQ(first.remoteStored, 1);
  ASSERT_NE(storedName(), "");

  Load second = seedOn("second");
  EXPECT_FALSE(second.linked()) << second.result.err;
  EXPECT_EQ(second.remoteHits, 1) << second.result.err;
  EXPECT_EQ(second.localStored, 1) << "the remote hit is kept on the machine";
  EXPECT_NE(second.result.err.find("from the remote store " + server_->url()), std::string::npos) << second.result.err;

  Load again = seedOn("second");
  EXPECT_FALSE(again.linked());
  EXPECT_EQ(again.localHits, 1);
  EXPECT_EQ(again.remoteHits, -1) << "a local hit asks nothing of the store: " << again.result.err;
}

TEST_F(RemoteCacheE2E, ABadValueIsRefusedRebuiltAndReplaced) {
  seedOn("first");
  const std::string name = storedName();
  ASSERT_NE(name, "");
  std::string value = *getRaw(*server_, name);
  value[value.size() / 2] ^= 1;
  setRaw(*server_, name, value);

  Load second = seedOn("second");
  EXPECT_TRUE(second.linked()) << second.result.err;
  EXPECT_EQ(second.refused, 1);
  EXPECT_NE(second.result.err.find("its tag does not verify"), std::string::npos) << second.result.err;
  EXPECT_EQ(second.remoteStored, 1) << "its build replaces the bad value";

  Load third = seedOn("third");
  EXPECT_FALSE(third.linked()) << third.result.err;
  EXPECT_EQ(third.remoteHits, 1);
}

// A node of another cluster (another key) on the same server takes nothing from it, and builds.
TEST_F(RemoteCacheE2E, ANodeWithAnotherKeyTakesNothingAndBuilds) {
  seedOn("first");
  useKey("another cluster's secret");
  Load stranger = seedOn("second");
  EXPECT_TRUE(stranger.linked()) << stranger.result.err;
  EXPECT_EQ(stranger.remoteHits, 0) << stranger.result.err;
  EXPECT_EQ(stranger.refused, 1) << stranger.result.err;
}

// Without the cluster's key the store is not used at all, and DEVDL_DEBUG says so; a key file
// others may read is refused whatever DEVDL_DEBUG says.
TEST_F(RemoteCacheE2E, WithoutAKeyTheStoreIsNotUsed) {
  unsetenv("DEVDL_CACHE_KEY_FILE");
  Load keyless = seedOn("first");
  EXPECT_TRUE(keyless.linked());
  EXPECT_NE(keyless.result.err.find("DEVDL_CACHE_REMOTE is not used without DEVDL_CACHE_KEY_FILE"), std::string::npos)
      << keyless.result.err;
  EXPECT_EQ(keyless.remoteMisses, -1) << "the store was not asked";
  EXPECT_EQ(storedName(), "") << "nor written";
  useKey("the cluster's secret", 0644);
  unsetenv("DEVDL_DEBUG");
  const std::string dir = scratch_ + "/second";
  setenv("DEVDL_CACHE_DIR", dir.c_str(), 1);
  test::CommandResult readable =
      test::run({DEVDL_TEST_CACHE_PROBE, "1", "AppKernel", test::image("lib.spv"), test::image("app.spv")});
  EXPECT_EQ(readable.status, 0) << readable.err;
  EXPECT_NE(readable.err.find("its group or others may read or write it (chmod 600 it); DEVDL_CACHE_REMOTE is not used"),
            std::string::npos)
      << readable.err;
  EXPECT_EQ(storedName(), "");
}

TEST_F(RemoteCacheE2E, AServerDownOrStoppedOnlyMeansALocalBuild) {
  seedOn("first");
  server_->kill(SIGSTOP);
  Load stopped = seedOn("second");
  EXPECT_TRUE(stopped.linked());
  EXPECT_NE(stopped.result.err.find("no answer within"), std::string::npos) << stopped.result.err;
  server_->kill(SIGKILL);
  Load down = seedOn("third");
  EXPECT_TRUE(down.linked());
  EXPECT_NE(down.result.err.find("cannot connect"), std::string::npos) << down.result.err;
  EXPECT_EQ(down.localStored, 1);
}

TEST_F(RemoteCacheE2E, AnAddressThatDoesNotParseIsSaidAndTheDiskCacheServes) {
  setenv("DEVDL_CACHE_REMOTE", "redis://cache.example:port", 1);
  Load load = seedOn("first");
  EXPECT_NE(load.result.err.find("DEVDL_CACHE_REMOTE=redis://cache.example:port: the port is no number"),
            std::string::npos)
      << load.result.err;
  EXPECT_EQ(load.localStored, 1);
}

// ---- TLS (rediss://) -----------------------------------------------------------------------------

// Certificates openssl(1) makes for the TLS tests: a CA that signs the server's (for 127.0.0.1),
// a client's and one for another host's name, and another CA that signs nothing here.
struct Certificates {
  std::string dir, why;  // why: "" where they were made
  std::string file(const std::string &name) const { return dir + "/" + name; }
};

Certificates makeCertificates(const std::string &dir) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + dir + "'; "
      "openssl req -x509 " + key + " -keyout ca.key -out ca.crt -days 2 -subj '/CN=devdl test CA'; "
      "openssl req -x509 " + key + " -keyout other-ca.key -out other-ca.crt -days 2 -subj '/CN=another CA'; "
      "printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext; "
      "printf 'extendedKeyUsage=clientAuth\\n' > client.ext; "
      "printf 'subjectAltName=DNS:elsewhere.example\\n' > elsewhere.ext; "
      "for name in server client elsewhere; do "
      "openssl req " + key + " -keyout $name.key -out $name.csr -subj /CN=$name; "
      "openssl x509 -req -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $name.crt -days 2 "
      "-extfile $name.ext; done";
  test::CommandResult made = test::run({"/bin/sh", "-c", script});
  return Certificates{dir, made.status == 0 ? "" : "openssl(1) made no test certificates: " + made.err};
}

// The server's options: its certificate (`server`: server or elsewhere), the CA that signed the
// clients', whether it asks for a client certificate.
std::vector<std::string> tlsOptions(const Certificates &certificates, const std::string &server, bool askClients) {
  return {"--tls-cert-file", certificates.file(server + ".crt"), "--tls-key-file", certificates.file(server + ".key"),
          "--tls-ca-cert-file", certificates.file("ca.crt"), "--tls-auth-clients", askClients ? "yes" : "no"};
}

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

// End to end over TLS: the second machine loads what the first built, and a node that trusts
// another CA, or whose server has stopped, builds, saying why.
class RemoteCacheTlsE2E : public RemoteCacheE2E {
 protected:
  std::unique_ptr<RedisServer> makeServer() override {
    certificates_ = makeCertificates(scratch_);
    if (!certificates_.why.empty()) {
      ADD_FAILURE() << certificates_.why;
      return std::make_unique<RedisServer>();
    }
    setenv("DEVDL_CACHE_REMOTE_CA", certificates_.file("ca.crt").c_str(), 1);
    return std::make_unique<RedisServer>(std::vector<std::string>{}, tlsOptions(certificates_, "server", false));
  }
  Certificates certificates_;
};

TEST_F(RemoteCacheTlsE2E, ASecondMachineLoadsWhatTheFirstBuiltAndANodeTrustingAnotherCaOrFacingAStoppedServerBuilds) {
  Load first = seedOn("first");
  EXPECT_TRUE(first.linked());
  EXPECT_EQ(first.remoteStored, 1) << first.result.err;
  Load second = seedOn("second");
  EXPECT_FALSE(second.linked()) << second.result.err;
  EXPECT_EQ(second.remoteHits, 1) << second.result.err;
  EXPECT_NE(second.result.err.find("from the remote store " + server_->url()), std::string::npos) << second.result.err;
  setenv("DEVDL_CACHE_REMOTE_CA", certificates_.file("other-ca.crt").c_str(), 1);
  Load distrustful = seedOn("third");
  EXPECT_TRUE(distrustful.linked());
  EXPECT_NE(distrustful.result.err.find("TLS: the server's certificate is not trusted: "), std::string::npos)
      << distrustful.result.err;
  // A server that takes the connection and then says nothing: the handshake waits the call's bound.
  setenv("DEVDL_CACHE_REMOTE_CA", certificates_.file("ca.crt").c_str(), 1);
  server_->kill(SIGSTOP);
  Load stopped = seedOn("fourth");
  EXPECT_TRUE(stopped.linked());
  EXPECT_NE(stopped.result.err.find("TLS handshake: no answer within 2000 ms"), std::string::npos) << stopped.result.err;
}

}  // namespace
}  // namespace devdl
