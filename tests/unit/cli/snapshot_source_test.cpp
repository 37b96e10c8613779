// `iouscope top`'s snapshot source: a worker thread fetches while the drawing loop reads the
// latest snapshot and the last error. Run under ThreadSanitizer by the test command, where the
// unguarded error string of before was a data race that failed this test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cli/top_source.hpp"

using namespace iouscope;
using namespace std::chrono;

namespace {

// Fails every other fetch, with a message long enough to be heap-allocated.
class FlakySource : public top::SnapshotSource {
public:
    FlakySource() : SnapshotSource(0, "test") { start(); }
    ~FlakySource() override { stop(); }
    std::atomic<std::uint64_t> fetches{0};

protected:
    bool fetch(std::string& error) override {
        const auto n = ++fetches;
        if (n % 2) {
            error = "fetch " + std::to_string(n) + " failed: the daemon did not answer in time";
            return false;
        }
        auto s = std::make_shared<Snapshot>();
        s->seq = n;
        store_.publish(std::move(s));
        return true;
    }
};

}  // namespace

TEST(SnapshotSource, ReadersRaceTheWorkerSafely) {
    FlakySource src;
    const auto end = steady_clock::now() + milliseconds(300);
    std::uint64_t last_seq = 0;
    std::size_t errors_seen = 0;
    while (steady_clock::now() < end) {
        const std::string e = src.last_error();
        if (!e.empty()) {
            ++errors_seen;
            EXPECT_NE(e.find("failed"), std::string::npos) << e;
        }
        if (auto s = src.latest()) {
            EXPECT_GE(s->seq, last_seq);
            EXPECT_EQ(s->seq % 2, 0u);
            last_seq = s->seq;
        }
    }
    EXPECT_GT(src.fetches.load(), 10u);
    EXPECT_GT(errors_seen, 0u);
    EXPECT_GT(last_seq, 0u);
}

namespace {

// Counts fetches; started as connect_daemon starts it, after a first fetch of its own, or not.
class CountingSource : public top::SnapshotSource {
public:
    explicit CountingSource(bool fetched) : SnapshotSource(3600, "test") { start(fetched); }
    ~CountingSource() override { stop(); }
    std::atomic<int> fetches{0};

protected:
    bool fetch(std::string&) override {
        ++fetches;
        return true;
    }
};

}  // namespace

// After connect_daemon's own fetch the worker waits an interval before the next: `top -b -n 1`
// and `advise` exited only once a second fetch, 11 MB at 10,000 rings, had come in for nothing.
// Stopping ends the wait at once.
TEST(SnapshotSource, AfterAFetchTheWorkerWaitsAnIntervalAndStopsAtOnce) {
    const auto start = steady_clock::now();
    {
        CountingSource src(true);
        std::this_thread::sleep_for(milliseconds(200));
        EXPECT_EQ(src.fetches.load(), 0);
    }
    {
        CountingSource src(false);
        const auto deadline = steady_clock::now() + seconds(5);
        while (src.fetches.load() == 0 && steady_clock::now() < deadline)
            std::this_thread::sleep_for(milliseconds(5));
        EXPECT_EQ(src.fetches.load(), 1);
    }
    EXPECT_LT(steady_clock::now() - start, seconds(3));
}
