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

// Keeps the entries whose ring is alive (or too young to judge), deletes the others from the
// map. ring(entry) gives the entry's (ctx, born).
template <class Entry, class Ring, class Key>
void keep_live(std::vector<Entry>& v, const std::optional<LiveRings>& live, int fd, Ring ring,
               Key key) {
    if (v.empty()) return;
    auto end = std::remove_if(v.begin(), v.end(), [&](const Entry& e) {
        const auto [ctx, born] = ring(e);
        if (!live->gone(ctx, born)) return false;
        const auto k = key(e);
        bpf_map_delete_elem(fd, &k);
        return true;
    });
    v.erase(end, v.end());
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
    const auto& maps = objs_.req->maps;
    // Built only when an entry was read: the default tier reads ring_overflow every sample, and
    // on most hosts it is empty.
    std::optional<LiveRings> live;
    const auto judge = [&] {
        if (!live) live.emplace(raw, walk_start_ns);
    };
    if (rq.overflow_probe) {
        const int fd = bpf_map__fd(maps.ring_overflow);
        read_hash(fd, rq.overflow);
        if (!rq.overflow.empty()) judge();
        keep_live(
            rq.overflow, live, fd,
            [](const auto& e) {
                return RingKey{e.first, e.second.born_ns};
            },
            [](const auto& e) { return e.first; });
    }
    if (rq.on) {
        const int fd = bpf_map__fd(maps.req_stats);
        read_hash(fd, rq.stats);
        if (!rq.stats.empty()) judge();
        keep_live(
            rq.stats, live, fd,
            [](const auto& e) {
                return RingKey{e.first.ctx, e.first.born_ns};
            },
            [](const auto& e) { return e.first; });
    }
    if (rq.enter_probe) {
        const int fd = bpf_map__fd(maps.ring_enters);
        read_hash(fd, rq.enters);
        if (!rq.enters.empty()) judge();
        keep_live(
            rq.enters, live, fd,
            [](const auto& e) {
                return RingKey{e.first.ctx, e.first.born_ns};
            },
            [](const auto& e) { return e.first; });
    }
    if (rq.timed) {
        const int fd = bpf_map__fd(maps.req_inflight);
        std::vector<std::pair<std::uint64_t, iou_req_inflight>> flying;
        read_hash(fd, flying);
        if (!flying.empty()) judge();
        keep_live(
            flying, live, fd,
            [](const auto& e) {
                return RingKey{e.second.ctx, e.second.born_ns};
            },
            [](const auto& e) { return e.first; });
        rq.inflight_entries = flying.size();
        const std::uint64_t now = raw.mono_ns;
        rq.in_flight = sum_in_flight(
            flying, stuck_after_ns_ && now > stuck_after_ns_ ? now - stuck_after_ns_ : 0);
    }
    std::memcpy(&rq.counters, const_cast<const iou_req_counters*>(&objs_.req->bss->req_counters),
                sizeof rq.counters);
}

}  // namespace iouscope
