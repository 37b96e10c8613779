// sq_idle_too_long and sq_spinning_without_work (model/advisor_idle_findings.cpp).
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

// Thread 77 over 10 s: a whole CPU with a 1 s idle for bursty(10)'s 2,000 SQEs/s.
std::pair<Snapshot, Snapshot> bursty_spinner() {
    Snapshot a = snap(100), b = snap(110);
    auto t0 = thread(77, 10, 5.0, 0.1);
    t0.has_gaps = true;
    t0.gaps = bursty(0);
    auto t1 = thread(77, 10, 15.0, 0.2);  // a whole CPU over 10 s
    t1.has_gaps = true;
    t1.gaps = bursty(10);
    a.threads = {t0};
    b.threads = {t1};
    a.rings = {ring("10:3", 1, 77, 0)};
    b.rings = {ring("10:3", 1, 77, 20000)};
    return {a, b};
}

}  // namespace

TEST(Advise, IdleTooLongRecommendsTheCheapestSetting) {
    const auto [a, b] = bursty_spinner();
    const auto adv = make_advice(a, b);
    EXPECT_NEAR(adv.window_seconds, 10, 1e-9);
    const Finding* f = find(adv, "sq_idle_too_long");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->sq_thread, 77);
    EXPECT_EQ(f->ring, "10:3");
    ASSERT_FALSE(f->curve.empty());
    const IdleCurvePoint* rec = nullptr;
    for (const auto& p : f->curve)
        if (p.recommended) rec = &p;
    ASSERT_NE(rec, nullptr);
    EXPECT_LT(rec->setting_seconds, 0.045);  // below the gaps between bursts
    EXPECT_NEAR(figure(f->predicted, "wakeups_per_second"), 20, 0.5);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores"), rec->cpu_cores, 1e-12);
    EXPECT_NEAR(figure(f->predicted, "cpu_cores_saved"), 1.0 - rec->cpu_cores, 1e-9);
    EXPECT_NE(f->assumption.find("HZ=250"), std::string::npos);
    EXPECT_NE(f->change.find("sq_thread_idle"), std::string::npos);
    // The model reproduces what was measured at the current setting.
    EXPECT_NEAR(figure(f->evidence, "model_cpu_cores_at_current_setting"), 1.0, 0.02);
}

TEST(Advise, WellTunedThreadHasNoFinding) {
    Snapshot a = snap(0), b = snap(10);
    auto t0 = thread(77, 10, 0, 0, 0.004);
    t0.has_gaps = true;
    t0.gaps = bursty(0);
    auto t1 = thread(77, 10, 2.2, 1.0, 0.004);
    t1.has_gaps = true;
    t1.gaps = bursty(10);
    t1.wakeups = 200;
    a.threads = {t0};
    b.threads = {t1};
    a.rings = {ring("10:3", 1, 77, 0)};
    b.rings = {ring("10:3", 1, 77, 20000)};
    const auto adv = make_advice(a, b);
    EXPECT_TRUE(adv.findings.empty()) << adv.findings.front().id;
}

TEST(Advise, SpinningWithoutWork) {
    Snapshot a = snap(0), b = snap(10);
    a.threads = {thread(5, 9, 0, 0)};
    b.threads = {thread(5, 9, 9.9, 0)};
    a.rings = {ring("9:4", 2, 5, 100)};
    b.rings = {ring("9:4", 2, 5, 100)};
    const auto adv = make_advice(a, b);
    ASSERT_EQ(adv.findings.size(), 1u);
    const auto& f = adv.findings.front();
    EXPECT_EQ(f.id, "sq_spinning_without_work");
    EXPECT_NEAR(figure(f.predicted, "cpu_cores_saved"), 0.99, 1e-6);
    EXPECT_NE(f.change.find("without IORING_SETUP_SQPOLL"), std::string::npos);
    EXPECT_FALSE(adv.gaps_available);
    EXPECT_FALSE(adv.notes.empty());  // says the idle curve needs --probes.deep
}

// Seeds patch 002: a kernel whose BTF has io_sq_data.idle_mode takes IORING_SETUP_IDLE_NS, so a
// thread set in milliseconds (jiffies) is offered sub-millisecond settings; without it, the
// shortest is 1 ms.
TEST(Advise, AKernelWithNanosecondIdleIsOfferedSubMillisecondSettings) {
    auto recommended = [](bool ns_kernel, std::string& change) {
        auto [a, b] = bursty_spinner();
        a.idle_ns_supported = b.idle_ns_supported = ns_kernel;
        const Advice adv = make_advice(a, b);
        const Finding* f = find(adv, "sq_idle_too_long");
        if (!f) return -1.0;
        change = f->change;
        for (const auto& p : f->curve)
            if (p.recommended) return p.setting_seconds;
        return -1.0;
    };
    std::string ns_change, ms_change;
    const double ns = recommended(true, ns_change);
    const double ms = recommended(false, ms_change);
    // Bursts of SQEs 50 us apart, 45 ms between bursts: spin out the 50 us, sleep the rest.
    EXPECT_GT(ns, 50e-6);
    EXPECT_LT(ns, 1e-3);
    EXPECT_NE(ns_change.find(std::to_string(std::llround(ns * 1e9)) +
                             " (ns) with IORING_SETUP_IDLE_NS in flags"),
              std::string::npos)
        << ns_change;
    EXPECT_GE(ms, 1e-3);
    EXPECT_NE(ms_change.find(" (ms)"), std::string::npos) << ms_change;
}
