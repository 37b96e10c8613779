// sq_thread_overpriced (model/advisor_overpriced.cpp), with the prices of each alternative
// (model/advisor_pricing.cpp) it lists.
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

// The reproduction of the most common complaint: one SQPOLL ring, sq_thread_idle = 1000 ms,
// 1,500 NOPs/s evenly spaced (0.667 ms apart), the thread at a whole CPU that never sleeps.
struct Burner {
    Snapshot a = snap(0), b = snap(10);
    explicit Burner(bool deep, double work_cores = 0.01, double sqes_per_s = 1500) {
        auto t0 = thread(42, 7, 0, 0, 1.0);
        auto t1 = thread(42, 7, 10.0, work_cores * 10, 1.0);
        const auto sqes = static_cast<std::uint64_t>(sqes_per_s * 10);
        if (deep) {
            t0.has_gaps = t1.has_gaps = true;
            add_gaps(t0.gaps, 666'667, 1);
            t1.gaps = t0.gaps;
            add_gaps(t1.gaps, 666'667, sqes);
        }
        a.threads = {t0};
        b.threads = {t1};
        a.rings = {ring("7:5", 3, 42, 0)};
        b.rings = {ring("7:5", 3, 42, sqes)};
    }
};

const Alternative& alternative(const Finding& f, const std::string& name) {
    for (const auto& a : f.alternatives)
        if (a.name == name) return a;
    ADD_FAILURE() << "no alternative " << name;
    static const Alternative none;
    return none;
}

}  // namespace

TEST(Advise, ThreadNoIdleCanHelpIsPricedAgainstEveryAlternative) {
    const Burner w(true);
    const auto adv = make_advice(w.a, w.b);
    ASSERT_EQ(adv.findings.size(), 1u) << adv.findings.front().id;
    const Finding& f = adv.findings.front();
    EXPECT_EQ(f.id, "sq_thread_overpriced");
    EXPECT_EQ(f.sq_thread, 42);
    EXPECT_NEAR(figure(f.evidence, "cpu_seconds_per_sqe"), 1.0 / 1500, 1e-12);

    // Without SQPOLL: the thread's work plus one 1 us io_uring_enter per SQE.
    const Alternative& plain = alternative(f, "no_sqpoll");
    EXPECT_TRUE(plain.recommended);
    EXPECT_NEAR(plain.cpu_cores, 0.01 + 1500 * 1e-6, 1e-12);
    EXPECT_NEAR(plain.added_latency_seconds, 1e-6, 1e-15);
    EXPECT_NEAR(figure(f.predicted, "cpu_cores"), plain.cpu_cores, 1e-12);
    EXPECT_NEAR(figure(f.predicted, "cpu_cores_saved"), 1.0 - plain.cpu_cores, 1e-12);
    EXPECT_NE(f.change.find("without IORING_SETUP_SQPOLL"), std::string::npos);

    // 0.667 ms gaps against the shortest upstream spin (1 ms is a 4 ms tick, spun 4 to 8 ms).
    const Alternative& idle = alternative(f, "sq_thread_idle");
    EXPECT_FALSE(idle.available);
    EXPECT_NE(idle.note.find("no setting helps"), std::string::npos) << idle.note;

    // 15 SQEs per 10 ms batch: 100 batches/s, each spun out for 1.5 ticks (6 ms), then slept.
    const Alternative& batch = alternative(f, "batch_submissions");
    EXPECT_TRUE(batch.available);
    EXPECT_NEAR(batch.cpu_cores, 0.01 + 100 * 0.006, 1e-9);
    EXPECT_NEAR(batch.wakeups_per_second, 100, 1e-9);

    // Nanosecond idle would sleep through every gap after a short spin.
    const Alternative& ns = alternative(f, "idle_ns_kernel");
    EXPECT_TRUE(ns.available);
    EXPECT_LT(ns.cpu_cores, 0.1);
    EXPECT_FALSE(ns.recommended);  // 1,500 wakeups/s cost more in delay than the syscalls
    EXPECT_EQ(f.alternatives.front().name, "now");
    EXPECT_NEAR(f.alternatives.front().cpu_cores, 1.0, 1e-12);
}

TEST(Advise, WithoutTheDeepTierTheMeanGapStillSaysNoSettingHelps) {
    const Burner w(false);
    const auto adv = make_advice(w.a, w.b);
    const Finding* f = find(adv, "sq_thread_overpriced");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(alternative(*f, "sq_thread_idle").note.find("no setting helps"), std::string::npos);
    const Alternative& ns = alternative(*f, "idle_ns_kernel");
    EXPECT_FALSE(ns.available);
    EXPECT_NE(ns.note.find("--probes.deep"), std::string::npos);
    EXPECT_TRUE(alternative(*f, "no_sqpoll").recommended);
}

TEST(Advise, TheMeasuredSubmitCostPricesTheAlternative) {
    const Burner w(false);
    AdviseOptions o;
    o.submit_syscall_seconds = 3e-6;
    o.submit_cost_source = "measured at start-up: test";
    const auto adv = make_advice(w.a, w.b, o);
    const Finding* f = find(adv, "sq_thread_overpriced");
    ASSERT_NE(f, nullptr);
    EXPECT_NEAR(alternative(*f, "no_sqpoll").cpu_cores, 0.01 + 1500 * 3e-6, 1e-12);
    EXPECT_NE(f->assumption.find("measured at start-up: test"), std::string::npos);
    EXPECT_NEAR(figure(f->evidence, "submit_syscall_seconds"), 3e-6, 1e-18);
}

TEST(Advise, AThreadBusyWithWorkIsNotOverpriced) {
    // 100k SQEs/s, 95 % of the CPU work: without SQPOLL the submitter would pay as much.
    const Burner w(false, 0.95, 100'000);
    const auto adv = make_advice(w.a, w.b);
    EXPECT_EQ(find(adv, "sq_thread_overpriced"), nullptr);
}

TEST(Advise, TheRatioAndTheFloorBothGateTheFinding) {
    const Burner w(false);
    AdviseOptions o;
    o.price_ratio = 100;  // 1.0 against 0.0115 is 87x
    EXPECT_EQ(find(make_advice(w.a, w.b, o), "sq_thread_overpriced"), nullptr);
    o.price_ratio = 80;
    EXPECT_NE(find(make_advice(w.a, w.b, o), "sq_thread_overpriced"), nullptr);
    o.price_min_cpu_cores = 1.01;  // the thread uses 1.0
    EXPECT_EQ(find(make_advice(w.a, w.b, o), "sq_thread_overpriced"), nullptr);
}

TEST(Advise, AThreadStillOverpricedAfterTheIdleFixGetsBothFindings) {
    // 20 SQEs/s, 50 ms apart, idle 2 s: 1 ms would leave 6 ms of spin per SQE, 12 % of a CPU,
    // against 20 us/s of system calls without SQPOLL.
    Snapshot a = snap(0), b = snap(10);
    auto t0 = thread(42, 7, 0, 0, 2.0);
    auto t1 = thread(42, 7, 10.0, 0.001, 2.0);
    t0.has_gaps = t1.has_gaps = true;
    add_gaps(t0.gaps, 50'000'000, 1);
    t1.gaps = t0.gaps;
    add_gaps(t1.gaps, 50'000'000, 200);
    a.threads = {t0};
    b.threads = {t1};
    a.rings = {ring("7:5", 3, 42, 0)};
    b.rings = {ring("7:5", 3, 42, 200)};
    const auto adv = make_advice(a, b);
    const Finding* idle = find(adv, "sq_idle_too_long");
    ASSERT_NE(idle, nullptr);
    EXPECT_NEAR(figure(idle->predicted, "cpu_cores"), 20 * 0.006, 0.005);
    const Finding* price = find(adv, "sq_thread_overpriced");
    ASSERT_NE(price, nullptr);
    EXPECT_TRUE(alternative(*price, "no_sqpoll").recommended);
    EXPECT_EQ(adv.findings.size(), 2u);

    // Where the idle fix brings the thread within 10x of every alternative, it alone speaks.
    AdviseOptions o;
    o.price_ratio = 1e6;
    const auto alone = make_advice(a, b, o);
    EXPECT_NE(find(alone, "sq_idle_too_long"), nullptr);
    EXPECT_EQ(find(alone, "sq_thread_overpriced"), nullptr);
}
