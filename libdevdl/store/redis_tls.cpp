// TLS to the remote store (store/redis_tls.h): OpenSSL opened at run time, one session over
// hiredis's socket.
#include "store/redis_tls.h"

#include "support/driver_library.h"
#include "support/environment.h"
#include "support/error.h"

#include <cerrno>
#include <cstring>

#if DEVDL_HAVE_OPENSSL
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#endif

namespace devdl::store {

TlsSettings TlsSettings::fromEnvironment() {
  TlsSettings settings;
  for (const auto &[name, field] : {std::pair{"DEVDL_CACHE_REMOTE_CA", &settings.caFile},
                                    std::pair{"DEVDL_CACHE_REMOTE_CERT", &settings.certFile},
                                    std::pair{"DEVDL_CACHE_REMOTE_KEY", &settings.keyFile}})
    if (const char *value = devdlVariable(name)) *field = value;
  return settings;
}

#if !DEVDL_HAVE_OPENSSL
struct TlsChannel::Session {};
TlsChannel::TlsChannel(std::unique_ptr<Session> session) : session_(std::move(session)) {}
TlsChannel::~TlsChannel() = default;
llvm::Expected<std::unique_ptr<TlsChannel>> TlsChannel::open(int, const std::string &, const TlsSettings &,
                                                             std::chrono::milliseconds) {
  return fail(ErrorCode::Unsupported, "TLS: this devdl was built without OpenSSL's header (Debian: libssl-dev)");
}
llvm::Error TlsChannel::write(std::string_view) { return fail(ErrorCode::Unsupported, "no TLS"); }
llvm::Expected<size_t> TlsChannel::read(char *, size_t) { return fail(ErrorCode::Unsupported, "no TLS"); }
#else
namespace {

struct OpenSsl {
  decltype(&::TLS_client_method) clientMethod = nullptr;
  decltype(&::SSL_CTX_new) contextNew = nullptr;
  decltype(&::SSL_CTX_free) contextFree = nullptr;
  decltype(&::SSL_CTX_set_verify) setVerify = nullptr;
  decltype(&::SSL_CTX_load_verify_locations) loadVerifyLocations = nullptr;
  decltype(&::SSL_CTX_set_default_verify_paths) setDefaultVerifyPaths = nullptr;
  decltype(&::SSL_CTX_use_certificate_chain_file) useCertificateChainFile = nullptr;
  decltype(&::SSL_CTX_use_PrivateKey_file) usePrivateKeyFile = nullptr;
  decltype(&::SSL_CTX_check_private_key) checkPrivateKey = nullptr;
  decltype(&::SSL_new) sslNew = nullptr;
  decltype(&::SSL_free) sslFree = nullptr;
  decltype(&::SSL_set_fd) setFd = nullptr;
  decltype(&::SSL_set1_host) setHost = nullptr;
  decltype(&::SSL_ctrl) control = nullptr;
  decltype(&::SSL_connect) connect = nullptr;
  decltype(&::SSL_read) read = nullptr;
  decltype(&::SSL_write) write = nullptr;
  decltype(&::SSL_get_error) getError = nullptr;
  decltype(&::SSL_shutdown) shutdown = nullptr;
  decltype(&::SSL_get_verify_result) getVerifyResult = nullptr;
  decltype(&::ERR_get_error) errorCode = nullptr;  // libcrypto's, found through libssl
  decltype(&::ERR_error_string_n) errorString = nullptr;
  decltype(&::ERR_clear_error) clearErrors = nullptr;
  decltype(&::X509_verify_cert_error_string) verifyErrorString = nullptr;
};

LoadedApi<OpenSsl> loadOpenSsl() {
  LoadedApi<OpenSsl> loaded;
  OpenSsl &api = loaded.api;
  const EntryPoint entries[] = {
      {"TLS_client_method", reinterpret_cast<void **>(&api.clientMethod)},
      {"SSL_CTX_new", reinterpret_cast<void **>(&api.contextNew)},
      {"SSL_CTX_free", reinterpret_cast<void **>(&api.contextFree)},
      {"SSL_CTX_set_verify", reinterpret_cast<void **>(&api.setVerify)},
      {"SSL_CTX_load_verify_locations", reinterpret_cast<void **>(&api.loadVerifyLocations)},
      {"SSL_CTX_set_default_verify_paths", reinterpret_cast<void **>(&api.setDefaultVerifyPaths)},
      {"SSL_CTX_use_certificate_chain_file", reinterpret_cast<void **>(&api.useCertificateChainFile)},
      {"SSL_CTX_use_PrivateKey_file", reinterpret_cast<void **>(&api.usePrivateKeyFile)},
      {"SSL_CTX_check_private_key", reinterpret_cast<void **>(&api.checkPrivateKey)},
      {"SSL_new", reinterpret_cast<void **>(&api.sslNew)},
      {"SSL_free", reinterpret_cast<void **>(&api.sslFree)},
      {"SSL_set_fd", reinterpret_cast<void **>(&api.setFd)},
      {"SSL_set1_host", reinterpret_cast<void **>(&api.setHost)},
      {"SSL_ctrl", reinterpret_cast<void **>(&api.control)},
      {"SSL_connect", reinterpret_cast<void **>(&api.connect)},
      {"SSL_read", reinterpret_cast<void **>(&api.read)},
      {"SSL_write", reinterpret_cast<void **>(&api.write)},
      {"SSL_get_error", reinterpret_cast<void **>(&api.getError)},
      {"SSL_shutdown", reinterpret_cast<void **>(&api.shutdown)},
      {"SSL_get_verify_result", reinterpret_cast<void **>(&api.getVerifyResult)},
      {"ERR_get_error", reinterpret_cast<void **>(&api.errorCode)},
      {"ERR_error_string_n", reinterpret_cast<void **>(&api.errorString)},
      {"ERR_clear_error", reinterpret_cast<void **>(&api.clearErrors)},
      {"X509_verify_cert_error_string", reinterpret_cast<void **>(&api.verifyErrorString)}};
  loaded.error = openDriverLibrary("libssl.so.3", "TLS library (Debian: libssl3)", "OpenSSL 3", entries);
  return loaded;
}

// What OpenSSL's error queue says, emptied.
std::string openSslErrors(const OpenSsl &api) {
  std::string text;
  while (const unsigned long code = api.errorCode()) {
    char buffer[256];
    api.errorString(code, buffer, sizeof buffer);
    text += (text.empty() ? "" : "; ") + std::string(buffer);
  }
  return text.empty() ? "no reason given" : text;
}

}  // namespace

struct TlsChannel::Session {
  const OpenSsl &api;
  std::chrono::milliseconds timeout;  // the socket's, for messages
  SSL_CTX *context = nullptr;
  SSL *ssl = nullptr;

  ~Session() {
    if (ssl) {
      api.shutdown(ssl);  // a close_notify, not waited for
      api.sslFree(ssl);
    }
    if (context) api.contextFree(context);
  }

  // Why the last call on `ssl` that returned `result` failed.
  std::string why(int result) const {
    const int kind = api.getError(ssl, result);
    if (kind == SSL_ERROR_ZERO_RETURN) return "the server closed the session";
    // The socket's timeout ends a read or write with EAGAIN, which OpenSSL takes for "try again".
    if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE ||
        (kind == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)))
      return "no answer within " + std::to_string(timeout.count()) + " ms";
    if (kind == SSL_ERROR_SYSCALL)
      return errno ? std::string("the connection failed: ") + std::strerror(errno) : "the server closed the connection";
    return openSslErrors(api);
  }
};

TlsChannel::TlsChannel(std::unique_ptr<Session> session) : session_(std::move(session)) {}
TlsChannel::~TlsChannel() = default;

llvm::Expected<std::unique_ptr<TlsChannel>> TlsChannel::open(int fd, const std::string &host,
                                                             const TlsSettings &settings,
                                                             std::chrono::milliseconds timeout) {
  auto api = loadedOnce(loadOpenSsl);
  if (!api) return api.takeError();
  if (settings.certFile.empty() != settings.keyFile.empty())
    return fail(ErrorCode::InvalidArgument,
                "DEVDL_CACHE_REMOTE_CERT and DEVDL_CACHE_REMOTE_KEY go together: a client certificate and its key");
  auto session = std::make_unique<Session>(Session{*api, timeout});
  api->clearErrors();
  session->context = api->contextNew(api->clientMethod());
  if (!session->context) return fail(ErrorCode::Io, "TLS: " + openSslErrors(*api));
  api->setVerify(session->context, SSL_VERIFY_PEER, nullptr);
  const bool trusted = settings.caFile.empty()
                           ? api->setDefaultVerifyPaths(session->context) == 1
                           : api->loadVerifyLocations(session->context, settings.caFile.c_str(), nullptr) == 1;
  if (!trusted)
    return fail(ErrorCode::InvalidArgument,
                "TLS: the certificates to trust" + (settings.caFile.empty() ? "" : " (" + settings.caFile + ")") +
                    " cannot be loaded: " + openSslErrors(*api));
  if (!settings.certFile.empty() &&
      (api->useCertificateChainFile(session->context, settings.certFile.c_str()) != 1 ||
       api->usePrivateKeyFile(session->context, settings.keyFile.c_str(), SSL_FILETYPE_PEM) != 1 ||
       api->checkPrivateKey(session->context) != 1))
    return fail(ErrorCode::InvalidArgument, "TLS: the client certificate " + settings.certFile + " and its key " +
                                                settings.keyFile + " cannot be used: " + openSslErrors(*api));
  session->ssl = api->sslNew(session->context);
  if (!session->ssl || api->setFd(session->ssl, fd) != 1) return fail(ErrorCode::Io, "TLS: " + openSslErrors(*api));
  // The certificate must name the host (an address: as an IP address); a name goes as SNI too.
  api->setHost(session->ssl, host.c_str());
  unsigned char address[16];
  if (inet_pton(AF_INET, host.c_str(), address) != 1 && inet_pton(AF_INET6, host.c_str(), address) != 1)
    api->control(session->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char *>(host.c_str()));
  errno = 0;
  if (const int result = api->connect(session->ssl); result != 1) {
    const long verified = api->getVerifyResult(session->ssl);
    if (verified != X509_V_OK)
      return fail(ErrorCode::Io, "TLS: the server's certificate is not trusted: " +
                                     std::string(api->verifyErrorString(verified)));
    return fail(ErrorCode::Io, "TLS handshake: " + session->why(result));
  }
  return std::unique_ptr<TlsChannel>(new TlsChannel(std::move(session)));
}

llvm::Error TlsChannel::write(std::string_view bytes) {
  while (!bytes.empty()) {
    errno = 0;
    const int chunk = static_cast<int>(std::min<size_t>(bytes.size(), 1 << 30));
    const int written = session_->api.write(session_->ssl, bytes.data(), chunk);
    if (written <= 0) return fail(ErrorCode::Io, session_->why(written));
    bytes.remove_prefix(written);
  }
  return llvm::Error::success();
}

llvm::Expected<size_t> TlsChannel::read(char *buffer, size_t size) {
  errno = 0;
  const int got = session_->api.read(session_->ssl, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  if (got <= 0) return fail(ErrorCode::Io, session_->why(got));
  return static_cast<size_t>(got);
}

#endif

}  // namespace devdl::store
