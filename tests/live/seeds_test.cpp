// Live tests of the seeds kernel's io_uring features (tests/vm/kernels/seeds): the load generator
// drives their setup flags, and the daemon, top and the advisor read what they change. Each test
// asks the kernel's BTF for the patch's own fields, never its version: on a kernel without a
// patch, the load generator must refuse its flag by name and the daemon must not claim it.
// `tests/vm/run --kernel seeds` runs them where every patch is present.
#include <bpf/btf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "collect/btf_member.hpp"
#include "harness.hpp"

using namespace live;
using namespace std::chrono;
using nlohmann::json;

namespace {

// A member of a struct in the running kernel's BTF.
bool kernel_has_member(const std::string& type, const std::string& member) {
    struct btf* b = btf__load_vmlinux_btf();
    const bool found = iouscope::btf_has_member(b, type, member);
    btf__free(b);
    return found;
}

// Each seed's flag, the field its patch adds to io_sq_data, and the load generator's spelling.
struct SeedFlag {
    const char* spec;    // a ring spec that uses the flag
    const char* member;  // io_sq_data's field that only the patch adds
    const char* named;   // how the load generator names it when the kernel lacks it
};
const SeedFlag kFlags[] = {
    {"sqpoll,idle_ns=50000,count=1000", "idle_mode", "idle_ns= (IORING_SETUP_IDLE_NS"},
    {"sqpoll,percpu,cpu=1,count=1000", "percpu", "percpu (IORING_SETUP_SQPOLL_PERCPU"},
    {"sqpoll,stats,count=1000", "enable_work_time_stat", "stats (IORING_SETUP_SQTHREAD_STATS"},
};

json snapshot(Daemon& d) {
    auto r = http_get(base_url(d) + "/api/v1/snapshot");
    try {
        return json::parse(r.body);
    } catch (const json::exception&) {
        return json::object();
    }
}

const json* find_by(const json& list, const char* key, const json& value) {
    for (const auto& x : list)
        if (x.value(key, json()) == value) return &x;
    return nullptr;
}

// Two snapshots of consecutive samples (seq n and n+1) that both satisfy `pred`; nulls when
// none came within `timeout`. The API is polled faster than the daemon samples.
std::pair<json, json> consecutive_snapshots(Daemon& d, const std::function<bool(const json&)>& pred,
                                            milliseconds timeout) {
    json s0, s1;
    eventually(timeout, [&] {
        json s = snapshot(d);
        if (!pred(s)) return false;
        if (!s0.is_null() && s.value("seq", 0) == s0.value("seq", 0) + 1) {
            s1 = s;
            return true;
        }
        if (s0.is_null() || s.value("seq", 0) != s0.value("seq", 0)) s0 = s;
        std::this_thread::sleep_for(milliseconds(50));
        return false;
    });
    return {s0, s1};
}

// Skips (from the test body: GTEST_SKIP returns from the function it is in) where the kernel lacks
// the patch that adds io_sq_data's `member`.
#define REQUIRE_SEED(member, what)                                                       \
    do {                                                                                 \
        if (!kernel_has_member("io_sq_data", member))                                    \
            GTEST_SKIP() << "this kernel lacks " << what << " (no io_sq_data." << member \
                         << " in its BTF); tests/vm/run --kernel seeds has it";          \
    } while (0)

class Seeds : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = live_tier_unavailable()) GTEST_SKIP() << *why;
    }
    std::unique_ptr<Daemon> daemon(std::vector<std::string> args) {
        auto d = std::make_unique<Daemon>(std::move(args));
        EXPECT_TRUE(d->ready()) << d->startup_log();
        return d;
    }
};

}  // namespace

// Point 2 of the seeds work: every flag runs where its patch is, and is refused by name where
// it is not, with a non-zero exit instead of a bare "Invalid argument".
TEST_F(Seeds, TheLoadGeneratorDrivesEachFlagOrNamesTheMissingPatch) {
    for (const auto& f : kFlags) {
        Child load({load_bin(), "--ring", f.spec}, true);
        const std::string out = load.drain(seconds(60));
        const auto rc = load.wait(seconds(10));
        if (kernel_has_member("io_sq_data", f.member)) {
            EXPECT_EQ(rc, std::optional<int>(0)) << f.spec << ": " << out;
            EXPECT_NE(out.find("sqes=1000 cqes=1000"), std::string::npos) << f.spec << ": " << out;
        } else {
            EXPECT_NE(rc, std::optional<int>(0)) << f.spec << ": " << out;
            EXPECT_NE(out.find(std::string("this kernel does not have ") + f.named),
                      std::string::npos)
                << f.spec << ": " << out;
        }
    }
}

// Seed 002: a 50 us ring's idle is exported exactly, in seconds, and the kernel's support is
// known from its BTF for every thread, including one whose rings ask in milliseconds.
TEST_F(Seeds, NanosecondIdleIsExactAndKnownBeforeAnyRingAsks) {
    const bool ns_kernel = kernel_has_member("io_sq_data", "idle_mode");
    auto d = daemon({"--sample.interval=200ms"});
    std::vector<std::string> argv{load_bin(), "--ring", "sqpoll,idle=10,rate=100"};
    if (ns_kernel) argv.insert(argv.end(), {"--ring", "sqpoll,idle_ns=50000,rate=100"});
    argv.insert(argv.end(), {"--duration", "10s"});
    Child load(argv);
    auto setup = read_load_rings(load, "setup", "started", seconds(20));
    ASSERT_EQ(setup.size(), ns_kernel ? 2u : 1u);

    json snap;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        snap = snapshot(*d);
        return find_by(snap.value("threads", json::array()), "tid", setup[0].sq_thread) &&
               (!ns_kernel ||
                find_by(snap.value("threads", json::array()), "tid", setup[1].sq_thread));
    })) << snap.dump();
    EXPECT_EQ(snap.value("idle_ns_supported", !ns_kernel), ns_kernel);
    const json* ms = find_by(snap["threads"], "tid", setup[0].sq_thread);
    EXPECT_FALSE(ms->value("idle_ns_granular", true));
    if (!ns_kernel) return;
    const json* ns = find_by(snap["threads"], "tid", setup[1].sq_thread);
    EXPECT_TRUE(ns->value("idle_ns_granular", false));
    const auto idle = find_value(d->scrape(), "iouscope_sqthread_idle_setting_seconds",
                                 {{"sq_thread", std::to_string(setup[1].sq_thread)}});
    ASSERT_TRUE(idle.has_value());
    EXPECT_DOUBLE_EQ(*idle, 50000 / 1e9);
}

// Seed 000: rings of two processes on CPU 1's shared thread are one thread, labelled shared,
// with no tenant's pid; each ring's share and the thread's fairness are those of the rings'
// own SQE counts between two samples, and the counts end equal to the load generators'.
TEST_F(Seeds, APerCpuThreadSharedByTwoProcessesIsOneSharedThread) {
    REQUIRE_SEED("percpu", "IORING_SETUP_SQPOLL_PERCPU");
    auto d = daemon({"--sample.interval=500ms"});
    Child a({load_bin(), "--ring", "sqpoll,percpu,cpu=1,rate=1500,count=12000", "--hold", "inf"});
    auto sa = read_load_rings(a, "setup", "started", seconds(20));
    Child b({load_bin(), "--ring", "sqpoll,percpu,cpu=1,rate=500,count=4000", "--hold", "inf"});
    auto sb = read_load_rings(b, "setup", "started", seconds(20));
    ASSERT_EQ(sa.size(), 1u);
    ASSERT_EQ(sb.size(), 1u);
    ASSERT_GT(sa[0].sq_thread, 0);
    ASSERT_EQ(sa[0].sq_thread, sb[0].sq_thread) << "percpu rings on one CPU share one thread";
    const int tid = sa[0].sq_thread;

    // Two consecutive samples while both submit: shares and fairness from their SQE deltas.
    auto both = [&](const json& s) {
        return find_by(s.value("rings", json::array()), "id", sa[0].id()) &&
               find_by(s.value("rings", json::array()), "id", sb[0].id());
    };
    auto [s0, s1] = consecutive_snapshots(*d, both, seconds(15));
    ASSERT_FALSE(s1.is_null()) << "no two consecutive samples with both rings";
    const json* t = find_by(s1["threads"], "tid", tid);
    ASSERT_NE(t, nullptr) << s1.dump();
    EXPECT_TRUE(t->value("shared_percpu", false));
    EXPECT_EQ(t->value("rings", 0), 2);
    double da = 0, db = 0;
    for (auto [ring, delta] : {std::pair{sa[0], &da}, std::pair{sb[0], &db}}) {
        const json* r0 = find_by(s0["rings"], "id", ring.id());
        const json* r1 = find_by(s1["rings"], "id", ring.id());
        ASSERT_TRUE(r0 && r1) << ring.id();
        *delta = r1->value("sqes_total", 0.0) - r0->value("sqes_total", 0.0);
    }
    ASSERT_GT(da + db, 0);
    EXPECT_NEAR(find_by(s1["rings"], "id", sa[0].id())->value("sqthread_share", -1.0),
                da / (da + db), 1e-9);
    EXPECT_NEAR(find_by(s1["rings"], "id", sb[0].id())->value("sqthread_share", -1.0),
                db / (da + db), 1e-9);
    if (da > 0 && db > 0) {  // both had demand: Jain's index over the two
        EXPECT_NEAR(t->value("fairness", -1.0), (da + db) * (da + db) / (2 * (da * da + db * db)),
                    1e-9);
    }
    std::printf("shared thread %d: SQEs %g and %g in one interval, fairness %.4f\n", tid, da, db,
                t->value("fairness", -1.0));

    // The series: shared="percpu", no pid; each ring keeps its own pid.
    auto ra = read_load_rings(a, "ring", "done", seconds(60));
    auto rb = read_load_rings(b, "ring", "done", seconds(60));
    ASSERT_EQ(ra.size(), 1u);
    ASSERT_EQ(rb.size(), 1u);
    std::vector<Series> m;
    EXPECT_TRUE(eventually(seconds(5), [&] {
        m = d->scrape();
        return find_value(m, "iouscope_ring_sqes_total", {{"ring", ra[0].id()}}) == 12000.0 &&
               find_value(m, "iouscope_ring_sqes_total", {{"ring", rb[0].id()}}) == 4000.0;
    }));
    EXPECT_EQ(find_value(m, "iouscope_ring_sqes_total",
                         {{"ring", rb[0].id()}, {"pid", std::to_string(rb[0].pid)}}),
              std::optional<double>(4000));
    EXPECT_EQ(
        find_value(
            m, "iouscope_sqthread_rings",
            {{"sq_thread", std::to_string(tid)}, {"shared", "percpu"}, {"pid", ""}, {"comm", ""}}),
        std::optional<double>(2));

    // top shows the thread once, as shared.
    Child top({cli_bin(), "top", "-b", "-n", "1", "--width", "200", "--daemon", base_url(*d)});
    const std::string screen = top.drain(seconds(20));
    const std::regex row("(^|\n) *" + std::to_string(tid) + " ");
    const auto rows = std::distance(std::sregex_iterator(screen.begin(), screen.end(), row),
                                    std::sregex_iterator());
    EXPECT_EQ(rows, 1) << screen;
    // Neither the creator's pid nor its comm: PID says percpu, COMM the CPU it serves.
    EXPECT_TRUE(std::regex_search(
        screen, std::regex("(^|\n) *" + std::to_string(tid) + " +percpu +cpu 1 ")))
        << screen;
}

// Seed 004: the thread's work time counts only once a ring asks. When a second process's ring
// turns it on, the work source switches from the estimate to the kernel's, and work keeps
// growing from there instead of freezing until work_time overtakes the estimate's history.
TEST_F(Seeds, StatsTurnedOnLateSwitchesTheWorkSourceAndWorkKeepsCounting) {
    REQUIRE_SEED("enable_work_time_stat", "IORING_SETUP_SQTHREAD_STATS");
    REQUIRE_SEED("percpu", "IORING_SETUP_SQPOLL_PERCPU");
    auto d = daemon({"--sample.interval=500ms"});
    Child a({load_bin(), "--ring", "sqpoll,percpu,cpu=1,rate=2000", "--duration", "40s"});
    auto sa = read_load_rings(a, "setup", "started", seconds(20));
    ASSERT_EQ(sa.size(), 1u);
    const std::string tid = std::to_string(sa[0].sq_thread);
    auto source = [&](const char* s) {
        return find_value(d->scrape(), "iouscope_sqthread_work_time_source",
                          {{"sq_thread", tid}, {"source", s}}) == 1.0;
    };
    ASSERT_TRUE(eventually(seconds(10), [&] { return source("estimate"); }));
    std::this_thread::sleep_for(seconds(3));  // an estimate's history worth freezing on

    // Unpaced: the thread is busy, so work_time grows by much more than the tick's resolution.
    Child b({load_bin(), "--ring", "sqpoll,percpu,cpu=1,stats,batch=8", "--duration", "30s"});
    auto sb = read_load_rings(b, "setup", "started", seconds(20));
    ASSERT_EQ(sb.size(), 1u);
    ASSERT_EQ(std::to_string(sb[0].sq_thread), tid);
    ASSERT_TRUE(eventually(seconds(10), [&] { return source("kernel"); }));

    // Work, the kernel's own work_time, and what they are made of (both rings' SQEs, the
    // thread's CPU), from one scrape each time.
    struct Reading {
        double work, kernel, sqes_a, sqes_b, cpu;
    };
    auto read = [&] {
        const auto m = d->scrape();
        auto v = [&](const char* name, std::map<std::string, std::string> l) {
            return find_value(m, name, l).value_or(-1);
        };
        return Reading{v("iouscope_sqthread_work_seconds_total", {{"sq_thread", tid}}),
                       v("iouscope_sqthread_work_by_source_seconds_total",
                         {{"sq_thread", tid}, {"source", "kernel"}}),
                       v("iouscope_ring_sqes_total", {{"ring", sa[0].id()}}),
                       v("iouscope_ring_sqes_total", {{"ring", sb[0].id()}}),
                       v("iouscope_sqthread_cpu_seconds_total", {{"sq_thread", tid}})};
    };
    // At least 4 s, and on until work_time has moved by 50 ms or 12 s have passed (load b
    // runs for 30 s, of which setup and the switch took at most 10 s above).
    const auto first = read();
    auto prev = first;
    int seconds_read = 0;
    while (seconds_read < 4 || (prev.kernel - first.kernel < 0.05 && seconds_read < 12)) {
        std::this_thread::sleep_for(seconds(1));
        ++seconds_read;
        const auto now = read();
        EXPECT_GE(now.work, prev.work) << "work went backwards";
        prev = now;
    }
    const double grew = prev.work - first.work, kernel = prev.kernel - first.kernel;
    std::printf(
        "after the switch, in %d s: work +%.4f s, the kernel's work_time +%.4f s; thread CPU "
        "+%.3f s, SQEs +%.0f (ring a, paced) and +%.0f (ring b, unpaced)\n",
        seconds_read, grew, kernel, prev.cpu - first.cpu, prev.sqes_a - first.sqes_a,
        prev.sqes_b - first.sqes_b);
    // work_time adds getrusage() deltas taken around each pass's work, and getrusage's times
    // move by whole ticks (scaled, and held back where the scaling would go backwards): a thread
    // busy all along (12.35 s of CPU in 12 s, 809,000 SQEs) gained from 19 to 290 ms of it in
    // the TCG guest, 1.7 ms in 4 s once. Any movement tells following from freezing, which
    // would leave work flat while work_time moves.
    EXPECT_GT(kernel, 0.001) << "the busy thread's work_time did not move";
    // Frozen, work would not move until work_time overtook the estimate's history.
    EXPECT_NEAR(grew, kernel, 0.01 * kernel) << "work does not follow the kernel's work_time";
}

// Seed 002 in the advisor: a thread that spins through 20 ms gaps with a 1 s idle is told to use
// a sub-millisecond idle in nanoseconds, which only this kernel can take.
TEST_F(Seeds, TheAdvisorRecommendsNanosecondIdleWhereTheKernelTakesIt) {
    REQUIRE_SEED("idle_mode", "IORING_SETUP_IDLE_NS");
    auto d = daemon({"--sample.interval=500ms", "--probes.deep", "--advise.window=6s"});
    Child load({load_bin(), "--ring", "sqpoll,idle=1000,rate=50", "--duration", "60s"});
    auto setup = read_load_rings(load, "setup", "started", seconds(20));
    ASSERT_EQ(setup.size(), 1u);
    json f;
    const bool found = eventually(seconds(40), [&] {
        Child c({cli_bin(), "advise", "--daemon", base_url(*d), "--json"});
        const std::string out = c.drain(seconds(20));
        c.wait(seconds(5));
        try {
            for (const auto& x : json::parse(out).value("findings", json::array()))
                if (x["id"] == "sq_idle_too_long" && x["sq_thread"] == setup[0].sq_thread) f = x;
        } catch (const json::exception&) {
        }
        if (f.is_null()) std::this_thread::sleep_for(seconds(1));
        return !f.is_null();
    });
    ASSERT_TRUE(found) << "no sq_idle_too_long finding for the spinning thread";
    const std::string change = f.value("change", "");
    EXPECT_NE(change.find("(ns) with IORING_SETUP_IDLE_NS in flags"), std::string::npos) << change;
    double rec = -1;
    for (const auto& p : f["curve"])
        if (p.value("recommended", false)) rec = p.value("setting_seconds", -1.0);
    EXPECT_GT(rec, 0);
    EXPECT_LT(rec, 1e-3) << change;
    std::printf("advice: %s\n", change.c_str());
}
