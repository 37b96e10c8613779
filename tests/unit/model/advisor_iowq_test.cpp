// iowq_workers_idle (model/advisor_iowq.cpp): workers far above the requests on io-wq at both
// ends of the window, and the cap that holds them.
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

IowqSnapshot process(std::uint32_t bound, std::uint32_t unbound, std::int64_t in_flight,
                     std::uint32_t iowqs = 1) {
    IowqSnapshot w;
    w.queues = iowqs;
    w.pid = 400;
    w.comm = "netd";
    w.workers = {bound, unbound};
    w.requests_in_flight = in_flight;
    return w;
}

Advice judge(IowqSnapshot a, IowqSnapshot b) {
    Snapshot from = snap(100), to = snap(110);
    from.iowq = {a};
    to.iowq = {b};
    return make_advice(from, to);
}

}  // namespace

// 100 bound and 20 unbound workers for 3 requests, 2 a window ago: cap at 6 each, 108 saved.
TEST(AdviseIowq, WorkersFarAboveTheRequestsOnBothEndsGetACap) {
    const auto adv = judge(process(90, 10, 2), process(100, 20, 3));
    const Finding* f = find(adv, "iowq_workers_idle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "process 400");
    EXPECT_EQ(f->pid, 400u);
    EXPECT_NE(f->change.find("{6, 6}"), std::string::npos) << f->change;
    EXPECT_NEAR(figure(f->predicted, "workers"), 12, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "threads_saved"), 108, 1e-9);
    EXPECT_NEAR(figure(f->evidence, "requests_in_flight_on_iowq"), 3, 1e-9);
}

// Quiet: workers each holding a request (30 for 80), too few workers, a burst's workers seen
// only at the end, and a kernel that cannot count the requests in flight.
TEST(AdviseIowq, BusyFewBurstOrUnknownIsQuiet) {
    EXPECT_EQ(find(judge(process(0, 80, 30), process(0, 80, 30)), "iowq_workers_idle"), nullptr);
    EXPECT_EQ(find(judge(process(10, 5, 0), process(10, 5, 0)), "iowq_workers_idle"), nullptr);
    EXPECT_EQ(find(judge(process(2, 0, 2), process(100, 0, 0)), "iowq_workers_idle"), nullptr);
    EXPECT_EQ(find(judge(process(100, 0, -1), process(100, 0, -1)), "iowq_workers_idle"), nullptr);
    // 20 submitting threads with a worker or two each: a cap per io-wq saves nothing.
    EXPECT_EQ(find(judge(process(20, 20, 1, 20), process(20, 20, 1, 20)), "iowq_workers_idle"),
              nullptr);
    // The smallest cap is 4 where nothing is in flight.
    const auto adv = judge(process(40, 0, 0), process(40, 0, 0));
    const Finding* f = find(adv, "iowq_workers_idle");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->change.find("{4, 4}"), std::string::npos) << f->change;
}
