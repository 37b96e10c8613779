// The request tier's reads (bpf/iouscope_req.bpf.c): the per-ring, per-opcode counts, the
// requests in flight summed per ring, and the CQ overflow counts. A ring is named in these maps
// by its address and its birth; entries of rings that are gone are deleted here, as they are
// read, so the maps hold what is alive (KeyOwner::ring_born).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "collect/bpf_loader.hpp"
#include "collect/map_read.hpp"
#include "iouscope_req.skel.h"

namespace iouscope {

namespace {

using RingKey = std::pair<std::uint64_t, std::uint64_t>;  // ctx, born_ns

// The rings of a complete walk, and whether an entry's ring is gone: not walked, and born
// before the walk began (a ring born since may not have been reached yet). A light walk passes
// over idle plain rings (model/ring_carry.hpp), whose records are carried after this read: it
// judges nothing, and the next full walk, at most --rings.plain-interval later, deletes.
class LiveRings {
public:
    LiveRings(const RawSample& raw, std::uint64_t walk_start_ns)
        : complete_(raw.walk_complete && !raw.light_walk), start_(walk_start_ns) {
        keys_.reserve(raw.rings.size());
        for (const auto& r : raw.rings) keys_.emplace_back(r.ctx, r.born_ns);
        std::sort(keys_.begin(), keys_.end());
    }
    bool alive(std::uint64_t ctx, std::uint64_t born) const {
        return std::binary_search(keys_.begin(), keys_.end(), RingKey{ctx, born});
    }
    bool gone(std::uint64_t ctx, std::uint64_t born) const {
        return complete_ && born < start_ && !alive(ctx, born);
    }

private:
    bool complete_;
    std::uint64_t start_;
    std::vector<RingKey> keys_;
};

// The ring each map's entry belongs to: its (ctx, born).
RingKey ring_of(std::uint64_t ctx, const iou_ring_overflow& o) {
    return {ctx, o.born_ns};
}
RingKey ring_of(std::uint64_t, const iou_req_inflight& f) {
    return {f.ctx, f.born_ns};
}
template <class V>
RingKey ring_of(const iou_req_key& k, const V&) {
    return {k.ctx, k.born_ns};
}

// Reads a request-tier map whole into v, then deletes the entries whose ring is gone from the
// map and from v. live() builds the rings' judgement on first use: the default tier reads
// ring_overflow every sample, and on most hosts it is empty.
template <class K, class V, class Live>
void read_live(int fd, std::vector<std::pair<K, V>>& v, Live& live) {
    read_hash(fd, v);
    if (v.empty()) return;
    const LiveRings& rings = live();
    std::erase_if(v, [&](const std::pair<K, V>& e) {
        const auto [ctx, born] = ring_of(e.first, e.second);
        if (!rings.gone(ctx, born)) return false;
        bpf_map_delete_elem(fd, &e.first);
        return true;
    });
}

// req_inflight summed per ring: how many, and the oldest. Sorted by ring, then by age, so
// each ring's first entry is its oldest.
// Those submitted before stuck_before_ns (0: none) are stuck.
std::vector<RingInFlight> sum_in_flight(std::vector<std::pair<std::uint64_t, iou_req_inflight>>& v,
                                        std::uint64_t stuck_before_ns) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
        return std::tie(a.second.ctx, a.second.born_ns, a.second.start_ns) <
               std::tie(b.second.ctx, b.second.born_ns, b.second.start_ns);
    });
    std::vector<RingInFlight> out;
    for (const auto& [req, f] : v) {
        if (f.start_ns == 0) continue;  // done: kept for the next request at its address
        if (out.empty() || out.back().ctx != f.ctx || out.back().born_ns != f.born_ns)
            out.push_back(
                {f.ctx, f.born_ns, 0, f.start_ns, f.opcode, static_cast<std::int32_t>(f.fd)});
        ++out.back().requests;
        if (f.start_ns < stuck_before_ns) ++out.back().stuck;
        if (f.path == IOU_PATH_IOWQ) ++out.back().on_iowq;
    }
    return out;
}

}  // namespace

void BpfCollector::read_requests(RawSample& raw, std::uint64_t walk_start_ns) const {
    RequestSample& rq = raw.requests;
    rq = {};
    if (!objs_.req) return;
    rq.overflow_probe = attached(ProbeId::cqe_overflow);
    rq.on = attached(ProbeId::req_submit);
    rq.timed = attached(ProbeId::req_complete);
    rq.enter_probe = attached(ProbeId::req_enter);
    rq.wait_task_work_probe = rq.enter_probe && attached(ProbeId::wait_task_work);
    rq.task_work_ipis_probe = attached(ProbeId::task_work_ipis);
    const auto& maps = objs_.req->maps;
    std::optional<LiveRings> judged;
    const auto live = [&]() -> const LiveRings& {
        if (!judged) judged.emplace(raw, walk_start_ns);
        return *judged;
    };
    if (rq.overflow_probe) read_live(bpf_map__fd(maps.ring_overflow), rq.overflow, live);
    if (rq.on) read_live(bpf_map__fd(maps.req_stats), rq.stats, live);
    if (rq.enter_probe) read_live(bpf_map__fd(maps.ring_enters), rq.enters, live);
    if (rq.timed) {
        std::vector<std::pair<std::uint64_t, iou_req_inflight>> flying;
        read_live(bpf_map__fd(maps.req_inflight), flying, live);
        rq.inflight_entries = flying.size();
        const std::uint64_t now = raw.mono_ns;
        rq.in_flight = sum_in_flight(
            flying, stuck_after_ns_ && now > stuck_after_ns_ ? now - stuck_after_ns_ : 0);
    }
    std::memcpy(&rq.counters, const_cast<const iou_req_counters*>(&objs_.req->bss->req_counters),
                sizeof rq.counters);
}

}  // namespace iouscope
