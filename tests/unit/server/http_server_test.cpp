// The HTTP server under concurrent scrapes while the handlers' data changes and routes are
// added. Run under ThreadSanitizer by the test command (build-tsan).
#include "server/http_server.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "model/snapshot_store.hpp"

using namespace iouscope;

namespace {

int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        return -1;
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

size_t append(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

// GET url; returns the status (0 when the request failed) and the body.
long get(const std::string& url, std::string& body) {
    CURL* c = curl_easy_init();
    if (!c) return 0;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

}  // namespace

TEST(HttpServer, ConcurrentScrapesWhileSnapshotsAndRoutesChange) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const int port = free_port();
    ASSERT_GT(port, 0);
    std::string error;
    auto server = HttpServer::make("127.0.0.1:" + std::to_string(port), WebConfig{}, error);
    ASSERT_NE(server, nullptr) << error;
    SnapshotStore store;
    server->route("/metrics", [&store] {
        auto s = store.latest();
        return HttpResponse{200, "text/plain", "seq " + std::to_string(s ? s->seq : 0) + "\n"};
    });
    std::atomic<bool> done{false};
    std::thread writer([&] {
        for (std::uint64_t i = 1; !done.load(); ++i) {
            auto s = std::make_shared<Snapshot>();
            s->seq = i;
            store.publish(std::move(s));
        }
    });
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    std::atomic<int> ok{0}, bad{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c)
        clients.emplace_back([&] {
            for (int i = 0; i < 50; ++i) {
                std::string body;
                if (get(base + "/metrics", body) == 200 && body.rfind("seq ", 0) == 0)
                    ++ok;
                else
                    ++bad;
            }
        });
    // Routes may be added while serving (the daemon adds its API after it starts).
    for (int i = 0; i < 20; ++i)
        server->route("/extra" + std::to_string(i), [i] {
            return HttpResponse{200, "text/plain", std::to_string(i)};
        });
    for (auto& t : clients) t.join();
    done = true;
    writer.join();
    std::string body;
    EXPECT_EQ(get(base + "/extra7", body), 200);
    EXPECT_EQ(body, "7");
    EXPECT_EQ(ok.load(), 200);
    EXPECT_EQ(bad.load(), 0);
    server.reset();
    curl_global_cleanup();
}

namespace {

// GET url with the Accept-Encoding header given (none when empty), bytes as sent: curl does
// not decode them. Content-Encoding lands in encoding.
long get_raw(const std::string& url, const std::string& accept, std::string& body,
             std::string& encoding) {
    CURL* c = curl_easy_init();
    if (!c) return 0;
    curl_slist* headers = nullptr;
    if (!accept.empty())
        headers = curl_slist_append(headers, ("Accept-Encoding: " + accept).c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_header* h = nullptr;
        if (curl_easy_header(c, "Content-Encoding", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
            encoding = h->value;
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return status;
}

}  // namespace

TEST(HttpServer, SharedBodiesAndGzipOnlyForClientsThatAsk) {
    const int port = free_port();
    ASSERT_GT(port, 0);
    std::string err;
    auto s = HttpServer::make("127.0.0.1:" + std::to_string(port), WebConfig{}, err);
    ASSERT_TRUE(s) << err;
    auto text = std::make_shared<const std::string>("plain text\n");
    auto packed = std::make_shared<const std::string>("pretend-gzip");
    std::atomic<int> compressions = 0;
    s->route("/m", [&] {
        return HttpResponse{.status = 200,
                            .content_type = "text/plain",
                            .body = {},
                            .shared_body = text,
                            .gzip_body = [&] {
                                ++compressions;
                                return packed;
                            }};
    });
    const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/m";
    struct Case {
        std::string accept;
        bool gzip;
    };
    for (const Case& c : {Case{"", false}, Case{"gzip", true}, Case{"deflate, gzip;q=0.5", true},
                          Case{"gzip;q=0", false}, Case{"identity", false}, Case{"*", true}}) {
        std::string body, encoding;
        ASSERT_EQ(get_raw(url, c.accept, body, encoding), 200) << c.accept;
        EXPECT_EQ(body, c.gzip ? *packed : *text) << "Accept-Encoding: " << c.accept;
        EXPECT_EQ(encoding, c.gzip ? "gzip" : "") << "Accept-Encoding: " << c.accept;
    }
    EXPECT_EQ(compressions, 3) << "compressed for a client that did not ask";
}

TEST(HttpServer, AcceptEncodingTakesGzipUnlessItsWeightIsZero) {
    EXPECT_FALSE(accepts_gzip(nullptr));
    EXPECT_FALSE(accepts_gzip(""));
    EXPECT_TRUE(accepts_gzip("gzip"));
    EXPECT_TRUE(accepts_gzip("br, gzip, deflate"));
    EXPECT_TRUE(accepts_gzip("gzip ; q=0.001"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
    EXPECT_FALSE(accepts_gzip("gzipx, xgzip"));
    EXPECT_TRUE(accepts_gzip("*;q=1"));
}
