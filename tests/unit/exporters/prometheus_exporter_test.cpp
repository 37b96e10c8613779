#include "exporters/prometheus_exporter.hpp"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "tests/unit/exporters/snapshots.hpp"

using namespace iouscope;
using iouscope::test::one_thread_snapshot;

namespace {

// Parses "name{labels} value" lines into (series, value) pairs, ignoring comments.
std::vector<std::pair<std::string, std::string>> series(const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto sp = line.rfind(' ');
        out.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    return out;
}

std::string value_of(const std::string& text, const std::string& series_name) {
    for (const auto& [k, v] : series(text))
        if (k == series_name) return v;
    return "<absent>";
}

}  // namespace

TEST(Exposition, ContractMetricsHaveTheirTypesAndLabels) {
    auto text = render_text(one_thread_snapshot("db"));
    for (const char* line :
         {"# TYPE iouscope_sqthread_cpu_seconds_total counter",
          "# TYPE iouscope_sqthread_work_seconds_total counter",
          "# TYPE iouscope_sqthread_spin_seconds_total counter",
          "# TYPE iouscope_sqthread_sleep_seconds_total counter",
          "# TYPE iouscope_sqthread_sleeps_total counter",
          "# TYPE iouscope_sqthread_wakeups_total counter",
          "# TYPE iouscope_sqthread_wakeup_latency_seconds histogram",
          "# TYPE iouscope_sqthread_rings gauge", "# TYPE iouscope_sqthread_fairness gauge",
          "# TYPE iouscope_sqthread_idle_setting_seconds gauge",
          "# TYPE iouscope_ring_sqes_total counter", "# TYPE iouscope_ring_cqes_total counter",
          "# TYPE iouscope_ring_sq_backlog gauge", "# TYPE iouscope_ring_sqthread_share gauge",
          "# TYPE iouscope_probe_attached gauge"})
        EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line;
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_sqthread_cpu_seconds_total{sq_thread="42",pid="41",comm="db",shared=""})"),
        "2");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_sqes_total{ring="41:5",pid="41",comm="db",mode="sqpoll",sq_thread="42"})"),
        "1000");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_cqes_total{ring="41:6",pid="41",comm="db",mode="plain",sq_thread=""})"),
        "999");
    EXPECT_EQ(value_of(text, R"(iouscope_probe_attached{probe="io_uring_create",kind="tp_btf"})"),
              "0");
    EXPECT_EQ(value_of(text, R"(iouscope_rings{mode="sqpoll"})"), "1");
    EXPECT_EQ(value_of(text, R"(iouscope_rings{mode="iopoll"})"), "0");
    EXPECT_EQ(
        value_of(text, R"(iouscope_sqthread_running{sq_thread="42",pid="41",comm="db",shared=""})"),
        "1");
}

// Seeds patch 000: a per-CPU shared thread is no one tenant's, so it carries no pid.
TEST(Exposition, APerCpuSharedThreadIsLabelledSharedWithoutAPid) {
    Snapshot s = one_thread_snapshot("iou-sqp-41");
    s.threads[0].shared_percpu = true;
    auto text = render_text(s);
    EXPECT_EQ(value_of(text, R"(iouscope_sqthread_cpu_seconds_total{sq_thread="42",pid="",)"
                             R"(comm="",shared="percpu"})"),
              "2");
}

TEST(Exposition, PlainRingsHaveNoShareNorBacklog) {
    auto text = render_text(one_thread_snapshot("db"));
    EXPECT_EQ(text.find(R"(iouscope_ring_sqthread_share{ring="41:6")"), std::string::npos);
    EXPECT_NE(text.find(R"(iouscope_ring_sqthread_share{ring="41:5")"), std::string::npos);
    EXPECT_EQ(text.find(R"(iouscope_ring_sq_backlog{ring="41:6")"), std::string::npos);
    EXPECT_NE(text.find(R"(iouscope_ring_sq_backlog{ring="41:5")"), std::string::npos);
}

TEST(Exposition, HistogramIsCumulativeWithInf) {
    auto text = render_text(one_thread_snapshot("db"));
    const std::string l = R"(sq_thread="42",pid="41",comm="db",shared="")";
    EXPECT_EQ(
        value_of(text, "iouscope_sqthread_wakeup_latency_seconds_bucket{" + l + R"(,le="1e-06"})"),
        "1");
    EXPECT_EQ(
        value_of(text, "iouscope_sqthread_wakeup_latency_seconds_bucket{" + l + R"(,le="2e-06"})"),
        "3");
    EXPECT_EQ(
        value_of(text, "iouscope_sqthread_wakeup_latency_seconds_bucket{" + l + R"(,le="+Inf"})"),
        "4");
    EXPECT_EQ(value_of(text, "iouscope_sqthread_wakeup_latency_seconds_count{" + l + "}"), "4");
    EXPECT_EQ(value_of(text, "iouscope_sqthread_wakeup_latency_seconds_sum{" + l + "}"), "0.25");
}

// Buckets that repeat 0 below the first observation, or the count above the last, say nothing:
// only the last empty one (histogram_quantile's lower bound) and the first full one are kept.
TEST(Exposition, HistogramKeepsOnlyTheBucketsThatSaySomething) {
    auto s = one_thread_snapshot("db");
    auto& h = s.threads[0].wake_latency;
    h.upper_bounds_s = {1, 2, 4, 8, 16, 32, 64};
    h.cumulative = {0, 0, 0, 2, 5, 5, 5};
    h.count = 5;
    const std::string b =
        R"(iouscope_sqthread_wakeup_latency_seconds_bucket{sq_thread="42",pid="41",comm="db",shared="",le=")";
    auto buckets = [&] {  // "LE"}=COUNT" of each bucket line, in order
        std::vector<std::string> les;
        for (const auto& [k, v] : series(render_text(s)))
            if (k.rfind(b, 0) == 0) les.push_back(k.substr(b.size()) + "=" + v);
        return les;
    };
    EXPECT_EQ(buckets(), (std::vector<std::string>{"4\"}=0", "8\"}=2", "16\"}=5", "+Inf\"}=5"}));

    h.cumulative = {0, 0, 0, 0, 0, 0, 0};  // no observation: +Inf alone
    h.count = 0;
    EXPECT_EQ(buckets(), (std::vector<std::string>{"+Inf\"}=0"}));

    h.count = 3;  // every observation beyond the last bound: the last finite bucket bounds them
    EXPECT_EQ(buckets(), (std::vector<std::string>{"64\"}=0", "+Inf\"}=3"}));
}

// A folded ring has no series of its own; its process's fold counts it.
TEST(Exposition, FoldedRingsAreCountedPerProcessNotPerRing) {
    auto s = one_thread_snapshot("db");
    s.rings[1].folded = true;
    s.folded.push_back({41, "db", 1, 70, 69, {}});
    s.ring_series_limit = 500;
    const std::string text = render_text(s);
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_sqes_total{ring="41:6",pid="41",comm="db",mode="plain",sq_thread=""})"),
        "<absent>");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_sqes_total{ring="41:5",pid="41",comm="db",mode="sqpoll",sq_thread="42"})"),
        "1000");
    EXPECT_EQ(
        value_of(text,
                 R"(iouscope_process_folded_rings{pid="41",comm="db",mode="plain",sq_thread=""})"),
        "1");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_process_folded_ring_sqes_total{pid="41",comm="db",mode="plain",sq_thread=""})"),
        "70");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_process_folded_ring_cqes_total{pid="41",comm="db",mode="plain",sq_thread=""})"),
        "69");
    EXPECT_EQ(value_of(text, "iouscope_ring_series_limit"), "500");
}

TEST(Exposition, HostileCommNamesAreEscaped) {
    auto text = render_text(one_thread_snapshot("a\"b\\c\nd\xff"));
    EXPECT_NE(text.find(R"(comm="a\"b\\c\nd)"
                        "\xef\xbf\xbd\""),
              std::string::npos)
        << text;
    // Every sample line still has the shape name{labels} value: nothing broke a line.
    std::regex ok(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \S+$)");
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        EXPECT_TRUE(std::regex_match(line, ok)) << line;
        ++n;
    }
    EXPECT_GT(n, 20);
}

TEST(Exposition, EmptyHostStillReportsProbesAndBuild) {
    Snapshot s;
    s.probes.push_back({"iter_rings", "iter", true, ""});
    auto text = render_text(s);
    EXPECT_EQ(value_of(text, R"(iouscope_probe_attached{probe="iter_rings",kind="iter"})"), "1");
    EXPECT_EQ(text.find("iouscope_sqthread_cpu_seconds_total"), std::string::npos);
    EXPECT_NE(text.find("iouscope_build_info{version="), std::string::npos);
}

TEST(Exposition, EachRingWithSeriesHasAnInfoSeriesNamingItsSetupFlags) {
    auto s = one_thread_snapshot("db");
    s.rings[0].setup_flags = 0x2 | 0x4 | (1U << 12);  // sqpoll, sq_aff, single_issuer
    s.rings[0].sq_entries = 64;
    s.rings[0].cq_entries = 128;
    s.rings[1].folded = true;
    const std::string text = render_text(s);
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_info{ring="41:5",pid="41",comm="db",mode="sqpoll",sq_thread="42",setup="sqpoll,sq_aff,single_issuer"})"),
        "1");
    EXPECT_EQ(
        value_of(
            text,
            R"(iouscope_ring_cq_entries{ring="41:5",pid="41",comm="db",mode="sqpoll",sq_thread="42"})"),
        "128");
    // A folded ring has no series of its own, its info included.
    EXPECT_EQ(text.find(R"(iouscope_ring_info{ring="41:6")"), std::string::npos);
}

TEST(Exposition, RequestSeriesNameTheOpcodeAndOnlyThePathsAndResultsSeen) {
    const auto all = series(render_text(iouscope::test::full_snapshot()));
    std::map<std::string, std::string> got(all.begin(), all.end());
    const std::string ring = R"(ring="41:5",pid="41",comm="db",mode="sqpoll",sq_thread="42")";
    // Opcode 22 is past the snapshot's two names: named by number.
    EXPECT_EQ(got["iouscope_ring_requests_total{" + ring + R"(,op="op22"})"], "3");
    EXPECT_EQ(got["iouscope_ring_request_punts_total{" + ring + R"(,op="op22",reason="forced"})"],
              "1");
    EXPECT_EQ(got["iouscope_ring_request_punts_total{" + ring + R"(,op="op22",reason="other"})"],
              "0");
    EXPECT_EQ(got["iouscope_ring_request_punts_hashed_total{" + ring + R"(,op="op22"})"], "1");
    const std::string iowq = ring + R"(,op="op22",path="io_wq")";
    EXPECT_EQ(got["iouscope_ring_request_completions_total{" + iowq + R"(,result="enobufs"})"],
              "1");
    EXPECT_EQ(got["iouscope_ring_request_completions_total{" + iowq + R"(,result="ok"})"], "0");
    EXPECT_EQ(got["iouscope_ring_request_latency_seconds_count{" + iowq + "}"], "2");
    EXPECT_EQ(got["iouscope_ring_requests_in_flight{" + ring + "}"], "2");
    EXPECT_EQ(got["iouscope_ring_oldest_request_age_seconds{" + ring + "}"], "1.5");
    // The folded rings' opcode 22: requests, punts by reason, completions by path taken.
    const std::string fold = R"(pid="41",comm="db",mode="plain",sq_thread="",op="op22")";
    EXPECT_EQ(got["iouscope_process_folded_ring_requests_total{" + fold + "}"], "7");
    EXPECT_EQ(
        got["iouscope_process_folded_ring_request_punts_total{" + fold + R"(,reason="forced"})"],
        "1");
    EXPECT_EQ(
        got["iouscope_process_folded_ring_request_punts_total{" + fold + R"(,reason="other"})"],
        "2");
    const std::string done = "iouscope_process_folded_ring_request_completions_total{" + fold;
    EXPECT_EQ(got[done + R"(,path="inline"})"], "4");
    EXPECT_EQ(got[done + R"(,path="io_wq"})"], "3");
    EXPECT_EQ(got.count(done + R"(,path="poll"})"), 0u);
    for (const auto& [k, v] : all) {
        if (k.rfind("iouscope_process_folded", 0) == 0) continue;
        // Neither a path the opcode never took nor a result never seen has a series.
        EXPECT_EQ(k.find(R"(path="inline")"), std::string::npos) << k;
        EXPECT_EQ(k.find(R"(result="eagain")"), std::string::npos) << k;
    }
}
