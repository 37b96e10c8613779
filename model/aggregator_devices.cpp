// The host-wide stages of Aggregator::update: io_do_iopoll totals by caller, and each NVMe
// namespace's uring_cmd completions, latency and the "IOPOLL without poll queues" flag.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

IopollSnapshot Aggregator::iopoll_snapshot(std::uint32_t caller, const iou_iopoll_stats& v) {
    IopollSnapshot io;
    io.caller = caller == IOU_CALLER_SQ_THREAD ? "sq_thread" : "app";
    io.calls = v.calls;
    io.empty = v.empty;
    io.completions = v.completions;
    io.seconds = v.ns / 1e9;
    return io;
}

DeviceSnapshot Aggregator::observe_device(const UpdateContext& cx, const iou_dev_key& key,
                                          const iou_nvme_stats& n) {
    DeviceSnapshot d;
    d.name = std::string(key.disk, strnlen(key.disk, sizeof key.disk));
    if (d.name.empty()) d.name = "unknown";
    d.polled = n.polled;
    d.irq = n.irq;
    d.polled_intent_irq = n.polled_intent_irq;
    d.polls = n.polls;
    std::vector<std::uint64_t> hist(std::begin(n.lat_hist), std::end(n.lat_hist));
    d.latency = latency_histogram(hist, n.lat_sum_ns);
    if (cx.raw.cmd_done) {
        d.has_cqes = true;
        d.cqes = n.cqes;
        const std::vector<std::uint64_t> delay(std::begin(n.cqe_delay_hist),
                                               std::end(n.cqe_delay_hist));
        d.cqe_delay = latency_histogram(delay, n.cqe_delay_sum_ns);
    }
    auto& st = devices_[d.name];
    std::vector<std::uint64_t> delta = hist;
    const std::uint64_t now = cx.raw.mono_ns;
    if (st.seen_before) {
        for (std::size_t i = 0; i < delta.size(); ++i)
            delta[i] -= std::min<std::uint64_t>(delta[i], st.prev.lat_hist[i]);
        const auto dpolled = n.polled - std::min(n.polled, st.prev.polled);
        const auto dirq = n.irq - std::min(n.irq, st.prev.irq);
        const auto dpolls = n.polls - std::min(n.polls, st.prev.polls);
        if (cx.interval > 0) d.completions_rate = (dpolled + dirq) / cx.interval;
        if (dpolled + dirq) d.polled_ratio = static_cast<double>(dpolled) / (dpolled + dirq);
        if (dpolled) d.polls_per_completion = static_cast<double>(dpolls) / dpolled;
        if (n.polled_intent_irq > st.prev.polled_intent_irq) st.last_intent_irq_ns = now;
    } else if (n.polled_intent_irq > 0) {
        st.last_intent_irq_ns = now;
    }
    if (auto p = log2_quantile(delta, 0.5)) d.latency_p50_seconds = *p / 1e9;
    if (auto p = log2_quantile(delta, 0.99)) d.latency_p99_seconds = *p / 1e9;
    d.iopoll_without_poll_queues =
        st.last_intent_irq_ns && now - st.last_intent_irq_ns <= kPollQueueFlagHoldNs;
    st.prev = n;
    st.seen_before = true;
    return d;
}

}  // namespace iouscope
