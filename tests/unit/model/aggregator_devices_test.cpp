// The host-wide stages (model/aggregator_devices.cpp): NVMe devices, their poll-queue flag and
// their completions handed to io_uring.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Aggregator, DeviceWithoutPollQueuesIsFlaggedWhileItHappens) {
    Aggregator a;
    auto dev = [](const char* name, std::uint64_t polled, std::uint64_t irq, std::uint64_t intent) {
        iou_dev_key k{};
        std::strncpy(k.disk, name, sizeof k.disk - 1);
        iou_nvme_stats v{};
        v.polled = polled;
        v.irq = irq;
        v.polled_intent_irq = intent;
        v.polls = polled * 3;
        return std::make_pair(k, v);
    };
    RawSample raw = sample(kSec, {});
    raw.nvme = {dev("nvme0n1", 100, 0, 0), dev("nvme1n1", 0, 100, 100)};
    auto s = a.update(raw);
    ASSERT_EQ(s.devices.size(), 2u);
    EXPECT_FALSE(s.devices[0].iopoll_without_poll_queues);
    EXPECT_TRUE(s.devices[1].iopoll_without_poll_queues);
    raw.mono_ns = 2 * kSec;
    raw.nvme = {dev("nvme0n1", 300, 0, 0), dev("nvme1n1", 0, 100, 100)};
    s = a.update(raw);
    EXPECT_DOUBLE_EQ(s.devices[0].polled_ratio, 1.0);
    EXPECT_DOUBLE_EQ(s.devices[0].polls_per_completion, 3.0);
    EXPECT_DOUBLE_EQ(s.devices[0].completions_rate, 200.0);
    EXPECT_TRUE(s.devices[1].iopoll_without_poll_queues);  // within the hold time
    raw.mono_ns = 2 * kSec + Aggregator::kPollQueueFlagHoldNs;
    s = a.update(raw);
    EXPECT_FALSE(s.devices[1].iopoll_without_poll_queues);  // nothing new for a minute
}

TEST(Aggregator, CompletionsHandedToIoUringOnlyWhereTheProbeIsAttached) {
    Aggregator a;
    iou_dev_key k{};
    std::strncpy(k.disk, "nvme0n1", sizeof k.disk - 1);
    iou_nvme_stats v{};
    v.polled = 10;
    v.cqes = 10;
    v.cqe_delay_hist[10] = 4;  // [1024, 2048) ns
    v.cqe_delay_hist[12] = 6;  // [4096, 8192) ns
    v.cqe_delay_sum_ns = 4 * 1500 + 6 * 5000;
    RawSample raw = sample(kSec, {});
    raw.nvme = {{k, v}};
    auto s = a.update(raw);
    ASSERT_EQ(s.devices.size(), 1u);
    EXPECT_FALSE(s.devices[0].has_cqes) << "no probe: no count, rather than a count of 0";
    raw.cmd_done = true;
    raw.mono_ns = 2 * kSec;
    s = a.update(raw);
    const auto& d = s.devices[0];
    EXPECT_TRUE(d.has_cqes);
    EXPECT_EQ(d.cqes, 10u);
    EXPECT_EQ(d.cqe_delay.count, 10u);
    EXPECT_NEAR(d.cqe_delay.sum_s, 36e-6, 1e-12);
    // Cumulative buckets: 4 at or below 2048 ns, all 10 at or below 8192 ns.
    ASSERT_EQ(d.cqe_delay.upper_bounds_s.size(), d.cqe_delay.cumulative.size());
    for (std::size_t i = 0; i < d.cqe_delay.upper_bounds_s.size(); ++i) {
        const double ub = d.cqe_delay.upper_bounds_s[i];
        std::uint64_t want = ub < 2048e-9 ? 0 : ub < 8192e-9 ? 4 : 10;
        EXPECT_EQ(d.cqe_delay.cumulative[i], want) << ub;
    }
}
