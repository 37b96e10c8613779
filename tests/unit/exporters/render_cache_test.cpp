// The exposition cache: one rendering per snapshot, however many scrapes and threads ask.
// Run under ThreadSanitizer by the test command (build-tsan).
#include "exporters/render_cache.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "model/snapshot_store.hpp"

using namespace uringscope;

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
