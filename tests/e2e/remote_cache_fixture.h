// What the remote store's tests share (remote_store_test.cpp, remote_cache_test.cpp): the store's
// values read and written as another client of the server would, and certificates for TLS.
#pragma once

#include "redis_server.h"
#include "test_support.h"

#include <hiredis/hiredis.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace devdl::test {

/// SET name value, as another client of the store could.
inline void setRaw(const RedisServer &server, const std::string &name, const std::string &value) {
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
inline std::optional<std::string> getRaw(const RedisServer &server, const std::string &name) {
  redisContext *context = redisConnect("127.0.0.1", server.port());
  if (!context || context->err) return std::nullopt;
  auto *reply = static_cast<redisReply *>(redisCommand(context, "GET %s", name.c_str()));
  std::optional<std::string> value;
  if (reply && reply->type == REDIS_REPLY_STRING) value = std::string(reply->str, reply->len);
  if (reply) freeReplyObject(reply);
  redisFree(context);
  return value;
}

// Certificates openssl(1) makes for the TLS tests: a CA that signs the server's (for 127.0.0.1),
// a client's and one for another host's name, and another CA that signs nothing here.
struct Certificates {
  std::string dir, why;  // why: "" where they were made
  std::string file(const std::string &name) const { return dir + "/" + name; }
};

inline Certificates makeCertificates(const std::string &dir) {
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
inline std::vector<std::string> tlsOptions(const Certificates &certificates, const std::string &server,
                                           bool askClients) {
  return {"--tls-cert-file", certificates.file(server + ".crt"), "--tls-key-file", certificates.file(server + ".key"),
          "--tls-ca-cert-file", certificates.file("ca.crt"), "--tls-auth-clients", askClients ? "yes" : "no"};
}

}  // namespace devdl::test
