#include "model/ring_series.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iouscope {

RingSeries::Ring& RingSeries::observe(const RingSnapshot& r, const Snapshot& snap) {
    auto [it, fresh] = rings_.try_emplace(r.ctx);
    Ring& s = it->second;
    if (!fresh && (s.id != r.id || s.start != r.start_time_seconds)) {
        s = Ring{};  // a new ring at a closed one's address
        fresh = true;
    }
    s.seen = samples_;
    if (fresh) {
        s.id = r.id;
        s.start = r.start_time_seconds;
        // Seen first after the daemon's first sample, it was born in the last interval: all of
        // its counts are that interval's. At the first sample nothing is known of the past.
        const bool new_ring = snap.interval_seconds > 0;
        s.dsqes = new_ring ? r.sqes_total : 0;
        s.dcqes = new_ring ? r.cqes_total : 0;
    } else {
        s.dsqes = r.sqes_total > s.sqes ? r.sqes_total - s.sqes : 0;
        s.dcqes = r.cqes_total > s.cqes ? r.cqes_total - s.cqes : 0;
    }
    s.sqes = r.sqes_total;
    s.cqes = r.cqes_total;
    const double now = snap.monotonic_seconds;
    if (s.activity > 0 && now > s.at) s.activity *= std::exp(-(now - s.at) / kDecaySeconds);
    s.activity += static_cast<double>(s.dsqes + s.dcqes);
    s.at = now;
    return s;
}

void RingSeries::apply(Snapshot& snap) {
    snap.ring_series_limit = limit_;
    if (limit_ == 0) return;
    ++samples_;
    std::vector<Plain> plain;
    std::size_t held = 0;
    for (auto& r : snap.rings) {
        if (r.mode != "plain") continue;
        Ring& s = observe(r, snap);
        held += s.held;
        plain.push_back({&r, &s});
    }
    std::erase_if(rings_, [&](const auto& kv) { return kv.second.seen != samples_; });
    allot(plain, held, snap.monotonic_seconds);
    fold(snap, plain);
}

// Free places go to the busiest rings waiting; then each waiting ring, busiest first, takes the
// place of the least busy held ring it is more than kMargin times as busy as, when that one has
// held its place for kTenureSeconds or never did anything.
void RingSeries::allot(std::vector<Plain>& plain, std::size_t held, double now) {
    std::vector<Plain*> waiting, yielding;
    for (auto& p : plain) {
        if (!p.ring->held)
            waiting.push_back(&p);
        else if (p.ring->activity == 0 || now - p.ring->held_since >= kTenureSeconds)
            yielding.push_back(&p);
    }
    // Stable between samples: ties (rings that did nothing) go by the most SQEs, then by address.
    // Only the first free + yielding can get a place: at 10,000 rings they are sorted alone.
    const auto busier = [](const Plain* a, const Plain* b) {
        if (a->ring->activity != b->ring->activity) return a->ring->activity > b->ring->activity;
        if (a->snap->sqes_total != b->snap->sqes_total)
            return a->snap->sqes_total > b->snap->sqes_total;
        return a->snap->ctx < b->snap->ctx;
    };
    const std::size_t free = limit_ > held ? limit_ - held : 0;
    const auto candidates = std::min(waiting.size(), free + yielding.size());
    std::partial_sort(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(candidates),
                      waiting.end(), busier);
    std::sort(yielding.begin(), yielding.end(), [](const Plain* a, const Plain* b) {
        if (a->ring->activity != b->ring->activity) return a->ring->activity < b->ring->activity;
        return a->snap->ctx > b->snap->ctx;
    });
    auto take = [now](Ring& r) {
        r.held = true;
        r.held_since = now;
    };
    const auto end = waiting.begin() + static_cast<std::ptrdiff_t>(candidates);
    auto w = waiting.begin();
    for (std::size_t n = free; w != end && n > 0; ++w, --n) take(*(*w)->ring);
    for (auto y = yielding.begin(); y != yielding.end() && w != end; ++y, ++w) {
        if ((*w)->ring->activity <= kMargin * (*y)->ring->activity) break;
        (*y)->ring->held = false;
        take(*(*w)->ring);
    }
    for (auto& p : plain) p.snap->folded = !p.ring->held;
}

// Each process's folded rings: how many now, and what they did while folded. A process's fold
// lives as long as it holds a ring, so its counters never go back while it can still fold.
void RingSeries::fold(Snapshot& snap, const std::vector<Plain>& plain) {
    std::map<std::uint32_t, std::size_t> now;  // folded rings by pid
    for (const auto& p : plain) {
        if (!p.snap->folded) continue;
        Fold& f = folds_[p.snap->pid];
        f.sqes += p.ring->dsqes;
        f.cqes += p.ring->dcqes;
        f.comm = p.snap->comm;
        ++now[p.snap->pid];
    }
    for (const auto& r : snap.rings)
        if (auto it = folds_.find(r.pid); it != folds_.end()) it->second.seen = samples_;
    std::erase_if(folds_, [&](const auto& kv) { return kv.second.seen != samples_; });
    for (const auto& [pid, f] : folds_) {
        const auto n = now.find(pid);
        snap.folded.push_back({pid, f.comm, n == now.end() ? 0 : n->second, f.sqes, f.cqes});
    }
}

}  // namespace iouscope
