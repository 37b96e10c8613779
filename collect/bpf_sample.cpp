// One sample's reads from the kernel, in one pass (BpfCollector::read_sample): the order the
// counts need, the sample's instant on both clocks, and the walk's verdict on SQPOLL rings.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>
#include <utility>

#include "collect/bpf_loader.hpp"
#include "common/clock.hpp"
#include "iouscope.skel.h"

namespace iouscope {

namespace {

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The sample's instant on both clocks: the realtime clock read between two monotonic reads,
// retried while the pair took more than 1 ms. A sampler preempted between two plain reads
// (measured: 0.5 s in a TCG guest whose one free CPU the daemon shares) would put every
// counter of the sample half a second away from its timestamp.
std::pair<std::uint64_t, double> clock_pair() {
    std::uint64_t best_span = ~0ull, mono = 0;
    double unix = 0;
    for (int i = 0; i < 5 && best_span > 1'000'000; ++i) {
        const std::uint64_t before = monotonic_ns();
        const double u = unix_now();
        const std::uint64_t after = monotonic_ns();
        if (after - before < best_span) {
            best_span = after - before;
            mono = before + (after - before) / 2;
            unix = u;
        }
    }
    return {mono, unix};
}

}  // namespace

bool BpfCollector::read_sample(RawSample& raw, std::string& error, bool light) {
    refresh_modules();
    // Drain before the walk: a ring created after the drain is walked now and recognised when
    // its record is drained next time; one that died before the walk is counted as short-lived.
    // Births from here on stop a light walk passing over rings (bpf/iouscope.bpf.c): those
    // before are drained now and taken out of the order.
    objs_.core->bss->walk_births_seen =
        const_cast<const volatile iou_stats&>(objs_.core->data_shared->stats).rings_created;
    drain_created(raw.created);
    order_.forget(raw.created);
    std::tie(raw.mono_ns, raw.unix_time) = clock_pair();
    const std::uint64_t walk_start_ns = raw.mono_ns;
    bool complete = true;
    raw.light_walk = light && light_walks() && order_.known() > 0;
    if (!walk_rings(raw.rings, complete, error, raw.light_walk)) return false;
    raw.walk_complete = complete;
    if (!raw.light_walk && !complete) order_.clear();
    if (!raw.light_walk && complete && !order_.learn(raw.rings) && !order_refused_) {
        order_refused_ = true;
        spdlog::warn("cannot write the walk's order ({}): walks read every ring",
                     std::strerror(errno));
    }
    if (complete) {
        const bool any = std::any_of(raw.rings.begin(), raw.rings.end(), [](auto& r) {
            return (r.setup_flags & IOU_SETUP_SQPOLL) != 0;
        });
        sqpoll_rings_.store(any ? 1 : 0);
    }
    // The sample's time is when the walk read its first record, not when it was asked for: a
    // sampler delayed between the two would skew every rate of the interval.
    if (!raw.rings.empty() && raw.rings.front().read_ns > raw.mono_ns) {
        const std::uint64_t late = raw.rings.front().read_ns - raw.mono_ns;
        raw.mono_ns += late;
        raw.unix_time += static_cast<double>(late) / 1e9;
    }
    read_maps(raw);
    read_requests(raw, walk_start_ns);
    read_iowq(raw);
    raw.ring_turns = provides(Feature::ring_turns);
    raw.cmd_done = provides(Feature::cmd_cqes);
    raw.submit_probe = provides(Feature::submit_time);
    raw.gap_sampling = gap_sampling(raw.mono_ns);
    raw.stats = stats();
    raw.sched_untraced = sched_gate_closed();
    return true;
}

}  // namespace iouscope
