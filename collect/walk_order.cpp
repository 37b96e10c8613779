#include "collect/walk_order.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>

#include "model/aggregator.hpp"

namespace iouscope {

bool WalkOrder::learn(std::span<const iou_ring_record> walked) {
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(walked.size(), capacity_));
    const std::uint32_t had = known_;
    entries_.resize(std::max<std::size_t>(entries_.size(), n));
    by_ctx_.resize(n);
    // Only the runs of entries that changed go to the map: at a steady 10,000 rings, none. A
    // full rewrite per full walk was 3.5 % of the daemon's samples.
    bool ok = true;
    std::uint32_t run = n;  // start of the current run of changed entries, n for none
    for (std::uint32_t i = 0; i < n; ++i) {
        const auto& r = walked[i];
        const std::uint64_t e = r.ctx | (plain_ring(r.setup_flags) && idle(r) ? kPlain : 0);
        by_ctx_[i] = {r.ctx, i};
        const bool changed = i >= had || entries_[i] != e;
        entries_[i] = e;
        if (changed && run == n) run = i;
        if (!changed && run != n) {
            ok = ok && write(run, i - run);
            run = n;
        }
    }
    if (run != n) ok = ok && write(run, n - run);
    std::sort(by_ctx_.begin(), by_ctx_.end());
    counts_.clear();
    for (const auto& [ctx, i] : by_ctx_)
        if (counts_.empty() || counts_.back().ctx != ctx)
            counts_.push_back({ctx, walked[i].born_ns, walked[i].sq_head, walked[i].cq_tail});
    known_ = ok ? n : 0;
    return ok;
}

// The same ring (address and birth) was at the full walk before, its SQ head and CQ tail where
// they are now. A ring that walk did not see is not idle: it is read by every walk until the
// next. The birth matters under churn: a new ring at a closed one's address, caught by a full
// walk at the count the closed one ended at (4 NOPs each in Churn.ThousandsOfShortLivedRings),
// was taken for idle and carried short of its count.
bool WalkOrder::idle(const iou_ring_record& r) const {
    const auto it =
        std::lower_bound(counts_.begin(), counts_.end(), r.ctx,
                         [](const Counts& c, std::uint64_t ctx) { return c.ctx < ctx; });
    return it != counts_.end() && it->ctx == r.ctx && it->born_ns == r.born_ns &&
           it->sq_head == r.sq_head && it->cq_tail == r.cq_tail;
}

void WalkOrder::forget(std::span<const iou_created_ring> created) {
    for (const auto& c : created) {
        auto it = std::lower_bound(by_ctx_.begin(), by_ctx_.end(),
                                   std::pair<std::uint64_t, std::uint32_t>{c.ctx, 0});
        for (; it != by_ctx_.end() && it->first == c.ctx; ++it) {
            const std::uint32_t i = it->second;
            if (i >= known_ || !(entries_[i] & kPlain)) continue;
            entries_[i] &= ~kPlain;
            if (!write(i, 1)) known_ = 0;
        }
    }
}

// Entries [from, from + n) into the map: by batch where the kernel has it (5.6+), else one by
// one. Light walks happen only once every entry is in.
bool WalkOrder::write(std::uint32_t from, std::uint32_t n) {
    written_ += n;
    if (fd_ < 0 || n == 0) return true;
    if (keys_.size() < from + n) {
        const auto had = static_cast<std::uint32_t>(keys_.size());
        keys_.resize(from + n);
        for (std::uint32_t i = had; i < keys_.size(); ++i) keys_[i] = i;
    }
    std::uint32_t count = n;
    if (n > 1 && bpf_map_update_batch(fd_, keys_.data() + from, entries_.data() + from, &count,
                                      nullptr) == 0)
        return true;
    for (std::uint32_t i = from; i < from + n; ++i)
        if (bpf_map_update_elem(fd_, &keys_[i], &entries_[i], BPF_ANY) != 0) return false;
    return true;
}

}  // namespace iouscope
