// The pieces every family of findings uses (model/advisor_window.hpp): one SQ thread's window,
// the wording of figures and findings, and one thread's idle curve from the idle model.
#include "model/advisor_window.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/counters.hpp"

namespace iouscope::advisor {

std::string fmt_seconds(double s) {
    if (s >= 1) return fmt::format("{:.3g} s", s);
    if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
    return fmt::format("{:.3g} us", s * 1e6);
}

std::string fmt_setting(double s, bool ns_granular) {
    if (ns_granular) return fmt::format("{} ns ({})", std::llround(s * 1e9), fmt_seconds(s));
    return fmt::format("{} ms", std::llround(s * 1e3));
}

namespace {

// Positions of v's elements by key (stable), or none when v is in key order already.
template <class T, class Key>
std::vector<std::uint32_t> order_by(const std::vector<T>& v, Key key) {
    std::vector<std::uint32_t> order;
    if (std::is_sorted(v.begin(), v.end(), [&](const T& a, const T& b) { return key(a) < key(b); }))
        return order;
    order.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return key(v[a]) < key(v[b]); });
    return order;
}

// The first element of v whose key is k, through its order (order_by), nullptr if none.
template <class T, class Key, class K>
const T* find_by(const std::vector<T>& v, const std::vector<std::uint32_t>& order, Key key, K k) {
    if (order.empty()) {
        const auto it = std::lower_bound(v.begin(), v.end(), k,
                                         [&](const T& x, K want) { return key(x) < want; });
        return it != v.end() && key(*it) == k ? &*it : nullptr;
    }
    const auto it = std::lower_bound(order.begin(), order.end(), k,
                                     [&](std::uint32_t i, K want) { return key(v[i]) < want; });
    return it != order.end() && key(v[*it]) == k ? &v[*it] : nullptr;
}

constexpr auto kTid = [](const ThreadSnapshot& t) { return t.tid; };
constexpr auto kCtx = [](const RingSnapshot& r) { return r.ctx; };

}  // namespace

FromIndex::FromIndex(const Snapshot& s) : s_(s), threads_(order_by(s.threads, kTid)) {}

const ThreadSnapshot* FromIndex::thread(std::int32_t tid) const {
    return find_by(s_.threads, threads_, kTid, tid);
}

const std::vector<std::uint32_t>& FromIndex::ring_order() const {
    if (!rings_) rings_ = order_by(s_.rings, kCtx);
    return *rings_;
}

const RingSnapshot* FromIndex::ring(const RingSnapshot& now) const {
    if (const auto it = matched_.find(&now); it != matched_.end()) return it->second;
    const RingSnapshot* r = find_by(s_.rings, ring_order(), kCtx, now.ctx);
    return r && r->id == now.id ? r : nullptr;
}

void FromIndex::match(std::span<const RingSnapshot* const> now) const {
    const auto by_ctx = [](const RingSnapshot* a, const RingSnapshot* b) {
        return a->ctx < b->ctx;
    };
    if (now.size() * 64 < s_.rings.size() || !std::is_sorted(now.begin(), now.end(), by_ctx))
        return;
    const auto& order = ring_order();
    const auto at = [&](std::size_t k) { return &s_.rings[order.empty() ? k : order[k]]; };
    // The first of this snapshot's rings with the ctx, as find_by() finds it.
    std::size_t k = 0;
    for (const RingSnapshot* r : now) {
        while (k < s_.rings.size() && at(k)->ctx < r->ctx) ++k;
        const RingSnapshot* old = k < s_.rings.size() && at(k)->ctx == r->ctx ? at(k) : nullptr;
        matched_[r] = old && old->id == r->id ? old : nullptr;
    }
}

double delta(double a, double b) {
    return std::max(0.0, b - a);
}
double delta(std::uint64_t a, std::uint64_t b) {
    return b > a ? static_cast<double>(b - a) : 0;
}

double wake_latency(const ThreadSnapshot& a, const ThreadSnapshot& b, const AdviseOptions& o,
                    bool& measured) {
    measured = false;
    if (b.wake_latency_log2.empty()) return o.assumed_wake_latency_seconds;
    std::vector<std::uint64_t> d(b.wake_latency_log2);
    if (a.wake_latency_log2.size() == d.size())
        for (std::size_t i = 0; i < d.size(); ++i) d[i] -= std::min(d[i], a.wake_latency_log2[i]);
    if (auto p50 = log2_quantile(d, 0.5)) {
        measured = true;
        return *p50 / 1e9;
    }
    return o.assumed_wake_latency_seconds;
}

std::vector<ThreadWindow> thread_windows(const FromIndex& index, const Snapshot& to, double window,
                                         Advice& out) {
    if (to.threads.empty()) return {};
    // The SQ threads' rings by thread, each thread's in the snapshot's order.
    std::vector<const RingSnapshot*> sq_rings;
    for (const auto& r : to.rings)
        if (r.sq_thread > 0) sq_rings.push_back(&r);
    index.match(sq_rings);
    std::vector<std::pair<std::int32_t, const RingSnapshot*>> rings_of;
    rings_of.reserve(sq_rings.size());
    for (const RingSnapshot* r : sq_rings) rings_of.emplace_back(r->sq_thread, r);
    std::sort(rings_of.begin(), rings_of.end());
    std::vector<ThreadWindow> windows;
    for (const auto& b : to.threads) {
        const ThreadSnapshot* a = index.thread(b.tid);
        if (!a) {
            out.notes.push_back(fmt::format(
                "sq_thread {}: started inside the window; judged once it has a full one", b.tid));
            continue;
        }
        ThreadWindow tw{a, &b, 0, 0, 0, 0, 0, 0, {}};
        tw.cpu = delta(a->cpu_seconds, b.cpu_seconds) / window;
        tw.work = delta(a->work_seconds, b.work_seconds) / window;
        tw.spin = std::max(0.0, tw.cpu - tw.work);
        tw.wakeups = delta(a->wakeups, b.wakeups) / window;
        tw.sleeps = delta(a->sleeps, b.sleeps) / window;
        auto r_at = std::lower_bound(rings_of.begin(), rings_of.end(), b.tid,
                                     [](const auto& e, std::int32_t tid) { return e.first < tid; });
        for (; r_at != rings_of.end() && r_at->first == b.tid; ++r_at) {
            const RingSnapshot* r = r_at->second;
            tw.rings.push_back(r);
            if (const auto* old = index.ring(*r))
                tw.sqes += delta(old->sqes_total, r->sqes_total) / window;
        }
        out.gaps_available = out.gaps_available || b.has_gaps;
        windows.push_back(tw);
    }
    return windows;
}

Finding owned_finding(const char* id, std::string subject, std::uint32_t pid,
                      const std::string& comm, const CgroupLabels& cgroup) {
    Finding f;
    f.id = id;
    f.subject = std::move(subject);
    f.pid = pid;
    f.comm = comm;
    f.container_id = cgroup.container_id;
    f.pod_uid = cgroup.pod_uid;
    return f;
}

Finding thread_finding(const char* id, const ThreadSnapshot& t) {
    Finding f = owned_finding(id, fmt::format("sq_thread {}", t.tid), t.pid, t.comm, t.cgroup);
    f.sq_thread = t.tid;
    return f;
}

std::string ring_list(const std::vector<const RingSnapshot*>& rings) {
    std::string out;
    for (const auto* r : rings) out += (out.empty() ? "" : ", ") + r->id;
    return out;
}

double recorded_between(const ThreadSnapshot& a, const ThreadSnapshot& b) {
    if (b.gaps.recorded_seconds < 0) return std::numeric_limits<double>::infinity();
    return std::max(0.0, b.gaps.recorded_seconds - a.gaps.recorded_seconds);
}

double curve_cost(const IdleCurvePoint& p, const AdviseOptions& o, double wake_s) {
    return p.cpu_cores + o.wake_weight * p.wakeups_per_second * wake_s;
}

std::vector<IdleCurvePoint> thread_curve(const ThreadWindow& tw, const Snapshot& to, double window,
                                         bool candidates_ns) {
    return idle_curve(thread_gap_window(*tw.a, *tw.b, window), tw.b->idle_setting_seconds,
                      tw.b->idle_ns_granular, candidates_ns, to.hz);
}

bool ns_settable(const ThreadSnapshot& b, const Snapshot& to) {
    return b.idle_ns_granular || to.idle_ns_supported;
}

std::string idle_change(double seconds, const ThreadSnapshot& b, bool ns) {
    if (!ns) return fmt::format("sq_thread_idle = {} (ms)", std::llround(seconds * 1e3));
    if (b.idle_ns_granular)
        return fmt::format("sq_thread_idle = {} (ns, IORING_SETUP_IDLE_NS)",
                           std::llround(seconds * 1e9));
    return fmt::format("sq_thread_idle = {} (ns) with IORING_SETUP_IDLE_NS in flags",
                       std::llround(seconds * 1e9));
}

}  // namespace iouscope::advisor
