#include "exporters/http_server.hpp"

#include <CivetServer.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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
    Route(Handler h, const WebConfig& w) : handler(std::move(h)), web(w) {}
    Handler handler;
    const WebConfig& web;

    bool serve(mg_connection* conn, bool head) {
        if (!authorized(web, mg_get_header(conn, "Authorization"))) {
            const char* body = "unauthorized\n";
            mg_printf(conn,
                      "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"uringscope\"\r\n"
                      "Content-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                      std::strlen(body), head ? "" : body);
            return true;
        }
        send(conn, handler(), head);
        return true;
    }
    bool handleGet(CivetServer*, mg_connection* conn) override { return serve(conn, false); }
    bool handleHead(CivetServer*, mg_connection* conn) override { return serve(conn, true); }
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
                                             const WebConfig& web, std::string& error) {
    // civetweb spells "every interface" as a bare port, and HTTPS as a trailing "s".
    std::string port = listen_address.front() == ':' ? listen_address.substr(1) : listen_address;
    std::string pem;
    if (web.tls()) {
        port += "s";
        // civetweb wants key and certificate in one PEM file: write a private copy (0600) that
        // lives only until the server has read it.
        char path[] = "/tmp/uringscope-tls-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) {
            error = std::string("cannot create the TLS key file: ") + std::strerror(errno);
            return nullptr;
        }
        pem = path;
        bool ok = true;
        for (const auto& f : {web.key_file, web.cert_file}) {
            std::ifstream in(f, std::ios::binary);
            std::string data((std::istreambuf_iterator<char>(in)), {});
            if (!in.good() && !in.eof()) ok = false;
            if (data.empty()) {
                error = "cannot read " + f;
                ok = false;
            }
            if (ok && write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
                ok = false;
        }
        close(fd);
        if (!ok) {
            unlink(path);
            if (error.empty()) error = "cannot prepare the TLS key file";
            return nullptr;
        }
    }
    std::vector<std::string> options = {
        "listening_ports", port,
        "num_threads", "4",
        // A scrape answers from memory; anything slower than this is a stuck client.
        "request_timeout_ms", "10000",
        "enable_keep_alive", "no",
    };
    if (!pem.empty()) {
        options.insert(options.end(), {"ssl_certificate", pem, "ssl_protocol_version", "4"});
    }
    std::unique_ptr<HttpServer> s(new HttpServer);
    s->web_ = web;
    try {
        s->server_ = std::make_unique<CivetServer>(options);
    } catch (const CivetException& e) {
        error = e.what();
        if (!pem.empty()) unlink(pem.c_str());
        return nullptr;
    }
    if (!pem.empty()) unlink(pem.c_str());
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
    routes_.push_back(std::make_unique<Route>(std::move(handler), web_));
    // civetweb matches prefixes; "$" anchors the pattern to the exact path.
    server_->addHandler(path + "$", routes_.back().get());
}

}  // namespace uringscope
