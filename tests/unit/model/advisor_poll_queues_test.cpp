// iopoll_without_poll_queues (model/advisor_poll_queues.cpp).
#include <gtest/gtest.h>

#include "tests/unit/model/advisor_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

TEST(Advise, IopollWithoutPollQueues) {
    Snapshot a = snap(0), b = snap(10);
    DeviceSnapshot d;
    d.name = "nvme1n1";
    a.devices = {d};
    d.polled_intent_irq = 2000;
    d.irq = 2000;
    d.iopoll_without_poll_queues = true;
    b.devices = {d};
    const auto adv = make_advice(a, b);
    const Finding* f = find(adv, "iopoll_without_poll_queues");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->device, "nvme1n1");
    EXPECT_NEAR(figure(f->evidence, "irq_completed_share"), 1.0, 1e-9);
    EXPECT_NE(f->change.find("poll_queues"), std::string::npos);
}
