// TLS to the remote store (rediss://): OpenSSL's, over the socket hiredis connected. Debian 12's
// hiredis (0.14) has no TLS of its own; its formatter and reader still speak Redis's protocol,
// over this channel (store/remote_store.cpp). OpenSSL is opened at run time, as hiredis is: a
// process that asks for no TLS loads neither.
//
// The server is verified against DEVDL_CACHE_REMOTE_CA (a file of PEM certificates; else the
// system's), and its certificate must name the address's host. Where the server asks for a
// client certificate, DEVDL_CACHE_REMOTE_CERT and DEVDL_CACHE_REMOTE_KEY give it.
#pragma once

#include <llvm/Support/Error.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace devdl::store {

struct TlsSettings {
  std::string caFile;              // DEVDL_CACHE_REMOTE_CA; empty: the system's certificates
  std::string certFile, keyFile;   // DEVDL_CACHE_REMOTE_CERT, DEVDL_CACHE_REMOTE_KEY; both or neither
  static TlsSettings fromEnvironment();
};

/// A TLS session over a connected socket, whose timeouts (SO_RCVTIMEO, SO_SNDTIMEO: `timeout`)
/// bound each read and write, the handshake's included.
class TlsChannel {
 public:
  /// The handshake with the server at `host` over `fd` (which stays the caller's); fails saying
  /// why: no OpenSSL, a settings file refused, the server's certificate not verified (and why),
  /// no answer within `timeout`.
  static llvm::Expected<std::unique_ptr<TlsChannel>> open(int fd, const std::string &host, const TlsSettings &settings,
                                                          std::chrono::milliseconds timeout);
  ~TlsChannel();
  TlsChannel(const TlsChannel &) = delete;
  TlsChannel &operator=(const TlsChannel &) = delete;

  llvm::Error write(std::string_view bytes);
  /// Up to `size` bytes, at least one; fails where the server closed the session or did not
  /// answer in time.
  llvm::Expected<size_t> read(char *buffer, size_t size);

 private:
  struct Session;
  explicit TlsChannel(std::unique_ptr<Session> session);
  std::unique_ptr<Session> session_;
};

}  // namespace devdl::store
