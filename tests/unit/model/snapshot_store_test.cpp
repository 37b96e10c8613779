// The sampler's hand-over to its readers, under concurrent use. Run under ThreadSanitizer by the
// test command (build-tsan), where a data race fails the test binary.
#include "model/snapshot_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace iouscope;

TEST(SnapshotStore, ReadersSeeWholeSnapshotsInOrderWhileOneWriterPublishes) {
    SnapshotStore store;
    constexpr std::uint64_t kSnapshots = 5000;
    std::atomic<bool> done{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r)
        readers.emplace_back([&] {
            std::uint64_t last = 0;
            while (!done.load()) {
                auto s = store.latest();
                if (!s) continue;
                // A snapshot is immutable once published: its parts agree, and seq never goes back.
                if (s->seq < last || s->rings.size() != s->seq % 7 || s->hostname != "h") ++bad;
                last = s->seq;
            }
        });
    for (std::uint64_t i = 1; i <= kSnapshots; ++i) {
        auto s = std::make_shared<Snapshot>();
        s->seq = i;
        s->hostname = "h";
        s->rings.resize(i % 7);
        store.publish(std::move(s));
    }
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(bad.load(), 0);
    ASSERT_NE(store.latest(), nullptr);
    EXPECT_EQ(store.latest()->seq, kSnapshots);
}
