#include "cli/advise.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace iouscope;
using namespace iouscope::advise;

namespace {

OptionsResult parse(std::vector<const char*> args) {
    args.insert(args.begin(), "advise");
    return parse_options(static_cast<int>(args.size()), args.data());
}

Snapshot with_thread(std::int32_t tid, std::uint32_t pid) {
    Snapshot s;
    ThreadSnapshot t;
    t.tid = tid;
    t.pid = pid;
    s.threads.push_back(t);
    RingSnapshot r;
    r.id = std::to_string(pid) + ":5";
    r.pid = pid;
    r.sq_thread = tid;
    s.rings.push_back(r);
    return s;
}

Finding finding(const char* id, std::int32_t tid, std::uint32_t pid) {
    Finding f;
    f.id = id;
    f.sq_thread = tid;
    f.pid = pid;
    f.subject = "sq_thread " + std::to_string(tid);
    f.ring = std::to_string(pid) + ":5";
    return f;
}

}  // namespace

TEST(AdviseOptions, Defaults) {
    auto r = parse({});
    ASSERT_TRUE(r.options);
    EXPECT_FALSE(r.options->local);
    EXPECT_DOUBLE_EQ(r.options->duration_seconds, 15);
    EXPECT_FALSE(r.options->pid);
}

TEST(AdviseOptions, BadValuesAreRefusedWithExitTwo) {
    for (auto args : std::vector<std::vector<const char*>>{{"--duration", "10"},
                                                           {"--duration", "2s"},
                                                           {"--duration", "2h"},
                                                           {"--pid", "0"},
                                                           {"--pid", "abc"},
                                                           {"--thread", "-4"},
                                                           {"--wake-weight", "-1"},
                                                           {"--daemon", "localhost:10464"},
                                                           {"--bogus"}}) {
        auto r = parse(args);
        EXPECT_FALSE(r.options) << args[0];
        EXPECT_EQ(r.exit_code, 2) << args[0];
        EXPECT_NE(r.output.find("iouscope advise"), std::string::npos) << r.output;
    }
}

TEST(AdviseOptions, HelpNamesEveryFinding) {
    auto r = parse({"--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* id :
         {"sq_idle_too_long", "sq_spinning_without_work", "sq_thread_overpriced",
          "shared_thread_backlog", "sq_threads_should_share", "iopoll_without_poll_queues",
          "requests_forced_async", "requests_punted_without_nowait", "single_sqe_per_enter",
          "cq_overflow", "provided_buffers_ran_dry", "requests_stuck", "iowq_workers_idle"})
        EXPECT_NE(r.output.find(id), std::string::npos) << id;
}

TEST(AdviseFilter, UnknownPidOrThreadIsAnError) {
    auto snap = with_thread(77, 10);
    Advice a;
    a.findings = {finding("sq_idle_too_long", 77, 10)};
    Options o;
    o.pid = 11;
    auto err = filter_findings(snap, o, a);
    ASSERT_TRUE(err);
    EXPECT_NE(err->find("pid 11"), std::string::npos);
    o.pid.reset();
    o.thread = 78;
    err = filter_findings(snap, o, a);
    ASSERT_TRUE(err);
    EXPECT_NE(err->find("77"), std::string::npos);  // lists the threads that exist
}

TEST(AdviseFilter, AnUnknownThreadListsTheFirstTwentyThreadsThere) {
    Snapshot snap;
    for (std::int32_t tid = 1000; tid < 2000; ++tid)
        snap.threads.push_back(with_thread(tid, 9).threads[0]);
    Options o;
    o.thread = 5;
    Advice a;
    const auto err = filter_findings(snap, o, a);
    ASSERT_TRUE(err);
    EXPECT_NE(err->find("(SQ threads now: 1000 1001 "), std::string::npos) << *err;
    EXPECT_NE(err->find(" 1019 and 980 more)"), std::string::npos) << *err;
    EXPECT_EQ(err->find("1020"), std::string::npos) << *err;
}

TEST(AdviseFilter, KeepsOnlyTheAskedThread) {
    auto snap = with_thread(77, 10);
    snap.threads.push_back(with_thread(88, 20).threads.front());
    Advice a;
    a.findings = {finding("sq_idle_too_long", 77, 10), finding("sq_idle_too_long", 88, 20)};
    Options o;
    o.thread = 88;
    ASSERT_FALSE(filter_findings(snap, o, a));
    ASSERT_EQ(a.findings.size(), 1u);
    EXPECT_EQ(a.findings.front().sq_thread, 88);
}

TEST(AdviseRender, ShowsEvidenceChangePredictionAndCurve) {
    Advice a;
    a.window_seconds = 15;
    auto f = finding("sq_idle_too_long", 77, 10);
    f.summary = "spins";
    f.change = "set sq_thread_idle = 1 (ms)";
    f.evidence = {{"cpu_cores", 0.99, "cores"}};
    f.predicted = {{"wakeups_per_second", 20, "1/s"}};
    f.assumption = "gaps stay";
    f.curve = {{0.001, 0.006, 0.22, 20, false, true}, {1.0, 1.002, 0.99, 0, true, false}};
    a.findings = {f};
    const auto text = render_text(a, with_thread(77, 10));
    for (const char* s :
         {"[sq_idle_too_long] sq_thread 77", "0.990 cores", "20/s", "set sq_thread_idle = 1 (ms)",
          "gaps stay", "<- recommended", "<- current", "1 ms", "1000 ms"})
        EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
    Advice none;
    none.window_seconds = 15;
    EXPECT_NE(render_text(none, with_thread(77, 10)).find("No findings"), std::string::npos);
}

TEST(AdviseRender, ShowsEachAlternativeWithItsPriceAndWhyOthersAreUnavailable) {
    Advice a;
    a.window_seconds = 10;
    auto f = finding("sq_thread_overpriced", 42, 7);
    f.alternatives = {{"now", "", 1.0, 0, 0, true, false, "667 us of SQ thread CPU per SQE"},
                      {"no_sqpoll", "drop SQPOLL", 0.012, 0, 1e-6, true, true, "measured"},
                      {"sq_thread_idle", "", 0, 0, 0, false, false, "no setting helps: gaps"}};
    a.findings = {f};
    const auto text = render_text(a, with_thread(42, 7));
    for (const char* s : {"alternatives:", "no_sqpoll", "1.2%", "1.0 us  <- recommended",
                          "sq_thread_idle: no setting helps: gaps", "100.0%"})
        EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
    // An unavailable alternative has no price row, only its note.
    EXPECT_EQ(text.find("sq_thread_idle        "), std::string::npos) << text;
}
