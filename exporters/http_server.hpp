#pragma once
// The daemon's HTTP server (civetweb, Debian's libcivetweb): /metrics, the JSON snapshot API and
// a landing page. We own the server rather than use prometheus-cpp's Exposer so that one listener
// serves every endpoint and every request path is ours to validate.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exporters/web_config.hpp"

class CivetServer;

namespace uringscope {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

class HttpServer {
public:
    using Handler = std::function<HttpResponse()>;

    // Binds listen_address (HOST:PORT, ":PORT" for all interfaces). Returns nullptr and sets
    // error if the address cannot be bound.
    // With web.tls() it serves HTTPS only; with users it requires HTTP basic auth on every path.
    static std::unique_ptr<HttpServer> make(const std::string& listen_address,
                                            const WebConfig& web, std::string& error);
    ~HttpServer();

    // Serves GET and HEAD of exactly `path`; other methods get 405.
    void route(const std::string& path, Handler handler);

private:
    HttpServer() = default;
    struct Route;
    WebConfig web_;
    std::unique_ptr<CivetServer> server_;
    std::vector<std::unique_ptr<Route>> routes_;
};

}  // namespace uringscope
