#include "server/http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace iouscope {

namespace {

// A scrape answers from memory; anything slower than this is a stuck client.
constexpr unsigned kConnectionTimeoutSeconds = 10;
// Threads that parse requests and run handlers; each serves many connections (epoll).
constexpr unsigned kThreads = 4;
// Open connections at once, over all threads; more wait in the listen backlog.
constexpr unsigned kConnectionLimit = 256;
// TLS 1.2 and 1.3 only, as exporter-toolkit's default min_version.
constexpr const char* kTlsPriorities = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

// Messages libmicrohttpd logs. During start-up they are the reason a start failed; afterwards
// they are about single connections (a client that is not speaking TLS, a reset), which are
// the client's problem, not the operator's: debug level.
struct Log {
    std::mutex mu;
    bool starting = true;
    std::string start_messages;
};

void on_log(void* cls, const char* fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::string msg(buf);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    auto* log = static_cast<Log*>(cls);
    std::lock_guard lock(log->mu);
    if (log->starting) {
        if (!log->start_messages.empty()) log->start_messages += "; ";
        log->start_messages += msg;
    } else {
        spdlog::debug("http: {}", msg);
    }
}

// One Log per process: the logger must outlive every daemon, and there is one daemon.
Log& server_log() {
    static Log log;
    return log;
}

// The response body's owner while libmicrohttpd sends it: the text itself, or a reference to
// text shared with a cache.
struct Body {
    std::string own;
    std::shared_ptr<const std::string> shared;
    const std::string& text() const { return shared ? *shared : own; }
};

void free_body(void* cls) {
    delete static_cast<Body*>(cls);
}

enum MHD_Result reply(MHD_Connection* conn, HttpResponse r,
                      std::initializer_list<std::pair<const char*, const char*>> extra = {}) {
    const bool gzip = r.gzip_body && accepts_gzip(MHD_lookup_connection_value(
                                         conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    auto* body = new Body{std::move(r.body), gzip ? r.gzip_body() : r.shared_body};
    MHD_Response* resp = MHD_create_response_from_buffer_with_free_callback_cls(
        body->text().size(), const_cast<char*>(body->text().data()), free_body, body);
    if (!resp) {
        delete body;
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
    if (r.gzip_body) MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    if (gzip) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    // One request per connection, as before: nothing a scraper needs, and no idle connections
    // held open between scrapes.
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    for (const auto& [k, v] : extra) MHD_add_response_header(resp, k, v);
    enum MHD_Result ret = MHD_queue_response(conn, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method,
                           const char* /*version*/, const char* /*upload_data*/,
                           size_t* /*upload_data_size*/, void** /*req_cls*/) {
    // Called once the request line and headers are in. We answer at once: no path takes a
    // body, and libmicrohttpd discards an unread body by closing the connection after the reply.
    return static_cast<HttpServer*>(cls)->answer(conn, url, method) ? MHD_YES : MHD_NO;
}

std::optional<std::string> read_file(const std::string& path, std::string& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "cannot read " + path + ": " + std::strerror(errno);
    out.assign(std::istreambuf_iterator<char>(in), {});
    if (in.bad()) return "cannot read " + path;
    if (out.empty()) return path + " is empty";
    return std::nullopt;
}

}  // namespace

int HttpServer::answer(MHD_Connection* conn, const char* url, const char* method) {
    const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0;
    const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    Handler handler;
    {
        std::shared_lock lock(routes_mutex_);
        auto it = routes_.find(url);
        if (it == routes_.end())
            return reply(conn, {404, "text/plain; charset=utf-8", "not found\n"}) == MHD_YES;
        if (get || head) handler = it->second;
    }
    if (!handler)
        return reply(conn, {405, "text/plain; charset=utf-8", "method not allowed\n"},
                     {{MHD_HTTP_HEADER_ALLOW, "GET, HEAD"}}) == MHD_YES;
    // Unknown paths and methods are answered above without running bcrypt: junk requests cost
    // no CPU. Everything that has an answer needs the password.
    if (!authorized(web_, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                      MHD_HTTP_HEADER_AUTHORIZATION)))
        return reply(conn, {401, "text/plain; charset=utf-8", "unauthorized\n"},
                     {{MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"iouscope\""}}) == MHD_YES;
    HttpResponse r;
    try {
        r = handler();
    } catch (const std::exception& e) {
        spdlog::error("http: {} {}: {}", method, url, e.what());
        r = {500, "text/plain; charset=utf-8", "internal error\n"};
    }
    return reply(conn, std::move(r)) == MHD_YES;
}

bool accepts_gzip(const char* accept_encoding) {
    if (!accept_encoding) return false;
    std::string_view rest(accept_encoding);
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const auto semi = item.find(';');
        std::string_view coding = item.substr(0, semi);
        while (!coding.empty() && coding.front() == ' ') coding.remove_prefix(1);
        while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
        if (coding != "gzip" && coding != "*") continue;
        if (semi == std::string_view::npos) return true;
        std::string params(item.substr(semi + 1));
        params.erase(std::remove(params.begin(), params.end(), ' '), params.end());
        // q=0, q=0.0, q=0.00...: refused; any other weight accepts.
        if (params.rfind("q=", 0) == 0 && params.find_first_not_of("0.", 2) == std::string::npos)
            continue;
        return true;
    }
    return false;
}

namespace {

// HOST:PORT, checked by the flag parser: empty host (every IPv4 interface), IPv4, or [IPv6].
std::optional<std::string> parse_listen_address(const std::string& listen_address,
                                                sockaddr_storage& addr, unsigned& flags) {
    const auto colon = listen_address.rfind(':');
    if (colon == std::string::npos) return "no port in " + listen_address;
    const std::string host = listen_address.substr(0, colon);
    const auto port = htons(static_cast<uint16_t>(std::atoi(listen_address.c_str() + colon + 1)));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = port;
        if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6->sin6_addr) != 1)
            return "bad IPv6 address " + host;
        flags |= MHD_USE_IPv6;
        return std::nullopt;
    }
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = port;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    if (!host.empty() && inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1)
        return "bad IPv4 address " + host;
    return std::nullopt;
}

const char* const kLandingPage =
    "<html><head><title>iouscope</title></head><body>"
    "<h1>iouscope</h1><ul>"
    "<li><a href=\"metrics\">metrics</a></li>"
    "<li><a href=\"api/v1/snapshot\">api/v1/snapshot</a> (JSON)</li>"
    "</ul></body></html>\n";

}  // namespace

std::optional<std::string> HttpServer::read_tls(unsigned& flags) {
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return "this libmicrohttpd was built without TLS";
    // Read here, while still privileged: the key is usually readable by root only.
    if (auto why = read_file(web_.key_file, tls_key_)) return "TLS key: " + *why;
    if (auto why = read_file(web_.cert_file, tls_cert_)) return "TLS certificate: " + *why;
    flags |= MHD_USE_TLS;
    return std::nullopt;
}

std::optional<std::string> HttpServer::start(unsigned flags, const sockaddr_storage& addr) {
    Log& log = server_log();
    {
        std::lock_guard lock(log.mu);
        log.starting = true;
        log.start_messages.clear();
    }
    // Options are passed as an array so the TLS ones can be left out without varargs tricks.
    std::vector<MHD_OptionItem> opts = {
        {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&on_log), &log},
        {MHD_OPTION_SOCK_ADDR, 0, const_cast<sockaddr_storage*>(&addr)},
        {MHD_OPTION_THREAD_POOL_SIZE, kThreads, nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutSeconds, nullptr},
        {MHD_OPTION_CONNECTION_LIMIT, kConnectionLimit, nullptr},
    };
    if (web_.tls()) {
        opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, tls_key_.data()});
        opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, tls_cert_.data()});
        opts.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, const_cast<char*>(kTlsPriorities)});
    }
    opts.push_back({MHD_OPTION_END, 0, nullptr});
    // The port argument is ignored when MHD_OPTION_SOCK_ADDR is given; passed all the same
    // (sin_port and sin6_port sit at the same offset).
    const auto port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    daemon_ = MHD_start_daemon(flags, port, nullptr, nullptr, &on_request, this, MHD_OPTION_ARRAY,
                               opts.data(), MHD_OPTION_END);
    std::lock_guard lock(log.mu);
    log.starting = false;
    if (daemon_) return std::nullopt;
    return log.start_messages.empty() ? "libmicrohttpd could not start" : log.start_messages;
}

std::unique_ptr<HttpServer> HttpServer::make(const std::string& listen_address,
                                             const WebConfig& web, std::string& error) {
    std::unique_ptr<HttpServer> s(new HttpServer);
    s->web_ = web;
    sockaddr_storage addr{};
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    auto why = parse_listen_address(listen_address, addr, flags);
    if (!why && web.tls()) why = s->read_tls(flags);
    // A scraper that hangs up mid-answer must not kill the daemon (civetweb did the same).
    if (!why) std::signal(SIGPIPE, SIG_IGN);
    if (!why) why = s->start(flags, addr);
    if (why) {
        error = *why;
        return nullptr;
    }
    s->route("/", [] { return HttpResponse{200, "text/html; charset=utf-8", kLandingPage}; });
    return s;
}

HttpServer::~HttpServer() {
    // Stop serving (joins every server thread) before the routes it calls go away.
    if (daemon_) MHD_stop_daemon(daemon_);
}

void HttpServer::route(const std::string& path, Handler handler) {
    std::unique_lock lock(routes_mutex_);
    routes_[path] = std::move(handler);
}

}  // namespace iouscope
