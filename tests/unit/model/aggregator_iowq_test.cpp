// The io-wq stage (model/aggregator_iowq.cpp): a process's workers from the exits BPF counted
// and the walk of the live ones, counted once each, and counters that never go back.
#include <gtest/gtest.h>

#include <cstring>

#include "model/aggregator_update.hpp"
#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

constexpr std::uint64_t kSince = 1000;  // the daemon attached here (iowq_since_ns)

iou_iowq_worker worker(std::uint32_t tid, std::uint64_t wq, std::uint32_t kind,
                       std::uint64_t start_ns, std::uint64_t runtime_ns,
                       std::uint32_t max_workers = 4) {
    iou_iowq_worker w{};
    w.tid = tid;
    w.tgid = 100;
    w.leader_start_ns = 5;
    w.wq = wq;
    w.kind = kind;
    w.start_ns = start_ns;
    w.runtime_ns = runtime_ns;
    w.max_workers = max_workers;
    std::strcpy(w.comm, "db");
    return w;
}

std::pair<iou_iowq_proc_key, iou_iowq_exits> exits(std::uint64_t exited, std::uint64_t born_since,
                                                   std::uint64_t cpu_ns) {
    iou_iowq_exits e{};
    e.exited = exited;
    e.born_since = born_since;
    e.cpu_ns = cpu_ns;
    std::strcpy(e.comm, "db");
    return {{100, 0, 5}, e};
}

RequestSample walked(std::vector<iou_iowq_worker> workers,
                     std::vector<std::pair<iou_iowq_proc_key, iou_iowq_exits>> ex = {}) {
    RequestSample rq;
    rq.iowq_probe = true;
    rq.iowq_since_ns = kSince;
    rq.workers = std::move(workers);
    rq.iowq_exits = std::move(ex);
    return rq;
}

}  // namespace

TEST(AggregatorIowq, LiveWorkersByAccountAndTheirQueuesLimitsAndCpu) {
    std::map<IowqProcKey, IowqFloor> floor;
    // Two io-wqs: one with two bound workers (one older than the daemon), one with an unbound.
    const auto out = aggregation::iowq_processes(
        walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 500, 1'000'000'000, 8),
                worker(2, 0xa0, IOU_IOWQ_BOUND, 2000, 500'000'000, 8),
                worker(3, 0xb0, IOU_IOWQ_UNBOUND, 3000, 250'000'000, 16)}),
        {}, floor);
    ASSERT_EQ(out.size(), 1u);
    const IowqSnapshot& p = out[0];
    EXPECT_EQ(p.pid, 100u);
    EXPECT_EQ(p.comm, "db");
    EXPECT_EQ(p.workers[0], 2u);
    EXPECT_EQ(p.workers[1], 1u);
    EXPECT_EQ(p.max_workers[0], 8u);
    EXPECT_EQ(p.max_workers[1], 16u);
    EXPECT_EQ(p.queues, 2u);
    EXPECT_DOUBLE_EQ(p.cpu_seconds, 1.75);
    EXPECT_EQ(p.created, 2u);  // the one started before the daemon was not seen created
    EXPECT_EQ(p.exited, 0u);
}

TEST(AggregatorIowq, AWorkerMovesFromLiveToExitedWithoutCountingTwice) {
    std::map<IowqProcKey, IowqFloor> floor;
    aggregation::iowq_processes(walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 300),
                                        worker(2, 0xa0, IOU_IOWQ_BOUND, 2500, 200)}),
                                {}, floor);
    // Worker 2 exited with 250 ns of CPU; a third lived and died between the two samples.
    const auto out = aggregation::iowq_processes(
        walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 400)}, {exits(2, 2, 250 + 90)}), {}, floor);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].workers[0], 1u);
    EXPECT_EQ(out[0].created, 3u);
    EXPECT_EQ(out[0].exited, 2u);
    EXPECT_DOUBLE_EQ(out[0].cpu_seconds, 740e-9);
}

TEST(AggregatorIowq, AWorkerInNeitherReadDoesNotTakeTheCountersBack) {
    std::map<IowqProcKey, IowqFloor> floor;
    aggregation::iowq_processes(walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 300),
                                        worker(2, 0xa0, IOU_IOWQ_BOUND, 2500, 200)}),
                                {}, floor);
    // Worker 2 exited after the exits were read and before the walk: in neither.
    auto out = aggregation::iowq_processes(walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 350)}), {},
                                           floor);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].created, 2u);
    EXPECT_DOUBLE_EQ(out[0].cpu_seconds, 500e-9);
    // The next sample has it.
    out = aggregation::iowq_processes(
        walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 360)}, {exits(1, 1, 210)}), {}, floor);
    EXPECT_EQ(out[0].created, 2u);
    EXPECT_EQ(out[0].exited, 1u);
    EXPECT_DOUBLE_EQ(out[0].cpu_seconds, 570e-9);
}

TEST(AggregatorIowq, AGoneProcessLeavesNothingAndTheTierOffShowsNothing) {
    std::map<IowqProcKey, IowqFloor> floor;
    aggregation::iowq_processes(walked({worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 300)}), {}, floor);
    EXPECT_TRUE(aggregation::iowq_processes(walked({}), {}, floor).empty());
    EXPECT_TRUE(floor.empty());
    RequestSample off;
    off.workers = {worker(1, 0xa0, IOU_IOWQ_BOUND, 2000, 300)};
    EXPECT_TRUE(aggregation::iowq_processes(off, {}, floor).empty());
}

TEST(AggregatorIowq, RequestsInFlightOnIoWqSitBesideTheProcesssWorkers) {
    std::map<IowqProcKey, IowqFloor> floor;
    auto rq = walked({worker(1, 0xa0, IOU_IOWQ_UNBOUND, 2000, 300, 2),
                      worker(2, 0xa0, IOU_IOWQ_UNBOUND, 2100, 300, 2)});
    // Not timed (5.10-5.18): not known.
    EXPECT_EQ(aggregation::iowq_processes(rq, {}, floor)[0].requests_in_flight, -1);
    rq.timed = true;
    RingRecords rings(3);
    rings[0].ctx = 0x10, rings[0].born_ns = 7, rings[0].pid = 100;
    rings[1].ctx = 0x20, rings[1].born_ns = 8, rings[1].pid = 100;
    rings[2].ctx = 0x30, rings[2].born_ns = 9, rings[2].pid = 200;  // no worker: no series
    // Five on io-wq across pid 100's rings, two of them queued behind max_workers=2; a ring
    // reborn at 0x20 (born 99) is not one the walk found.
    rq.in_flight = {{0x10, 7, 4, 0, 0, -1, 0, 3},
                    {0x20, 8, 2, 0, 0, -1, 0, 2},
                    {0x20, 99, 6, 0, 0, -1, 0, 6},
                    {0x30, 9, 1, 0, 0, -1, 0, 1}};
    const auto out = aggregation::iowq_processes(rq, rings, floor);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].workers[1], 2u);
    EXPECT_EQ(out[0].requests_in_flight, 5);
    // None in flight: 0, not absent.
    rq.in_flight.clear();
    EXPECT_EQ(aggregation::iowq_processes(rq, rings, floor)[0].requests_in_flight, 0);
}
