#pragma once
// The daemon's HTTP server (GNU libmicrohttpd, Debian's libmicrohttpd12; TLS through the
// system's GnuTLS): /metrics, the JSON snapshot API and a landing page. We own the server rather
// than use prometheus-cpp's Exposer so that one listener serves every endpoint and every request
// path is ours to validate.
//
// Not civetweb: Debian bookworm's libcivetweb 1.15 loads OpenSSL at run time by name with a
// table written for the OpenSSL 1.1 API. OpenSSL 3 no longer exports SSL_get_peer_certificate,
// so that entry stays NULL (mg_init_library(MG_FEATURES_TLS) reports the failure, mg_start then
// goes ahead regardless) and every TLS connection crashes the process after its handshake.
#include <sys/socket.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>

#include "server/web_config.hpp"

struct MHD_Daemon;
struct MHD_Connection;

namespace iouscope {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
    // Instead of body: text shared with a cache, sent without a copy.
    std::shared_ptr<const std::string> shared_body = nullptr;
    // The same text gzip-compressed, asked for only when the client's Accept-Encoding takes
    // gzip, so a response nobody wants compressed costs no compression.
    std::function<std::shared_ptr<const std::string>()> gzip_body = nullptr;
};

// Whether an Accept-Encoding value takes gzip: a "gzip" or "*" coding whose q is not 0.
bool accepts_gzip(const char* accept_encoding);

class HttpServer {
public:
    using Handler = std::function<HttpResponse()>;

    // Binds listen_address (HOST:PORT, ":PORT" for all IPv4 interfaces, [V6]:PORT). Returns
    // nullptr and sets error if the address cannot be bound or the TLS files are unusable.
    // With web.tls() it serves HTTPS only (TLS 1.2 and 1.3); with users it requires HTTP basic
    // auth on every known path. The TLS files are read here, before privileges are dropped.
    static std::unique_ptr<HttpServer> make(const std::string& listen_address, const WebConfig& web,
                                            std::string& error);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Serves GET and HEAD of exactly `path`; other methods get 405. May be called while serving.
    void route(const std::string& path, Handler handler);

    // For the request callback (a C function pointer, hence public).
    int answer(MHD_Connection* conn, const char* url, const char* method);

private:
    HttpServer() = default;
    // Reads the web config's key and certificate (while privileged) and asks for TLS.
    std::optional<std::string> read_tls(unsigned& flags);
    // Starts libmicrohttpd on addr; its own start-up messages are the error.
    std::optional<std::string> start(unsigned flags, const sockaddr_storage& addr);
    WebConfig web_;
    std::string tls_key_, tls_cert_;  // PEM text, read once at start
    std::shared_mutex routes_mutex_;
    std::map<std::string, Handler> routes_;
    MHD_Daemon* daemon_ = nullptr;
};

}  // namespace iouscope
