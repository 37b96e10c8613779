// iouscope-render-bench: what the first /metrics scrape of a sample costs at the scale goal's
// point, without a daemon: a synthetic Snapshot of 1,000 SQ threads each with one SQPOLL ring
// and 9,000 plain rings of one process, 500 of which keep series of their own (the rest folded,
// --rings.series-limit's default), rendered and gzip-compressed as RenderCache does. Its text is
// 3,785,771 bytes, 33,785 lines: 9.5 % more than the 3,457,064 bytes the goal's point served in
// bench/scale.py, whose threads had all gone idle before the daemon attached (sq_thread() says
// what differs).
//
//   iouscope-render-bench [--runs N] [--path A|B] [--dump FILE] [--gzip-levels]
//
// Each render path runs N times (default 20), the paths interleaved round by round in an order
// shuffled every round (what ran before matters: a path that follows one which freed a lot of
// memory pays the page faults of taking it back); each path runs twice per round (A/A), so the
// spread between two measurements of the same code shows beside the difference between two.
// Per path and stage (building the families, serialising, gzip) it prints the median and the
// min-max in ms, and the bytes. --path runs only the paths whose name starts with it (A:
// prometheus-cpp's, B: render_text), for perf. --gzip-levels measures zlib's settings on the
// same text instead. --dump writes the text. Not a test: it prints figures for
// docs/BENCHMARKS.md.
#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "exporters/gzip.hpp"
#include "exporters/prometheus_exporter.hpp"
#include "model/counters.hpp"

using namespace iouscope;

namespace {

constexpr std::uint32_t kPid = 54321;  // the load generator, holder of every ring
constexpr int kThreads = 1000, kPlainRings = 9000, kSeriesLimit = 500;
constexpr double kNow = 1765012345.678901;  // Unix time of the sample

// Deterministic pseudo-random figures, so every run renders the same text.
struct Figures {
    std::mt19937_64 rng{20261206};
    std::uint64_t below(std::uint64_t n) { return rng() % n; }
    double seconds(std::uint64_t max_ns) { return static_cast<double>(below(max_ns)) / 1e9; }
};

// Wake latency as the aggregator makes it: a log2 histogram in ns, exposed from 2^10 ns.
LatencyHistogram latency(Figures& f, std::size_t low, std::size_t high, std::uint64_t n) {
    std::vector<std::uint64_t> log2(34, 0);
    std::uint64_t sum_ns = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::size_t b = low + f.below(high - low + 1);
        ++log2[b];
        sum_ns += (std::uint64_t{1} << b) + f.below(std::uint64_t{1} << b);
    }
    const auto cum = log2_to_cumulative(log2, 9);
    LatencyHistogram h;
    for (double b : cum.upper_bounds) h.upper_bounds_s.push_back(b / 1e9);
    h.cumulative = cum.cumulative;
    h.count = cum.count;
    h.sum_s = static_cast<double>(sum_ns) / 1e9;
    return h;
}

// An idle SQ thread of the load generator: the kernel's work time (6.18) beside the estimate. At
// the goal's point every thread went idle before iouscope attached (no wakeup, no waker, an empty
// latency histogram); here one in two woke once or twice since, by the load generator.
ThreadSnapshot sq_thread(Figures& f, int i) {
    ThreadSnapshot t;
    t.tid = static_cast<std::int32_t>(kPid + 100 + i);
    t.pid = kPid;
    t.comm = "iouscope-load";
    t.start_time_seconds = kNow - 60 + f.seconds(5'000'000'000);
    t.cpu_seconds = f.seconds(40'000'000);
    t.work_seconds = t.cpu_seconds * 0.01;
    t.spin_seconds = t.cpu_seconds - t.work_seconds;
    t.sleep_seconds = 55 + f.seconds(2'000'000'000);
    t.work_source = WorkSource::kernel;
    t.work_by_source_seconds = {{WorkSource::kernel, t.work_seconds},
                                {WorkSource::estimate, t.work_seconds * 1.5}};
    t.sleeps = i % 2 ? 0 : 1 + f.below(2);
    t.blocks = f.below(3);
    t.block_seconds = f.seconds(200'000);
    t.spin_model = "after_last_work";
    t.wakeups = t.sleeps;
    t.voluntary_switches = 3 + f.below(10);
    t.involuntary_switches = f.below(4);
    t.state = 1;
    t.sq_cpu = static_cast<std::int32_t>(f.below(2));
    t.idle_setting_seconds = 0.001;
    t.wake_latency = latency(f, 13, 14, t.wakeups);
    t.rings = 1;
    if (t.wakeups) t.wakers.push_back({kPid, "iouscope-load", t.wakeups, "task"});
    return t;
}

RingSnapshot ring(Figures& f, std::uint32_t fd, std::int32_t sq_thread) {
    RingSnapshot r;
    r.id = std::to_string(kPid) + ":" + std::to_string(fd);
    r.start_time_seconds = kNow - 60 + f.seconds(5'000'000'000);
    r.pid = kPid;
    r.fd = fd;
    r.comm = "iouscope-load";
    r.mode = sq_thread > 0 ? "sqpoll" : "plain";
    r.sq_thread = sq_thread;
    r.sq_entries = 64;
    r.sqes_total = 1;
    r.cqes_total = 1;
    r.sqthread_share = sq_thread > 0 ? 1 : 0;
    return r;
}

void daemon_figures(Snapshot& s) {
    for (const char* p : {"iter_rings", "sched_switch", "sched_waking", "io_uring_create"})
        s.probes.push_back({p, p == std::string("iter_rings") ? "iter" : "tp_btf", true, ""});
    for (const char* p : {"io_sq_thread", "io_submit_sqes", "io_do_iopoll", "work_gaps"})
        s.probes.push_back({p, "fentry", false, "deep tier only (--probes.deep)"});
    s.rings_created_by_mode = {{"plain", kPlainRings}, {"sqpoll", kThreads}};
    s.rings_short_lived_by_mode = {{"plain", 0}, {"sqpoll", 0}};
    for (const char* m : {"ring_births", "sched_state", "wakers", "ring_work", "iopoll_stats"}) {
        s.map_overflows.push_back({m, 0});
        s.map_entries.push_back({m, 1000});
        s.map_capacity.push_back({m, 16384});
    }
    s.host_visible = {{"tasks", true}, {"cgroups", true}};
    s.advice.window_seconds = 60;
    Finding share;
    share.id = "sq_threads_should_share";
    share.subject = "process " + std::to_string(kPid);
    share.predicted.push_back({"cpu_cores_saved", 0.0123456789, "cores"});
    s.advice.findings.push_back(share);
}

Snapshot goal_snapshot() {
    Figures f;
    Snapshot s;
    s.seq = 1234;
    s.timestamp = kNow;
    s.interval_seconds = 1;
    s.sample_duration_seconds = 0.0423456789;
    s.hz = 250;
    s.processes.push_back({kPid, "iouscope-load", {"/user.slice/session-1.scope", "", ""}});
    std::uint32_t fd = 3;
    for (int i = 0; i < kThreads; ++i) {
        s.threads.push_back(sq_thread(f, i));
        s.rings.push_back(ring(f, fd++, s.threads.back().tid));
    }
    for (int i = 0; i < kPlainRings; ++i) {
        s.rings.push_back(ring(f, fd++, -1));
        s.rings.back().folded = i >= kSeriesLimit;
    }
    s.folded.push_back({kPid, "iouscope-load", kPlainRings - kSeriesLimit, 8500, 8500, {}});
    s.ring_series_limit = kSeriesLimit;
    daemon_figures(s);
    return s;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One measurement of a path: its stages in ms (build is 0 where a path has no such stage).
struct Stages {
    double build = 0, serialize = 0, gzip = 0;
    std::size_t bytes = 0, gzip_bytes = 0;
    double total() const { return build + serialize + gzip; }
};

Stages gzip_stage(Stages st, const std::string& text) {
    const auto t0 = Clock::now();
    const std::string gz = gzip_compress(text);
    st.gzip = ms_since(t0);
    st.bytes = text.size();
    st.gzip_bytes = gz.size();
    return st;
}

// to_metric_families, then prometheus-cpp's TextSerializer through an ostringstream.
Stages families_and_text_serializer(const Snapshot& s) {
    Stages st;
    auto t0 = Clock::now();
    const auto families = to_metric_families(s);
    st.build = ms_since(t0);
    t0 = Clock::now();
    std::ostringstream os;
    prometheus::TextSerializer{}.Serialize(os, families);
    const std::string text = os.str();
    st.serialize = ms_since(t0);
    return gzip_stage(st, text);
}

// render_text: the same calls written straight as text.
Stages direct_text(const Snapshot& s) {
    Stages st;
    const auto t0 = Clock::now();
    const std::string text = render_text(s);
    st.serialize = ms_since(t0);
    return gzip_stage(st, text);
}

std::string reference_text(const Snapshot& s) {
    std::ostringstream os;
    prometheus::TextSerializer{}.Serialize(os, to_metric_families(s));
    return os.str();
}

// Indices 0 .. n-1 once per round, in an order shuffled every round (the same every run).
std::vector<std::size_t> shuffled_rounds(std::size_t n, int rounds) {
    std::mt19937 rng(1);
    std::vector<std::size_t> order(n), out;
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (int r = 0; r < rounds; ++r) {
        std::shuffle(order.begin(), order.end(), rng);
        out.insert(out.end(), order.begin(), order.end());
    }
    return out;
}

struct Path {
    std::string name;
    std::function<Stages(const Snapshot&)> run;
    std::vector<Stages> runs = {};
};

std::string cell(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f (%.2f-%.2f)", med, v.front(), v.back());
    return buf;
}

template <class F>
std::vector<double> each(const std::vector<Stages>& runs, F f) {
    std::vector<double> out;
    for (const auto& r : runs) out.push_back(f(r));
    return out;
}

void print_table(const std::vector<Path>& paths, int runs) {
    std::printf("%d runs per path, median (min-max) in ms\n\n", runs);
    std::printf("| path | build families | serialise | gzip | total | bytes | gzip bytes |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const auto& p : paths) {
        const auto& r = p.runs;
        std::printf("| %s | %s | %s | %s | %s | %zu | %zu |\n", p.name.c_str(),
                    cell(each(r, [](const Stages& s) { return s.build; })).c_str(),
                    cell(each(r, [](const Stages& s) { return s.serialize; })).c_str(),
                    cell(each(r, [](const Stages& s) { return s.gzip; })).c_str(),
                    cell(each(r, [](const Stages& s) { return s.total(); })).c_str(),
                    r.back().bytes, r.back().gzip_bytes);
    }
}

void compare_paths(const Snapshot& s, int runs, const std::string& only) {
    std::vector<Path> paths = {
        {"A  families + TextSerializer", families_and_text_serializer},
        {"A' families + TextSerializer (A/A)", families_and_text_serializer},
        {"B  render_text, written directly", direct_text},
        {"B' render_text, written directly (A/A)", direct_text},
    };
    std::erase_if(paths, [&](const Path& p) { return !p.name.starts_with(only); });
    for (const std::size_t k : shuffled_rounds(paths.size(), runs))
        paths[k].runs.push_back(paths[k].run(s));
    print_table(paths, runs);
}

void compare_gzip(const std::string& text, int runs) {
    struct Setting {
        std::string name;
        int level, strategy, mem_level;
        std::vector<double> ms = {};
        std::size_t bytes = 0;
    };
    std::vector<Setting> settings = {
        {"A  level 1 (Z_BEST_SPEED), today", 1, Z_DEFAULT_STRATEGY, 8},
        {"A' level 1 (A/A)", 1, Z_DEFAULT_STRATEGY, 8},
        {"level 1, memLevel 9", 1, Z_DEFAULT_STRATEGY, 9},
        {"level 2", 2, Z_DEFAULT_STRATEGY, 8},
        {"level 3", 3, Z_DEFAULT_STRATEGY, 8},
        {"level 6 (default)", 6, Z_DEFAULT_STRATEGY, 8},
        {"level 1, Z_RLE", 1, Z_RLE, 8},
        {"level 1, Z_HUFFMAN_ONLY", 1, Z_HUFFMAN_ONLY, 8},
        {"level 1, Z_FILTERED", 1, Z_FILTERED, 8},
    };
    for (const std::size_t k : shuffled_rounds(settings.size(), runs)) {
        auto& st = settings[k];
        const auto t0 = Clock::now();
        st.bytes = gzip_compress(text, {st.level, st.strategy, st.mem_level}).size();
        st.ms.push_back(ms_since(t0));
    }
    std::printf("gzip of %zu bytes, %d runs per setting, median (min-max) in ms\n\n", text.size(),
                runs);
    std::printf("| zlib setting | ms | bytes | ratio |\n|---|---|---|---|\n");
    for (const auto& st : settings)
        std::printf("| %s | %s | %zu | %.1f |\n", st.name.c_str(), cell(st.ms).c_str(), st.bytes,
                    static_cast<double>(text.size()) / static_cast<double>(st.bytes));
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 20;
    const char* dump = nullptr;
    bool levels = false;
    std::string only;  // the paths whose name starts with it
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) {
            dump = argv[++i];
        } else if (!std::strcmp(argv[i], "--path") && i + 1 < argc) {
            only = argv[++i];
        } else if (!std::strcmp(argv[i], "--gzip-levels")) {
            levels = true;
        } else {
            std::fprintf(stderr,
                         "usage: %s [--runs N] [--path A|B] [--dump FILE] [--gzip-levels]\n",
                         argv[0]);
            return 2;
        }
    }
    const Snapshot s = goal_snapshot();
    const std::string text = reference_text(s);
    std::printf("exposition: %zu bytes, %zu lines; render_text %s TextSerializer's\n", text.size(),
                static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')),
                render_text(s) == text ? "is byte for byte" : "DIFFERS from");
    if (dump) std::ofstream(dump) << text;
    if (levels)
        compare_gzip(text, runs);
    else
        compare_paths(s, runs, only);
}
