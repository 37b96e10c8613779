// Aggregator::update as a whole (model/aggregator.cpp): HZ measured from the jiffies, the
// submit probe's coverage, and the cgroup labels of rings, threads and processes. Each stage's
// own tests are in the aggregator_*_test.cpp of its file; the stages alone in
// aggregator_stages_test.cpp.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, MeasuresHzFromJiffiesWhenTheConfigIsUnknown) {
    Aggregator a;
    auto r = ring(1, 10, 3, kSqpoll, 0, 50);
    r.jiffies = 1000;
    auto s = a.update(sample(kSec, {r}));
    EXPECT_EQ(a.hz(), 0u);
    EXPECT_DOUBLE_EQ(s.threads[0].idle_setting_seconds, 0);  // unknown yet
    r.jiffies = 1000 + 249;  // one second later, one jiffy of rounding short
    s = a.update(sample(2 * kSec, {r}));
    EXPECT_EQ(a.hz(), 250u);
    EXPECT_DOUBLE_EQ(s.threads[0].idle_setting_seconds, 1.0);
}

TEST(AggregatorHz, EveryKconfigHzIsRecognisedAndNothingElse) {
    for (unsigned hz :
         {24u, 32u, 48u, 64u, 100u, 128u, 200u, 250u, 256u, 300u, 500u, 1000u, 1024u, 1200u}) {
        EXPECT_EQ(snap_hz(hz), hz);
        EXPECT_EQ(snap_hz(hz * 1.005), hz) << hz;  // a walk a little late
        EXPECT_EQ(snap_hz(hz * 0.995), hz) << hz;
    }
    EXPECT_EQ(snap_hz(253), 0u);  // between 250 and 256: keep measuring
    EXPECT_EQ(snap_hz(700), 0u);
}

TEST(AggregatorCoverage, ProbeThatMissesCallSitesShowsUnderOne) {
    Aggregator a;
    a.set_hz(250);
    auto sq = ring(1, 10, 3, kSqpoll, 0, 50);
    auto plain = ring(2, 10, 4, 0, 0);  // submitted by the application: not counted
    RawSample raw = sample(kSec, {sq, plain});
    raw.submit_probe = true;
    auto s = a.update(raw);
    ASSERT_EQ(s.coverage.size(), 1u);
    EXPECT_EQ(s.coverage[0].probe, "io_submit_sqes");
    EXPECT_EQ(s.coverage[0].ratio, -1);  // nothing to compare yet

    // 1,000 SQEs passed the SQPOLL ring's head; the probe saw 600 of them (the rest went
    // through an inlined copy). The plain ring's 5,000 are the application's own.
    sq.sq_head = sq.sq_tail = sq.cq_tail = 1000;
    plain.sq_head = plain.sq_tail = plain.cq_tail = 5000;
    sq.probe_sqes = 600;
    raw = sample(2 * kSec, {sq, plain});
    raw.submit_probe = true;
    s = a.update(raw);
    EXPECT_DOUBLE_EQ(s.coverage[0].ratio, 0.6);
    EXPECT_EQ(s.coverage[0].probe_events, 600u);
    EXPECT_EQ(s.coverage[0].iterator_events, 1000u);

    // A probe that sees nothing at all: no map entry, ratio 0, not "no data".
    Aggregator b;
    raw = sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)});
    raw.submit_probe = true;
    b.update(raw);
    raw = sample(2 * kSec, {ring(1, 10, 3, kSqpoll, 500, 50)});
    raw.submit_probe = true;
    EXPECT_DOUBLE_EQ(b.update(raw).coverage[0].ratio, 0.0);

    // Below 100 SQEs in the interval the ratio says nothing.
    sq.sq_head = sq.sq_tail = sq.cq_tail = 1050;
    sq.probe_sqes = 650;
    raw = sample(3 * kSec, {sq, plain});
    raw.submit_probe = true;
    s = a.update(raw);
    EXPECT_EQ(s.coverage[0].ratio, -1);
    EXPECT_EQ(s.coverage[0].iterator_events, 1050u);

    // Without the probe there is no coverage to report.
    Aggregator c;
    EXPECT_TRUE(c.update(sample(kSec, {ring(1, 10, 3, kSqpoll, 0, 50)})).coverage.empty());
}

TEST(AggregatorCgroups, RingsThreadsAndProcessesCarryTheirContainer) {
    const std::string id(64, 'e'), uid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
    Aggregator a;
    auto app = ring(1, 10, 3, kSqpoll, 0, 50);
    app.cgroup_id = 7;
    app.sq_cgroup_id = 8;  // the SQ thread moved apart from its process
    auto host = ring(2, 11, 4, 0, 0);
    host.cgroup_id = 9;
    auto unresolved = ring(3, 12, 5, 0, 0);
    unresolved.cgroup_id = 99;  // removed between the walk and the lookup
    auto raw = sample(kSec, {app, host, unresolved});
    raw.cgroup_paths = {{7, "/kubepods/besteffort/pod" + uid + "/" + id},
                        {8, "/system.slice/sq.scope"},
                        {9, "/system.slice/app.service"}};
    const auto s = a.update(raw);
    const auto& r = find_ring(s, "10:3");
    EXPECT_EQ(r.cgroup.cgroup, "/kubepods/besteffort/pod" + uid + "/" + id);
    EXPECT_EQ(r.cgroup.container_id, id);
    EXPECT_EQ(r.cgroup.pod_uid, uid);
    ASSERT_EQ(s.threads.size(), 1u);
    EXPECT_EQ(s.threads[0].cgroup.cgroup, "/system.slice/sq.scope");
    EXPECT_EQ(s.threads[0].cgroup.container_id, "");

    // One entry per process, where its rings are held.
    ASSERT_EQ(s.processes.size(), 3u);
    EXPECT_EQ(s.processes[0].pid, 10u);
    EXPECT_EQ(s.processes[0].cgroup.container_id, id);
    EXPECT_EQ(s.processes[1].cgroup.cgroup, "/system.slice/app.service");
    EXPECT_EQ(s.processes[2].cgroup.cgroup, "");
}
