// The request stage of Aggregator::update: each ring's requests per opcode and path, its
// requests in flight and its CQ overflow (collect/requests.cpp reads them, of live rings only).
// BPF keeps these counts per ring and birth, cumulative, so a ring's figures are its entries'
// values: no carry, and a ring that reuses a closed one's address starts from its own zero.
#include <algorithm>
#include <tuple>

#include "model/aggregator_update.hpp"

namespace iouscope::aggregation {

namespace {

using Entry = std::pair<iou_req_key, iou_req_stats>;

bool key_less(const Entry& a, const Entry& b) {
    return std::tie(a.first.ctx, a.first.born_ns, a.first.opcode, a.first.path) <
           std::tie(b.first.ctx, b.first.born_ns, b.first.opcode, b.first.path);
}

void add_entry(RequestOpSnapshot& op, const iou_req_key& k, const iou_req_stats& s) {
    op.submitted += s.submitted;
    op.punted += s.punted;
    op.punted_forced += s.punted_forced;
    op.punted_hashed += s.punted_hashed;
    op.poll_armed += s.poll_armed;
    if (k.path >= op.paths.size()) return;
    auto& p = op.paths[k.path];
    p.completed = s.completed;
    std::copy(std::begin(s.results), std::end(s.results), p.results.begin());
    if (s.completed == 0) return;  // no histogram to build for a path not taken
    const std::vector<std::uint64_t> hist(std::begin(s.latency), std::end(s.latency));
    p.latency = latency_histogram(hist, s.latency_sum_ns);
}

// The entries of one ring, sorted by opcode then path, folded per opcode.
std::vector<RequestOpSnapshot> ops_of(std::span<const Entry> entries) {
    std::vector<RequestOpSnapshot> ops;
    for (const auto& [k, s] : entries) {
        if (ops.empty() || ops.back().opcode != k.opcode) {
            ops.emplace_back();
            ops.back().opcode = k.opcode;
        }
        add_entry(ops.back(), k, s);
    }
    // A batch read is no snapshot: a request submitted and completed between the reads of its
    // submit-side key and its path's key shows completed and not submitted. Every completion
    // was a request, so the count of requests is at least theirs (trixie's guest read 449
    // completions against 448 requests once).
    for (auto& op : ops) {
        std::uint64_t done = 0;
        for (const auto& p : op.paths) done += p.completed;
        op.submitted = std::max(op.submitted, done);
    }
    return ops;
}

// A ring's io_uring_enter counts, the histogram's bounds in SQEs (0, 1, 3, 7, ...).
void add_enters(RingRequests& out, const iou_ring_enters& e) {
    out.enters = e.enters;
    out.enter_sqes = e.sqes;
    out.enter_waits = e.waits;
    out.enter_wait_seconds = static_cast<double>(e.wait_ns) / 1e9;
    out.wait_task_work = e.wait_task_work;
    out.task_work_ipis = e.task_work_ipis;
    out.issuer_switches = e.issuer_switches;
    auto& h = out.sqes_per_enter;
    std::uint64_t cum = 0;
    for (std::size_t b = 0; b < IOU_ENTER_BUCKETS; ++b) {
        cum += e.per_enter[b];
        h.upper_bounds_s.push_back(b == 0 ? 0 : static_cast<double>((1ull << b) - 1));
        h.cumulative.push_back(cum);
    }
    h.count = cum;
    h.sum_s = static_cast<double>(e.sqes);
}

using RingKey = std::pair<std::uint64_t, std::uint64_t>;  // ctx, born_ns

// The ring's enter counts in `enters`, sorted by ring, or nullptr.
const iou_ring_enters* enters_of(const std::vector<std::pair<iou_req_key, iou_ring_enters>>& enters,
                                 RingKey ring) {
    auto at = std::lower_bound(enters.begin(), enters.end(), ring, [](const auto& e, RingKey k) {
        return RingKey{e.first.ctx, e.first.born_ns} < k;
    });
    return at != enters.end() && RingKey{at->first.ctx, at->first.born_ns} == ring ? &at->second
                                                                                   : nullptr;
}

}  // namespace

void attach_requests(const RawSample& raw, std::vector<RingSnapshot>& rings) {
    const RequestSample& rq = raw.requests;
    if (!rq.on && !rq.overflow_probe && !rq.enter_probe) return;
    if (!rq.on && !rq.enter_probe && rq.overflow.empty()) {
        // The default tier on a host where no CQ has overflowed: nothing to index or copy.
        for (auto& rs : rings) rs.requests.has_overflow = true;
        return;
    }
    auto enters = rq.enters;
    std::sort(enters.begin(), enters.end(), [](const auto& a, const auto& b) {
        return RingKey{a.first.ctx, a.first.born_ns} < RingKey{b.first.ctx, b.first.born_ns};
    });
    // Sorted copies: a sample reads these maps in hash order.
    std::vector<Entry> stats(rq.stats.begin(), rq.stats.end());
    std::sort(stats.begin(), stats.end(), key_less);
    auto overflow = rq.overflow;
    std::sort(overflow.begin(), overflow.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    auto flying = rq.in_flight;
    std::sort(flying.begin(), flying.end(), [](const RingInFlight& a, const RingInFlight& b) {
        return std::tie(a.ctx, a.born_ns) < std::tie(b.ctx, b.born_ns);
    });
    // Each ring's birth as the walk read it (ring_births), which names its entries.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> births;
    births.reserve(raw.rings.size());
    for (const auto& r : raw.rings) births.emplace_back(r.ctx, r.born_ns);
    std::sort(births.begin(), births.end());
    for (auto& rs : rings) {
        auto at =
            std::lower_bound(births.begin(), births.end(), std::pair{rs.ctx, std::uint64_t{0}});
        if (at == births.end() || at->first != rs.ctx) continue;
        const std::uint64_t born = at->second;
        RingRequests& out = rs.requests;
        out.has_overflow = rq.overflow_probe;
        auto o = std::lower_bound(overflow.begin(), overflow.end(), rs.ctx,
                                  [](const auto& e, std::uint64_t c) { return e.first < c; });
        if (o != overflow.end() && o->first == rs.ctx && o->second.born_ns == born) {
            out.overflow_cqes = o->second.cqes;
            out.overflow_dropped = o->second.dropped;
        }
        out.has_enters = rq.enter_probe;
        out.has_wait_task_work = rq.wait_task_work_probe;
        out.has_task_work_ipis = rq.task_work_ipis_probe;
        if (const auto* e = enters_of(enters, {rs.ctx, born})) add_enters(out, *e);
        if (!rq.on) continue;
        out.has_requests = true;
        out.timed = rq.timed;
        const iou_req_key lo{rs.ctx, born, 0, 0};
        auto b = std::lower_bound(stats.begin(), stats.end(), Entry{lo, {}}, key_less);
        auto e = b;
        while (e != stats.end() && e->first.ctx == rs.ctx && e->first.born_ns == born) ++e;
        out.ops = ops_of({b, e});
        auto f =
            std::lower_bound(flying.begin(), flying.end(), RingInFlight{rs.ctx, born},
                             [](const RingInFlight& a, const RingInFlight& k) {
                                 return std::tie(a.ctx, a.born_ns) < std::tie(k.ctx, k.born_ns);
                             });
        if (f != flying.end() && f->ctx == rs.ctx && f->born_ns == born) {
            out.in_flight = f->requests;
            out.stuck = f->stuck;
            out.oldest_age_seconds =
                raw.mono_ns > f->oldest_start_ns ? (raw.mono_ns - f->oldest_start_ns) / 1e9 : 0;
            out.oldest_opcode = f->oldest_opcode;
            out.oldest_fd = f->oldest_fd;
        }
    }
}

}  // namespace iouscope::aggregation
