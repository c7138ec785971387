// The remote store end to end through devdl_cache_probe on PoCL: each process with a fresh disk
// cache is another machine sharing the store and, unless said otherwise, the cluster's key.
#include "e2e/remote_cache_fixture.h"
#include "test_support.h"

#include <hiredis/hiredis.h>

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace devdl {
namespace {

using test::Certificates;
using test::getRaw;
using test::makeCertificates;
using test::RedisServer;
using test::setRaw;
using test::tlsOptions;

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
