#include "exporters/http_server.hpp"

#include <CivetServer.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <vector>

namespace uringscope {

namespace {

void send(mg_connection* conn, const HttpResponse& r, bool head) {
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
              r.status, mg_get_response_code_text(conn, r.status), r.content_type.c_str(),
              r.body.size());
    if (!head) mg_write(conn, r.body.data(), r.body.size());
}

}  // namespace

struct HttpServer::Route : CivetHandler {
    explicit Route(Handler h) : handler(std::move(h)) {}
    Handler handler;

    bool handleGet(CivetServer*, mg_connection* conn) override {
        send(conn, handler(), false);
        return true;
    }
    bool handleHead(CivetServer*, mg_connection* conn) override {
        send(conn, handler(), true);
        return true;
    }
    bool refuse(mg_connection* conn) {
        send(conn, {405, "text/plain; charset=utf-8", "method not allowed\n"}, false);
        return true;
    }
    bool handlePost(CivetServer*, mg_connection* c) override { return refuse(c); }
    bool handlePut(CivetServer*, mg_connection* c) override { return refuse(c); }
    bool handleDelete(CivetServer*, mg_connection* c) override { return refuse(c); }
    bool handleOptions(CivetServer*, mg_connection* c) override { return refuse(c); }
    bool handlePatch(CivetServer*, mg_connection* c) override { return refuse(c); }
};

std::unique_ptr<HttpServer> HttpServer::make(const std::string& listen_address,
                                             std::string& error) {
    // civetweb spells "every interface" as a bare port.
    std::string port = listen_address.front() == ':' ? listen_address.substr(1) : listen_address;
    std::vector<std::string> options = {
        "listening_ports", port,
        "num_threads", "4",
        // A scrape answers from memory; anything slower than this is a stuck client.
        "request_timeout_ms", "10000",
        "enable_keep_alive", "no",
    };
    std::unique_ptr<HttpServer> s(new HttpServer);
    try {
        s->server_ = std::make_unique<CivetServer>(options);
    } catch (const CivetException& e) {
        error = e.what();
        return nullptr;
    }
    // Unknown paths get a 404 rather than civetweb's file serving, which is off (no
    // document_root) but would answer with its own page.
    s->route("/", [] {
        return HttpResponse{200, "text/html; charset=utf-8",
                            "<html><head><title>uringscope</title></head><body>"
                            "<h1>uringscope</h1><ul>"
                            "<li><a href=\"metrics\">metrics</a></li>"
                            "<li><a href=\"api/v1/snapshot\">api/v1/snapshot</a> (JSON)</li>"
                            "</ul></body></html>\n"};
    });
    return s;
}

HttpServer::~HttpServer() {
    // Stop serving before the handlers the server points at go away.
    if (server_) server_->close();
}

void HttpServer::route(const std::string& path, Handler handler) {
    routes_.push_back(std::make_unique<Route>(std::move(handler)));
    // civetweb matches prefixes; "$" anchors the pattern to the exact path.
    server_->addHandler(path + "$", routes_.back().get());
}

}  // namespace uringscope
