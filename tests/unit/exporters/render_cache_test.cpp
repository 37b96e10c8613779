// The exposition cache: one rendering per snapshot, however many scrapes and threads ask.
// Run under ThreadSanitizer by the test command (build-tsan).
#include "exporters/render_cache.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <thread>
#include <vector>

#include "model/snapshot_store.hpp"

using namespace iouscope;

TEST(RenderCache, RendersEachSnapshotOnceForConcurrentScrapes) {
    std::atomic<int> calls{0};
    std::atomic<std::uint64_t> last_rendered{0};
    std::atomic<int> backwards{0};
    RenderCache cache([&](const Snapshot& s) {
        ++calls;
        if (s.seq <= last_rendered.exchange(s.seq)) ++backwards;
        return "seq " + std::to_string(s.seq);
    });
    SnapshotStore store;
    constexpr std::uint64_t kSamples = 200;
    std::atomic<bool> done{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> scrapers;
    for (int i = 0; i < 4; ++i)
        scrapers.emplace_back([&] {
            while (!done.load()) {
                auto snap = store.latest();
                auto text = cache.get(snap);
                // The text is the snapshot's own or a newer one's (published meanwhile), never
                // an older one's.
                if (snap && std::stoull(text->substr(4)) < snap->seq) ++bad;
            }
        });
    for (std::uint64_t i = 1; i <= kSamples; ++i) {
        auto s = std::make_shared<Snapshot>();
        s->seq = i;
        store.publish(std::move(s));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    done = true;
    for (auto& t : scrapers) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(backwards.load(), 0) << "an older snapshot was rendered after a newer one";
    // At most one rendering per published snapshot, whatever the number of scrapes.
    EXPECT_LE(calls.load(), static_cast<int>(kSamples));
    EXPECT_EQ(static_cast<std::uint64_t>(calls.load()), cache.renders());
    auto last = store.latest();
    const auto before = cache.renders();
    EXPECT_EQ(*cache.get(last), "seq 200");
    EXPECT_EQ(*cache.get(last), "seq 200");
    EXPECT_LE(cache.renders(), before + 1);
    EXPECT_EQ(*cache.get(nullptr), "");
}

namespace {

// gunzip with zlib (windowBits 16+15: the gzip wrapper only).
std::string gunzip(const std::string& in) {
    z_stream z{};
    EXPECT_EQ(inflateInit2(&z, 16 + 15), Z_OK);
    std::string out(1 << 20, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    inflateEnd(&z);
    return out;
}

}  // namespace

TEST(RenderCache, GzipsEachSnapshotsTextOnceAndItInflatesBackToIt) {
    RenderCache cache([](const Snapshot& s) {
        std::string text;
        for (int i = 0; i < 2000; ++i)
            text += "iouscope_ring_sqes_total{ring=\"" + std::to_string(i) + "\"} " +
                    std::to_string(s.seq * i) + "\n";
        return text;
    });
    auto a = std::make_shared<Snapshot>();
    a->seq = 1;
    const auto text = cache.get(a);
    const auto packed = cache.gzip(a);
    EXPECT_EQ(gunzip(*packed), *text);
    EXPECT_LT(packed->size() * 5, text->size()) << "an exposition should shrink several-fold";
    EXPECT_EQ(cache.gzip(a), packed);  // the same bytes, not compressed again
    EXPECT_EQ(cache.compressions(), 1u);
    auto b = std::make_shared<Snapshot>();
    b->seq = 2;
    EXPECT_EQ(gunzip(*cache.gzip(b)), *cache.get(b));
    EXPECT_EQ(cache.compressions(), 2u);
    EXPECT_EQ(cache.renders(), 2u);
}
