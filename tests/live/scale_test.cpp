// Thousands of rings on one host: the cardinality policy (docs/ARCHITECTURE.md, "Cardinality")
// held exactly against the rings our own load generator created, with a daemon that folds beside
// one that does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace live;
using namespace std::chrono;

namespace {

constexpr int kIdle = 10'000;  // plain rings that submit one NOP, then nothing
constexpr int kBusy = 20;      // plain rings that keep submitting
constexpr int kSqpoll = 40;    // SQPOLL rings, each with its own SQ thread
constexpr int kLimit = 100;    // --rings.series-limit

// The families every ring has (sq_backlog and sqthread_share are an SQ thread's rings' only).
const char* const kRingFamilies[] = {"iouscope_ring_sqes_total", "iouscope_ring_cqes_total",
                                     "iouscope_ring_sq_entries",
                                     "iouscope_ring_start_time_seconds"};

// The ring ids ("pid:fd") of one process that have series of family `name`, by mode.
std::map<std::string, std::set<std::string>> ring_series(const std::vector<Series>& scrape,
                                                         const std::string& name, pid_t pid) {
    std::map<std::string, std::set<std::string>> out;
    for (const auto& s : scrape)
        if (s.name == name && s.labels.at("pid") == std::to_string(pid))
            out[s.labels.at("mode")].insert(s.labels.at("ring"));
    return out;
}

std::size_t count_of(const std::vector<Series>& scrape, const std::string& name, pid_t pid) {
    std::size_t n = 0;
    for (const auto& s : scrape) {
        auto p = s.labels.find("pid");
        n += s.name == name && p != s.labels.end() && p->second == std::to_string(pid);
    }
    return n;
}

// Plain-ring series of family `name` on the whole host, and the rings every process folds: the
// limit is the host's, and another program's rings may hold places too.
std::size_t host_plain_series(const std::vector<Series>& scrape, const std::string& name) {
    std::size_t n = 0;
    for (const auto& s : scrape) n += s.name == name && s.labels.at("mode") == "plain";
    return n;
}

double host_folded(const std::vector<Series>& scrape) {
    double n = 0;
    for (const auto& s : scrape)
        if (s.name == "iouscope_process_folded_rings") n += s.value;
    return n;
}

class Scale : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = live_tier_unavailable()) GTEST_SKIP() << *why;
    }
};

}  // namespace

TEST_F(Scale, PlainRingsBeyondTheLimitFoldExactlyAndTheBusiestKeepTheirSeries) {
    const int idle = in_vm_guest() ? 1'000 : kIdle;
    const auto t0 = steady_clock::now();
    // The idle rings do their NOP and are done before the daemons start: what they did is
    // known to be before either saw them.
    Child load({load_bin(), "--ring", "plain,count=1,n=" + std::to_string(idle), "--ring",
                "sqpoll,count=1,n=" + std::to_string(kSqpoll), "--hold", "inf"});
    const auto setup = read_load_rings(load, "ring", "done", seconds(120));
    ASSERT_EQ(setup.size(), static_cast<std::size_t>(idle + kSqpoll));
    const pid_t pid = setup.front().pid;
    const auto setup_s = duration<double>(steady_clock::now() - t0).count();
    Child busy_load(
        {load_bin(), "--ring", "plain,rate=200,n=" + std::to_string(kBusy), "--duration", "120s"});
    const auto busy_setup = read_load_rings(busy_load, "setup", "started", seconds(20));
    ASSERT_EQ(busy_setup.size(), static_cast<std::size_t>(kBusy));
    const pid_t busy_pid = busy_setup.front().pid;

    // Both started after the rings: at their first walk every ring is old, ranked by its counts
    // alone, so the busy rings (the most SQEs) take the first places.
    Daemon folding({"--rings.series-limit=" + std::to_string(kLimit)});
    Daemon every({"--rings.series-limit=0"});
    ASSERT_TRUE(folding.ready()) << folding.startup_log();
    ASSERT_TRUE(every.ready()) << every.startup_log();
    std::vector<Series> m;
    ASSERT_TRUE(eventually(seconds(20), [&] {
        m = folding.scrape();
        auto n = find_value(m, "iouscope_samples_total", {});
        return n && *n >= 3;
    }));

    // The daemon without a limit: every ring, and no fold. H, the host's plain rings, is ours
    // alone in CI; beside other programs' rings the counts below hold for the host's.
    const auto all = every.scrape();
    EXPECT_EQ(ring_series(all, "iouscope_ring_sqes_total", pid)["plain"].size(),
              static_cast<std::size_t>(idle));
    const auto host = host_plain_series(all, "iouscope_ring_sqes_total");
    ASSERT_GE(host, static_cast<std::size_t>(idle + kBusy));
    EXPECT_EQ(host_folded(all), 0);

    // The places: the busy rings (the most SQEs), then idle ones by address; never an SQPOLL
    // ring's, which always has series.
    const std::size_t ours = ring_series(m, "iouscope_ring_sqes_total", pid)["plain"].size();
    if (host == static_cast<std::size_t>(idle + kBusy)) {
        EXPECT_EQ(ours, std::size_t{kLimit - kBusy});
    }
    for (const char* family : kRingFamilies) {
        EXPECT_EQ(host_plain_series(m, family), static_cast<std::size_t>(kLimit)) << family;
        auto by_mode = ring_series(m, family, pid);
        EXPECT_EQ(by_mode["plain"].size(), ours) << family;
        EXPECT_EQ(by_mode["sqpoll"].size(), static_cast<std::size_t>(kSqpoll)) << family;
        EXPECT_EQ(ring_series(m, family, busy_pid)["plain"].size(), static_cast<std::size_t>(kBusy))
            << family;
    }
    EXPECT_EQ(count_of(m, "iouscope_ring_sqthread_share", pid), static_cast<std::size_t>(kSqpoll));
    EXPECT_EQ(count_of(m, "iouscope_ring_sq_backlog", pid), static_cast<std::size_t>(kSqpoll));
    EXPECT_EQ(count_of(m, "iouscope_sqthread_cpu_seconds_total", pid),
              static_cast<std::size_t>(kSqpoll));
    const std::map<std::string, std::string> of_load{{"pid", std::to_string(pid)}};
    EXPECT_EQ(find_value(m, "iouscope_process_folded_rings", of_load), idle - ours);
    EXPECT_EQ(host_folded(m), host - kLimit);
    EXPECT_FALSE(
        find_value(m, "iouscope_process_folded_rings", {{"pid", std::to_string(busy_pid)}}));
    // The folded rings did their one NOP before either daemon saw them.
    EXPECT_EQ(find_value(m, "iouscope_process_folded_ring_sqes_total", of_load), 0);
    EXPECT_EQ(find_value(m, "iouscope_process_folded_ring_cqes_total", of_load), 0);
    EXPECT_EQ(find_value(m, "iouscope_ring_series_limit", {}), kLimit);
    const auto folded_bytes = http_get(folding.url()).body.size();
    const auto every_bytes = http_get(every.url()).body.size();

    // The JSON API still lists every ring, the folded ones marked.
    const auto api = http_get(base_url(folding) + "/api/v1/snapshot");
    ASSERT_EQ(api.status, 200);
    const auto snap = nlohmann::json::parse(api.body);
    std::size_t rings = 0, folded = 0;
    for (const auto& r : snap["rings"])
        if (r["pid"] == pid) {
            ++rings;
            folded += r["folded"].get<bool>();
        }
    EXPECT_EQ(rings, static_cast<std::size_t>(idle + kSqpoll));
    EXPECT_EQ(folded, idle - ours);

    // New busy rings in a third process take the places of rings that did nothing since the
    // daemon saw them, at once; the busy rings keep theirs.
    Child late({load_bin(), "--ring", "plain,rate=500,n=10", "--duration", "60s"});
    const auto late_setup = read_load_rings(late, "setup", "started", seconds(20));
    ASSERT_EQ(late_setup.size(), 10u);
    const pid_t late_pid = late_setup.front().pid;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        m = folding.scrape();
        return ring_series(m, "iouscope_ring_sqes_total", late_pid)["plain"].size() == 10;
    }));
    EXPECT_EQ(host_plain_series(m, "iouscope_ring_sqes_total"), static_cast<std::size_t>(kLimit));
    EXPECT_EQ(ring_series(m, "iouscope_ring_sqes_total", busy_pid)["plain"].size(),
              static_cast<std::size_t>(kBusy));
    EXPECT_EQ(host_folded(m), host + 10 - kLimit);
    EXPECT_EQ(find_value(m, "iouscope_process_folded_ring_sqes_total", of_load), 0);
    EXPECT_FALSE(
        find_value(m, "iouscope_process_folded_rings", {{"pid", std::to_string(late_pid)}}));

    std::printf(
        "scale: %d rings set up in %.1f s; /metrics %zu bytes with --rings.series-limit=%d, "
        "%zu with 0\n",
        idle + kSqpoll, setup_s, folded_bytes, kLimit, every_bytes);
}

// Light walks (model/ring_carry.hpp): between full walks, plain rings keep the counts the last
// full walk read, exactly; a new ring, SQPOLL or plain, is read by the next walk whatever the
// period; a closed plain ring goes at the next full walk. Ground truth is the load's own counts.
TEST_F(Scale, LightWalksCarryPlainRingsExactlyAndReadNewRingsAtOnce) {
    constexpr int kOld = 200, kNew = 20, kNops = 5;
    Child old_load(
        {load_bin(), "--ring", "plain,count=2,n=" + std::to_string(kOld), "--hold", "inf"});
    const auto old_rings = read_load_rings(old_load, "ring", "done", seconds(60));
    ASSERT_EQ(old_rings.size(), static_cast<std::size_t>(kOld));
    const std::string old_pid = std::to_string(old_rings.front().pid);
    Daemon d({"--sample.interval=200ms", "--rings.plain-interval=4s", "--rings.series-limit=0"});
    ASSERT_TRUE(d.ready()) << d.startup_log();

    // Light walks carry every old ring: the host's plain rings, ours alone in CI.
    std::vector<Series> m;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        m = d.scrape();
        const auto carried = find_value(m, "iouscope_rings_carried", {});
        return carried && *carried >= kOld;
    })) << "no light walk carried the old rings";
    const auto host = host_plain_series(m, "iouscope_ring_sqes_total");
    if (host == static_cast<std::size_t>(kOld)) {
        EXPECT_EQ(find_value(m, "iouscope_rings_carried", {}), kOld);
    }
    for (const auto& r : old_rings)
        EXPECT_EQ(find_value(m, "iouscope_ring_sqes_total", {{"ring", r.id()}}), r.sqes) << r.id();

    // New rings, between full walks: read by the next walk, a second at most, where the next
    // full walk can be four away.
    const auto born = steady_clock::now();
    Child new_load({load_bin(), "--ring", "sqpoll,count=" + std::to_string(kNops), "--ring",
                    "plain,count=" + std::to_string(kNops) + ",n=" + std::to_string(kNew), "--hold",
                    "inf"});
    const auto new_rings = read_load_rings(new_load, "ring", "done", seconds(30));
    ASSERT_EQ(new_rings.size(), static_cast<std::size_t>(kNew + 1));
    const auto seen_all = [&](bool exact) {
        m = d.scrape();
        for (const auto& r : new_rings) {
            const auto v = find_value(m, "iouscope_ring_sqes_total", {{"ring", r.id()}});
            EXPECT_TRUE(!v || *v <= r.sqes) << r.id() << " counted more SQEs than it submitted";
            if (!v || (exact && *v != r.sqes)) return false;
        }
        return true;
    };
    ASSERT_TRUE(eventually(seconds(1), [&] { return seen_all(false); }))
        << "new rings waited for a full walk";
    const auto seen = steady_clock::now();
    const auto sqpoll = new_rings.front();
    ASSERT_TRUE(eventually(seconds(1), [&] {
        m = d.scrape();
        return find_value(m, "iouscope_ring_sqes_total", {{"ring", sqpoll.id()}}) ==
               static_cast<double>(sqpoll.sqes);
    })) << "an SQPOLL ring is read by every walk";
    // Their last NOPs may have come after the walk that first read them: every count is exact
    // by the next full walk.
    ASSERT_TRUE(eventually(seconds(6), [&] { return seen_all(true); }));
    std::printf(
        "light walks: new rings seen within %lld ms, exact within %lld ms\n",
        static_cast<long long>(duration_cast<milliseconds>(seen - born).count()),
        static_cast<long long>(duration_cast<milliseconds>(steady_clock::now() - born).count()));

    // A closed plain ring goes at the next full walk: the period and a sample at most.
    old_load.signal(SIGKILL);
    old_load.wait(seconds(5));
    const auto killed = steady_clock::now();
    EXPECT_TRUE(eventually(seconds(5), [&] {
        return !find_value(d.scrape(), "iouscope_ring_sqes_total", {{"pid", old_pid}});
    })) << "old rings outlived the period";
    std::printf(
        "light walks: closed plain rings gone after %lld ms (--rings.plain-interval=4s)\n",
        static_cast<long long>(duration_cast<milliseconds>(steady_clock::now() - killed).count()));
}
