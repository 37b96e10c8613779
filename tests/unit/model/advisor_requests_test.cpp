// The request path's findings (model/advisor_requests.cpp): each fires on its evidence, with the
// ring, opcode and change it names, and stays quiet on the healthy case beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "iouscope/requests.h"
#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

constexpr std::uint32_t kNop = 0, kFsync = 3, kRead = 22, kWrite = 23;

std::shared_ptr<const std::vector<std::string>> names() {
    auto n = std::make_shared<std::vector<std::string>>(64);
    (*n)[kNop] = "nop";
    (*n)[kFsync] = "fsync";
    (*n)[kRead] = "read";
    (*n)[kWrite] = "write";
    return n;
}

// A plain ring with the request tier's counts, born long before the window.
RingSnapshot plain(const std::string& id, std::uint64_t ctx) {
    RingSnapshot r = ring(id, ctx, -1, 0);
    r.mode = "plain";
    r.pid = 100;
    r.cq_entries = 128;
    r.requests.has_requests = r.requests.timed = true;
    return r;
}

// Latency histogram with n observations in the bucket bounded by `le` (bounds 1 us .. 1 s).
LatencyHistogram latency(std::uint64_t n, double le) {
    LatencyHistogram h;
    for (double b = 1e-6; b <= 1.0; b *= 2) {
        h.upper_bounds_s.push_back(b);
        h.cumulative.push_back(b >= le ? n : 0);
    }
    h.count = n;
    return h;
}

RequestOpSnapshot op(std::uint32_t code, std::uint64_t submitted) {
    RequestOpSnapshot o;
    o.opcode = code;
    o.submitted = submitted;
    for (auto& p : o.paths) p.latency = latency(0, 1);
    return o;
}

// Two snapshots 10 s apart holding ring `a` then ring `b`.
Advice judge(const RingSnapshot& a, const RingSnapshot& b, std::vector<IowqSnapshot> iowq_a = {},
             std::vector<IowqSnapshot> iowq_b = {}, AdviseOptions o = {}) {
    Snapshot from = snap(100), to = snap(110);
    from.opcode_names = to.opcode_names = names();
    from.rings = {a};
    to.rings = {b};
    from.iowq = std::move(iowq_a);
    to.iowq = std::move(iowq_b);
    return make_advice(from, to, o);
}

IowqSnapshot workers(double cpu_seconds) {
    IowqSnapshot w;
    w.pid = 100;
    w.workers = {4, 0};
    w.cpu_seconds = cpu_seconds;
    return w;
}

}  // namespace

// 1,000 forced NOPs/s that took under 16 us on io-wq: drop IOSQE_ASYNC; the workers' 0.3 core
// is theirs, as they are all of the ring's punts.
TEST(AdviseRequests, ForcedAsyncThatWaitedForNothing) {
    RingSnapshot a = plain("100:3", 0x1000), b = a;
    a.requests.ops = {op(kNop, 0)};
    b.requests.ops = {op(kNop, 10000)};
    b.requests.ops[0].punted = b.requests.ops[0].punted_forced = 10000;
    b.requests.ops[0].paths[IOU_PATH_IOWQ].latency = latency(10000, 16e-6);
    const auto adv = judge(a, b, {workers(1)}, {workers(4)});
    const Finding* f = find(adv, "requests_forced_async");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "ring 100:3 nop");
    EXPECT_EQ(f->ring, "100:3");
    EXPECT_NEAR(figure(f->evidence, "forced_punts_per_second"), 1000, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores_saved"), 0.3, 1e-9);
    EXPECT_NE(f->change.find("IOSQE_ASYNC"), std::string::npos);
    EXPECT_EQ(find(adv, "requests_punted_without_nowait"), nullptr);
}

// Forced reads that blocked for 10 ms each on io-wq needed their workers: no finding; nor for
// forced requests too few to matter.
TEST(AdviseRequests, ForcedAsyncThatBlockedOrIsRareIsQuiet) {
    RingSnapshot a = plain("100:3", 0x1000), b = a;
    a.requests.ops = {op(kRead, 0)};
    b.requests.ops = {op(kRead, 10000)};
    b.requests.ops[0].punted = b.requests.ops[0].punted_forced = 10000;
    b.requests.ops[0].paths[IOU_PATH_IOWQ].latency = latency(10000, 0.0164);
    EXPECT_EQ(find(judge(a, b), "requests_forced_async"), nullptr);
    b.requests.ops[0].paths[IOU_PATH_IOWQ].latency = latency(10000, 16e-6);
    b.requests.ops[0].submitted = b.requests.ops[0].punted = b.requests.ops[0].punted_forced = 400;
    EXPECT_EQ(find(judge(a, b), "requests_forced_async"), nullptr);
    // fsyncs the kernel itself forces to io-wq (its prep sets REQ_F_FORCE_ASYNC), quick or not:
    // no IOSQE_ASYNC to drop. stress-ng's io-uring stressor drew this false alarm.
    a.requests.ops = {op(kFsync, 0)};
    b.requests.ops = {op(kFsync, 10000)};
    b.requests.ops[0].punted = b.requests.ops[0].punted_forced = 10000;
    b.requests.ops[0].paths[IOU_PATH_IOWQ].latency = latency(10000, 131e-6);
    EXPECT_EQ(find(judge(a, b), "requests_forced_async"), nullptr);
}

// Every buffered write punted, and hashed: O_DIRECT. Reads punted a tenth of the time and NOPs
// punted for other reasons are not this finding's.
TEST(AdviseRequests, WritesPuntedWithoutNowait) {
    RingSnapshot a = plain("100:4", 0x2000), b = a;
    a.requests.ops = {op(kNop, 0), op(kRead, 0), op(kWrite, 0)};
    b.requests.ops = {op(kNop, 20000), op(kRead, 20000), op(kWrite, 5000)};
    b.requests.ops[0].punted = 20000;  // NOPs punted: not a read or write
    b.requests.ops[1].punted = 2000;   // a tenth of the reads
    b.requests.ops[2].punted = b.requests.ops[2].punted_hashed = 5000;
    const auto adv = judge(a, b);
    ASSERT_EQ(adv.findings.size(), 1u);
    const Finding& f = adv.findings[0];
    EXPECT_EQ(f.id, "requests_punted_without_nowait");
    EXPECT_EQ(f.subject, "ring 100:4 write");
    EXPECT_NEAR(figure(f.evidence, "punts_per_second"), 500, 1e-9);
    EXPECT_NEAR(figure(f.evidence, "hashed_punts_per_second"), 500, 1e-9);
    EXPECT_NE(f.change.find("O_DIRECT"), std::string::npos);
    // No punts left, and no CPU claimed saved: O_DIRECT pays the device at submission.
    EXPECT_EQ(figure(f.predicted, "punts_per_second"), 0);
    EXPECT_TRUE(std::none_of(f.predicted.begin(), f.predicted.end(),
                             [](const auto& p) { return p.name == "cpu_cores_saved"; }));
}

// 500,000 calls/s of one SQE each at 1 us a call: batches of 32 save 0.48 of a core. Two SQEs
// a call, or 10,000 calls/s, or an SQPOLL ring: quiet.
TEST(AdviseRequests, OneSqePerEnterOnABusyRing) {
    RingSnapshot a = plain("100:5", 0x3000), b = a;
    a.requests.has_enters = b.requests.has_enters = true;
    b.requests.enters = b.requests.enter_sqes = 5'000'000;
    auto adv = judge(a, b);
    const Finding* f = find(adv, "single_sqe_per_enter");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "ring 100:5");
    EXPECT_NEAR(figure(f->evidence, "sqes_per_enter"), 1, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores_saved"), (500000 - 500000 / 32.0) * 1e-6, 1e-9);
    EXPECT_NE(f->change.find("32 at a time"), std::string::npos);
    // Priced beside the calls now and an SQ thread, which at a 2 us gap never sleeps.
    ASSERT_EQ(f->alternatives.size(), 3u);
    EXPECT_EQ(f->alternatives[0].name, "now");
    EXPECT_NEAR(f->alternatives[0].cpu_cores, 0.5, 1e-9);
    EXPECT_TRUE(f->alternatives[1].recommended);
    EXPECT_EQ(f->alternatives[2].name, "sqpoll");
    EXPECT_NEAR(f->alternatives[2].cpu_cores, 1.0, 1e-9);
    EXPECT_NE(f->alternatives[2].note.find("never sleeps"), std::string::npos);

    b.requests.enter_sqes = 10'000'000;
    EXPECT_EQ(find(judge(a, b), "single_sqe_per_enter"), nullptr);
    b.requests.enters = b.requests.enter_sqes = 100'000;
    EXPECT_EQ(find(judge(a, b), "single_sqe_per_enter"), nullptr);
    b.requests.enters = b.requests.enter_sqes = 5'000'000;
    a.sq_thread = b.sq_thread = 7;
    EXPECT_EQ(find(judge(a, b), "single_sqe_per_enter"), nullptr);
}

// One thread waits 2,000 times a second and is woken 8 times per wait to post completions by
// task work: DEFER_TASKRUN would wake it once per wait, 14,000 wake-ups a second fewer. Quiet
// when a second thread entered the ring, when each wait is woken about once, when the ring has
// the flag or an SQ thread, and where the kernel cannot count the wake-ups.
TEST(AdviseRequests, WaiterWokenPerCompletionAsksForDeferTaskrun) {
    RingSnapshot a = plain("100:9", 0x7000), b = a;
    a.requests.has_enters = b.requests.has_enters = true;
    a.requests.has_wait_task_work = b.requests.has_wait_task_work = true;
    a.requests.issuer_switches = b.requests.issuer_switches = 3;
    b.requests.enters = b.requests.enter_waits = 20'000;
    b.requests.enter_sqes = 160'000;
    b.requests.wait_task_work = 160'000;
    const auto adv = judge(a, b);
    const Finding* f = find(adv, "waiter_woken_per_completion");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "ring 100:9");
    EXPECT_NEAR(figure(f->evidence, "wakeups_per_wait"), 8, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "task_work_wakeups_per_second"), 2000, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "wakeups_saved_per_second"), 14000, 1e-9);
    EXPECT_NE(f->change.find("IORING_SETUP_DEFER_TASKRUN"), std::string::npos);
    EXPECT_NE(f->change.find("IORING_SETUP_SINGLE_ISSUER"), std::string::npos);
    // No CPU claimed: a wake-up's price is not measured.
    for (const auto& p : f->predicted) EXPECT_NE(p.name, "cpu_cores_saved");

    const auto quiet = [&](RingSnapshot bb) {
        return find(judge(a, bb), "waiter_woken_per_completion") == nullptr;
    };
    RingSnapshot c = b;
    c.requests.issuer_switches = 4;  // one call from another thread in the window
    EXPECT_TRUE(quiet(c));
    c = b;
    c.requests.wait_task_work = 30'000;  // 1.5 wake-ups per wait
    EXPECT_TRUE(quiet(c));
    c = b;
    c.requests.enter_waits = 500;  // 50 waits/s woken 320 times each: 15,950 saved
    EXPECT_FALSE(quiet(c));
    c.requests.wait_task_work = 10'000;  // 1,000/s, 950 saved: too few
    EXPECT_TRUE(quiet(c));
    c = b;
    c.setup_flags = 1U << 13;  // IORING_SETUP_DEFER_TASKRUN already
    EXPECT_TRUE(quiet(c));
    c = b;
    c.sq_thread = 7;
    EXPECT_TRUE(quiet(c));
    c = b;
    c.requests.has_wait_task_work = false;
    EXPECT_TRUE(quiet(c));
}

// 4,500 IPIs a second for task work: COOP_TASKRUN leaves none. Quiet with COOP_TASKRUN or
// DEFER_TASKRUN, an SQ thread, 400 a second, or without the counter.
TEST(AdviseRequests, TaskWorkInterruptingTheThreadAsksForCoopTaskrun) {
    RingSnapshot a = plain("100:10", 0x8000), b = a;
    a.requests.has_enters = b.requests.has_enters = true;
    a.requests.has_task_work_ipis = b.requests.has_task_work_ipis = true;
    a.requests.task_work_ipis = 5'000;
    b.requests.task_work_ipis = 50'000;
    const auto adv = judge(a, b);
    const Finding* f = find(adv, "task_work_interrupts_thread");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "ring 100:10");
    EXPECT_NEAR(figure(f->evidence, "task_work_ipis_per_second"), 4500, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "task_work_ipis_per_second"), 0, 1e-9);
    EXPECT_NEAR(figure(f->predicted, "ipis_saved_per_second"), 4500, 1e-9);
    EXPECT_NE(f->change.find("IORING_SETUP_COOP_TASKRUN"), std::string::npos);
    EXPECT_EQ(find(adv, "waiter_woken_per_completion"), nullptr);

    const auto quiet = [&](RingSnapshot bb) {
        return find(judge(a, bb), "task_work_interrupts_thread") == nullptr;
    };
    for (std::uint32_t flag : {1U << 8, 1U << 13, 1U << 1}) {
        RingSnapshot c = b;
        c.setup_flags = flag;
        EXPECT_TRUE(quiet(c)) << flag;
    }
    RingSnapshot c = b;
    c.requests.task_work_ipis = 9'000;  // 400/s
    EXPECT_TRUE(quiet(c));
    c = b;
    c.requests.has_task_work_ipis = false;
    EXPECT_TRUE(quiet(c));
}

// 100 CQEs overflowed a CQ of 128: 256 entries hold them. None in the window: quiet.
TEST(AdviseRequests, CqOverflowNamesTheCqSize) {
    RingSnapshot a = plain("100:6", 0x4000), b = a;
    a.requests.has_overflow = b.requests.has_overflow = true;
    a.requests.overflow_cqes = 7;
    b.requests.overflow_cqes = 107;
    const auto adv = judge(a, b);
    const Finding* f = find(adv, "cq_overflow");
    ASSERT_NE(f, nullptr);
    EXPECT_NEAR(figure(f->evidence, "overflow_cqes"), 100, 1e-9);
    EXPECT_NE(f->change.find("cq_entries = 256"), std::string::npos);
    a.requests.overflow_cqes = 107;
    EXPECT_EQ(find(judge(a, b), "cq_overflow"), nullptr);
}

TEST(AdviseRequests, ProvidedBuffersRanDry) {
    RingSnapshot a = plain("100:7", 0x5000), b = a;
    a.requests.ops = {op(kRead, 0)};
    b.requests.ops = {op(kRead, 1000)};
    b.requests.ops[0].paths[IOU_PATH_POLL].results[IOU_RES_ENOBUFS] = 50;
    const auto adv = judge(a, b);
    const Finding* f = find(adv, "provided_buffers_ran_dry");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->subject, "ring 100:7 read");
    EXPECT_NEAR(figure(f->evidence, "enobufs_per_second"), 5, 1e-9);
    b.requests.ops[0].paths[IOU_PATH_POLL].results[IOU_RES_ENOBUFS] = 5;
    EXPECT_EQ(find(judge(a, b), "provided_buffers_ran_dry"), nullptr);
}

TEST(AdviseRequests, StuckRequestsNameTheOldest) {
    RingSnapshot a = plain("100:8", 0x6000), b = a;
    b.requests.stuck = 2;
    b.requests.oldest_age_seconds = 42;
    b.requests.oldest_opcode = kRead;
    b.requests.oldest_fd = 9;
    const auto adv = judge(a, b);
    const Finding* f = find(adv, "requests_stuck");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->summary.find("read on fd 9"), std::string::npos) << f->summary;
    EXPECT_NEAR(figure(f->evidence, "oldest_age_seconds"), 42, 1e-9);
    EXPECT_NE(f->change.find("fd 9"), std::string::npos);
}

// A ring the window's start did not hold: judged whole when born inside the window, not at all
// (and noted while busy) when older, since its counts before the window are not known.
TEST(AdviseRequests, ARingMissingAtTheStartIsJudgedOnlyWhenBornInside) {
    RingSnapshot b = plain("100:9", 0x7000);
    b.requests.has_overflow = true;
    b.requests.overflow_cqes = 100;
    b.sqe_rate = 10;
    Snapshot from = snap(100), to = snap(110);
    to.rings = {b};
    b.start_time_seconds = 50;
    to.rings = {b};
    auto adv = make_advice(from, to);
    EXPECT_EQ(find(adv, "cq_overflow"), nullptr);
    ASSERT_EQ(adv.notes.size(), 1u);
    EXPECT_NE(adv.notes[0].find("1 busy rings were idle"), std::string::npos);
    to.rings[0].start_time_seconds = 105;
    adv = make_advice(from, to);
    EXPECT_NE(find(adv, "cq_overflow"), nullptr);
}

// The daemon's window keeps a busy plain ring at its start, and drops an idle one.
TEST(AdviseRequests, TheWindowKeepsBusyPlainRingsAtItsStart) {
    AdviceWindow w(10);
    RingSnapshot busy = plain("100:3", 0x1000), idle = plain("100:4", 0x2000);
    busy.requests.has_overflow = idle.requests.has_overflow = true;
    busy.sqe_rate = 100;
    auto s0 = std::make_shared<Snapshot>(snap(100));
    s0->rings = {busy, idle};
    w.update(s0);
    auto s1 = std::make_shared<Snapshot>(snap(111));
    busy.requests.overflow_cqes = idle.requests.overflow_cqes = 5;
    s1->rings = {busy, idle};
    const Advice adv = w.update(s1);
    ASSERT_EQ(adv.findings.size(), 1u);
    EXPECT_EQ(adv.findings[0].ring, "100:3");
}

// Two rings of one process punting alike share its workers' CPU: each predicts half.
TEST(AdviseRequests, TheWorkersCpuIsSharedAmongTheProcesssPunts) {
    RingSnapshot a1 = plain("100:3", 0x1000), a2 = plain("100:4", 0x2000);
    a1.requests.ops = a2.requests.ops = {op(kNop, 0)};
    RingSnapshot b1 = a1, b2 = a2;
    for (auto* b : {&b1, &b2}) {
        b->requests.ops = {op(kNop, 10000)};
        b->requests.ops[0].punted = b->requests.ops[0].punted_forced = 10000;
        b->requests.ops[0].paths[IOU_PATH_IOWQ].latency = latency(10000, 16e-6);
    }
    Snapshot from = snap(100), to = snap(110);
    from.opcode_names = to.opcode_names = names();
    from.rings = {a1, a2};
    to.rings = {b1, b2};
    from.iowq = {workers(1)};
    to.iowq = {workers(4)};
    const auto adv = make_advice(from, to);
    ASSERT_EQ(adv.findings.size(), 2u);
    for (const auto& f : adv.findings)
        EXPECT_NEAR(figure(f.predicted, "cpu_cores_saved"), 0.15, 1e-9) << f.subject;
}

// The quantile every request view shares: the bucket's upper bound, the last finite bound past
// them (as Prometheus's histogram_quantile), nothing without observations; and opcodes by the
// kernel's name or by number.
TEST(AdviseRequests, BucketQuantileAndOpcodeNames) {
    LatencyHistogram h = latency(100, 16e-6);  // all 100 in the bucket up to 16 us
    EXPECT_NEAR(bucket_quantile(h, 0.5).value_or(-1), 16e-6, 1e-12);
    h.cumulative[3] = 50;  // 50 of them up to 8 us, the other 50 up to 16 us
    EXPECT_NEAR(bucket_quantile(h, 0.5).value_or(-1), 8e-6, 1e-12);
    h.count = 200;  // 100 past the last bound
    EXPECT_NEAR(bucket_quantile(h, 0.99).value_or(-1), h.upper_bounds_s.back(), 1e-12);
    EXPECT_FALSE(bucket_quantile(LatencyHistogram{}, 0.5).has_value());
    Snapshot s;
    s.opcode_names = names();
    EXPECT_EQ(opcode_name(s, kRead), "read");
    EXPECT_EQ(opcode_name(s, 5), "op5");        // unnamed in the table
    EXPECT_EQ(opcode_name(s, 1000), "op1000");  // past it
    s.opcode_names.reset();
    EXPECT_EQ(opcode_name(s, kRead), "op22");
}
