// render_text writes the exposition by hand (exporters/exposition, exporters/text_exposition);
// prometheus-cpp's TextSerializer over to_metric_families is the reference it must match byte for
// byte: the fixtures, snapshots generated with awkward values (NaN, infinities, -0, integers
// above 2^53, hostile label values), and numbers and label values one by one.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "exporters/exposition.hpp"
#include "exporters/prometheus_exporter.hpp"
#include "tests/unit/exporters/snapshots.hpp"

using namespace iouscope;

namespace {

std::string serialized(const std::vector<prometheus::MetricFamily>& families) {
    std::ostringstream os;
    prometheus::TextSerializer{}.Serialize(os, families);
    return os.str();
}

std::string reference(const Snapshot& s) {
    return serialized(to_metric_families(s));
}

// The same families written by hand and by TextSerializer: `add` adds them to an Exposition.
template <class Add>
std::pair<std::string, std::string> both_ways(Add add) {
    Exposition text(ExpositionTarget::text), families(ExpositionTarget::families);
    add(text);
    add(families);
    return {text.text(), serialized(families.families())};
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTwo53 = 9007199254740992.0;
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// Values chosen to fall on every edge of TextSerializer's printing: NaN, the infinities, both
// zeros, integers either side of 2^53 and of the 16 digits %.16g keeps, the tiniest and largest
// doubles, and fractions that %.16g rounds.
// clang-format off
const double kAwkwardReals[] = {
    kNan, kInf, -kInf, 0.0, -0.0, 1, -1, 0.1, 1.0 / 3, -2.5, 1e-9, 1e-5, 1e-4, 0.30000000000000004,
    123456.789, 1765012345.678901, 1e15, 9999999999999998.0, 1e16, 1e17, kTwo53 - 1, kTwo53,
    kTwo53 + 2, 9223372036854775808.0, 18446744073709551616.0, 123456789012345678.0, 1e21, 1e300,
    -1e300, 5e-324, 2.2250738585072014e-308, std::numeric_limits<double>::max(),
    -std::numeric_limits<double>::max(), 0.5e-6, 2.048e-06, 8.589934592};
const std::uint64_t kAwkwardCounts[] = {
    0, 1, 9, 10, (std::uint64_t{1} << 53) - 1, std::uint64_t{1} << 53,
    (std::uint64_t{1} << 53) + 1, 9999999999999999, 10000000000000000, 10000000000000001,
    std::uint64_t{1} << 63, kU64Max};
// Label values: quotes, backslashes, newlines, invalid UTF-8 (a lone byte, a surrogate, an
// overlong, a cut sequence, beyond U+10FFFF) and valid UTF-8.
const char* const kAwkwardTexts[] = {
    "", "db", "iouscope-load", "quote\"d", "back\\slash", "new\nline", "\\\"\n", "tab\there",
    "\xff", "\xfe\xff", "caf\xc3\xa9", "\xed\xa0\x80", "\xc0\xaf", "\xe2\x82",
    "\xf4\x90\x80\x80", "a\"b\\c\nd\xff", "sqpoll", "plain", "\xf0\x9f\x98\x80"};
// clang-format on

// Awkward values, drawn at random from the lists above or from every double's bits.
class Awkward {
public:
    explicit Awkward(std::uint64_t seed) : rng_(seed) {}
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
    bool flag() { return rng_() & 1; }
    double real() {
        if (below(4) == 0) {  // any double at all, NaNs and infinities included
            const std::uint64_t bits = rng_();
            double v;
            std::memcpy(&v, &bits, sizeof v);
            return v;
        }
        return kAwkwardReals[below(std::size(kAwkwardReals))];
    }
    std::uint64_t count() {
        return below(4) == 0 ? rng_() : kAwkwardCounts[below(std::size(kAwkwardCounts))];
    }
    std::uint32_t u32() { return static_cast<std::uint32_t>(count()); }
    std::int32_t i32() { return static_cast<std::int32_t>(count()); }
    std::string text() { return kAwkwardTexts[below(std::size(kAwkwardTexts))]; }
    LatencyHistogram histogram() {
        LatencyHistogram h;
        for (std::size_t i = below(6); i > 0; --i) {
            h.upper_bounds_s.push_back(real());
            h.cumulative.push_back(count());
        }
        h.count = count();
        h.sum_s = real();
        return h;
    }

private:
    std::mt19937_64 rng_;
};

ThreadSnapshot awkward_thread(Awkward& a) {
    ThreadSnapshot t;
    t.tid = a.i32();
    t.pid = a.u32();
    t.comm = a.text();
    t.start_time_seconds = a.real();
    t.cpu_seconds = a.real();
    t.work_seconds = a.real();
    t.spin_seconds = a.real();
    t.sleep_seconds = a.real();
    t.work_source = static_cast<WorkSource>(a.below(4));
    for (std::size_t i = a.below(4); i > 0; --i)
        t.work_by_source_seconds.emplace_back(static_cast<WorkSource>(a.below(4)), a.real());
    t.sleeps = a.count();
    t.blocks = a.count();
    t.block_seconds = a.real();
    t.spin_model = a.text();
    t.split_known = a.flag();
    t.wakeups = a.count();
    t.untraced_wakeups = a.count();
    t.voluntary_switches = a.count();
    t.involuntary_switches = a.count();
    t.state = a.u32() % 3;
    t.sq_cpu = a.i32();
    t.pinned = a.flag();
    t.idle_setting_seconds = a.real();
    t.shared_percpu = a.below(4) == 0;
    t.wake_latency = a.histogram();
    t.rings = a.count();
    t.fairness = a.real();
    for (std::size_t i = a.below(3); i > 0; --i)
        t.wakers.push_back({a.u32(), a.text(), a.count(), a.flag() ? a.text() : ""});
    t.has_passes = a.flag();
    t.loop_passes = a.count();
    t.busy_passes = a.count();
    t.pass_work_seconds = a.real();
    t.task_work_seconds = a.real();
    return t;
}

IopollSnapshot awkward_iopoll(Awkward& a) {
    IopollSnapshot io;
    io.caller = a.text();
    io.calls = a.count();
    io.empty = a.count();
    io.completions = a.count();
    io.seconds = a.real();
    return io;
}

RingSnapshot awkward_ring(Awkward& a) {
    RingSnapshot r;
    r.id = a.text();
    r.start_time_seconds = a.real();
    r.pid = a.u32();
    r.comm = a.text();
    r.mode = a.text();
    r.sq_thread = a.i32();
    r.sq_entries = a.u32();
    r.sqes_total = a.count();
    r.cqes_total = a.count();
    r.sq_backlog = a.u32();
    r.sqthread_share = a.real();
    r.has_sqthread_work = a.flag();
    r.sqthread_work_seconds = a.real();
    r.sqthread_submit_seconds = a.real();
    r.sqthread_batches = a.count();
    for (std::size_t i = a.below(3); i > 0; --i) r.iopoll.push_back(awkward_iopoll(a));
    r.folded = a.below(4) == 0;
    return r;
}

DeviceSnapshot awkward_device(Awkward& a) {
    DeviceSnapshot d;
    d.name = a.text();
    d.polled = a.count();
    d.irq = a.count();
    d.polled_intent_irq = a.count();
    d.polls = a.count();
    d.latency = a.histogram();
    d.iopoll_without_poll_queues = a.flag();
    d.has_cqes = a.flag();
    d.cqes = a.count();
    d.cqe_delay = a.histogram();
    return d;
}

void awkward_probes(Awkward& a, Snapshot& s) {
    for (std::size_t i = a.below(4); i > 0; --i)
        s.probes.push_back(
            {a.text(), a.text(), a.flag(), "", a.count(), a.flag() ? a.text() : "", a.flag()});
    for (std::size_t i = a.below(3); i > 0; --i) {
        ProbeCoverage c;
        c.probe = a.text();
        c.probe_events = a.count();
        c.iterator_events = a.count();
        c.ratio = a.flag() ? -1 : a.real();
        s.coverage.push_back(c);
    }
    if (a.flag())
        s.gap_sampling = GapSampling{a.real(),  a.real(),  a.real(),  a.real(), a.real(),
                                     a.count(), a.count(), a.count(), a.flag()};
}

void awkward_daemon(Awkward& a, Snapshot& s) {
    for (auto* m : {&s.rings_created_by_mode, &s.rings_short_lived_by_mode, &s.map_overflows,
                    &s.map_entries, &s.map_capacity})
        for (std::size_t i = a.below(3); i > 0; --i) m->emplace_back(a.text(), a.count());
    for (std::size_t i = a.below(3); i > 0; --i) s.host_visible.emplace_back(a.text(), a.flag());
    s.rings_replaced = a.count();
    s.threads_replaced = a.count();
    s.walks_incomplete = a.count();
    s.seq = a.count();
    s.sample_duration_seconds = a.real();
    s.timestamp = a.real();
    s.advice.window_seconds = a.real();
    for (std::size_t i = a.below(3); i > 0; --i) {
        Finding f;
        f.id = a.text();
        f.subject = a.text();
        f.sq_thread = a.i32();
        f.ring = a.text();
        f.device = a.text();
        for (std::size_t k = a.below(3); k > 0; --k)
            f.predicted.push_back({a.flag() ? "cpu_cores_saved" : a.text(), a.real(), "cores"});
        s.advice.findings.push_back(f);
    }
}

Snapshot awkward_snapshot(std::uint64_t seed) {
    Awkward a(seed);
    Snapshot s;
    for (std::size_t i = a.below(4); i > 0; --i) s.threads.push_back(awkward_thread(a));
    for (std::size_t i = a.below(5); i > 0; --i) s.rings.push_back(awkward_ring(a));
    for (std::size_t i = a.below(3); i > 0; --i)
        s.processes.push_back({a.u32(), a.text(), {a.text(), a.text(), a.text()}});
    for (std::size_t i = a.below(3); i > 0; --i)
        s.folded.push_back({a.u32(), a.text(), a.count(), a.count(), a.count(), {}});
    s.ring_series_limit = a.count();
    for (std::size_t i = a.below(3); i > 0; --i) s.devices.push_back(awkward_device(a));
    for (std::size_t i = a.below(3); i > 0; --i) s.iopoll_host.push_back(awkward_iopoll(a));
    awkward_probes(a, s);
    awkward_daemon(a, s);
    return s;
}

}  // namespace

TEST(ExpositionText, FixturesRenderAsTextSerializerDoes) {
    auto shared = test::one_thread_snapshot("iou-sqp-41");
    shared.threads[0].shared_percpu = true;
    for (const Snapshot& s :
         {test::one_thread_snapshot("db"), test::one_thread_snapshot("a\"b\\c\nd\xff"), shared,
          test::full_snapshot(), Snapshot{}})
        EXPECT_EQ(render_text(s), reference(s));
}

TEST(ExpositionText, AwkwardSnapshotsRenderAsTextSerializerDoes) {
    std::size_t bytes = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        const Snapshot s = awkward_snapshot(seed);
        const std::string text = render_text(s);
        ASSERT_EQ(text, reference(s)) << "seed " << seed;
        bytes += text.size();
    }
    EXPECT_GT(bytes, 300'000u);  // the snapshots do say something
}

// One value at a time, so a difference names the value: a gauge without labels, and a histogram
// whose bound and count carry it too.
TEST(ExpositionText, EveryValueIsPrintedAsTextSerializerPrintsIt) {
    std::vector<double> values(std::begin(kAwkwardReals), std::end(kAwkwardReals));
    std::mt19937_64 rng(7);
    for (int i = 0; i < 20000; ++i) {
        const std::uint64_t bits = rng();
        double v;
        std::memcpy(&v, &bits, sizeof v);
        values.push_back(v);
        // Short decimals and whole numbers around the 16 digits %.16g keeps.
        values.push_back(static_cast<double>(rng() % 100000) *
                         std::pow(10.0, int(rng() % 40) - 25));
        values.push_back(static_cast<double>(rng() >> (rng() % 64)));
    }
    for (double v : values) {
        LatencyHistogram h;
        h.upper_bounds_s = {v};
        h.cumulative = {0};
        h.count = std::bit_cast<std::uint64_t>(v);
        h.sum_s = v;
        const auto [mine, theirs] = both_ways([&](Exposition& ex) {
            ex.add("iouscope_advice_window_seconds").gauge({}, v);
            ex.add("iouscope_nvme_uring_cmd_latency_seconds").histogram({{"device", "d"}}, h);
        });
        ASSERT_EQ(mine, theirs) << std::hexfloat << v;
    }
}

TEST(ExpositionText, EveryLabelValueIsEscapedAsTextSerializerEscapesIt) {
    std::mt19937_64 rng(11);
    const char special[] = {'\\',   '"',    '\n',   '\x80', '\xbf', '\xc3',
                            '\xe2', '\xed', '\xf0', '\xff', 'a',    '\0'};
    for (int i = 0; i < 20000; ++i) {
        std::string v;
        for (std::size_t n = rng() % 12; n > 0; --n)
            v += rng() % 2 ? special[rng() % std::size(special)] : static_cast<char>(rng());
        const auto [mine, theirs] = both_ways([&](Exposition& ex) {
            ex.add("iouscope_rings").gauge({{"mode", v}}, 1);
        });
        ASSERT_EQ(mine, theirs) << ::testing::PrintToString(v);
    }
}
