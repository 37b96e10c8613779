// iopoll_without_poll_queues: an NVMe device whose polled requests an interrupt completes,
// because the driver has no poll queues to put them on.
#include <fmt/format.h>

#include "model/advisor_findings.hpp"

namespace iouscope::advisor {

namespace {

const DeviceSnapshot* find_device(const Snapshot& s, const std::string& name) {
    for (const auto& d : s.devices)
        if (d.name == name) return &d;
    return nullptr;
}

}  // namespace

void poll_queue_findings(const Snapshot& from, const Snapshot& to, Advice& out) {
    for (const auto& d : to.devices) {
        if (!d.iopoll_without_poll_queues) continue;
        const DeviceSnapshot* old = find_device(from, d.name);
        const double intent = old ? delta(old->polled_intent_irq, d.polled_intent_irq)
                                  : static_cast<double>(d.polled_intent_irq);
        const double all = old ? delta(old->polled, d.polled) + delta(old->irq, d.irq)
                               : static_cast<double>(d.polled + d.irq);
        Finding f;
        f.id = "iopoll_without_poll_queues";
        f.subject = "device " + d.name;
        f.device = d.name;
        const double share = all > 0 ? intent / all : 1;
        f.summary = fmt::format(
            "{}: {:.0f}% of uring_cmd completions were polled requests finished by an "
            "interrupt: IOPOLL spins on a device without poll queues",
            d.name, share * 100);
        f.evidence = {{"polled_requests_completed_by_irq", intent, "requests"},
                      {"irq_completed_share", share, "ratio"},
                      {"polls_per_completion", d.polls_per_completion, "ratio"}};
        f.change =
            "give the nvme driver poll queues: nvme.poll_queues=N on the kernel command "
            "line, or 'options nvme poll_queues=N' in /etc/modprobe.d and reload nvme";
        f.predicted = {{"irq_completed_share", 0, "ratio"}, {"polled_share", 1, "ratio"}};
        f.assumption =
            "the controller grants the extra queue pairs; until then every polled "
            "request waits for its interrupt while the poller spins";
        out.findings.push_back(std::move(f));
    }
}

}  // namespace iouscope::advisor
