// Births, deaths and cleanup: rings created (and those too short-lived for a walk), rings that
// closed or whose address a new ring took, threads that expired, and the BPF map entries whose
// owner is gone (MapCleanup), with the io_do_iopoll totals of retired rings.
#include <set>
#include <tuple>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

void Aggregator::count_created(const RawSample& raw,
                               const std::map<std::uint64_t, const iou_ring_record*>& live) {
    // A ring announced by io_uring_create was walked if a walk saw its ctx with its birth time.
    for (const auto& c : raw.created) {
        auto mode = ring_mode(c.setup_flags);
        ++created_by_mode_[mode];
        const auto l = live.find(c.ctx);
        const auto known = rings_.find(c.ctx);
        const bool walked = (l != live.end() && l->second->born_ns == c.ts_ns) ||
                            (known != rings_.end() && known->second.born_ns == c.ts_ns);
        if (!walked && raw.walk_complete) ++short_lived_by_mode_[mode];
    }
}

std::vector<std::uint64_t> Aggregator::end_ring_lives(
    const RawSample& raw, const std::map<std::uint64_t, const iou_ring_record*>& live) {
    // Rings that closed, and rings whose address a new ring took: their state goes, and the new
    // ring starts from its own counts (a counter reset, as Prometheus expects), never from the
    // old ring's. Returns the closed ones.
    std::vector<std::uint64_t> gone;
    for (auto it = rings_.begin(); it != rings_.end();) {
        const auto l = live.find(it->first);
        const bool closed = l == live.end();
        if ((closed && !raw.walk_complete) || (!closed && !replaced_by(it->second, *l->second))) {
            ++it;
            continue;
        }
        if (closed) {
            gone.push_back(it->first);
        } else {
            // The BPF side dropped the old ring's deep entries when the new one was created;
            // what it last showed of them stays in the host totals.
            retire_iopoll(it->second);
            ++rings_replaced_;
        }
        it = rings_.erase(it);
    }
    return gone;
}

bool Aggregator::replaced_by(const RingState& st, const iou_ring_record& rec) const {
    if (!st.seen_before) return false;
    return st.born_ns != rec.born_ns || !st.sqes.continues(rec.sq_head) ||
           !st.cqes.continues(rec.cq_tail);
}

void Aggregator::retire_iopoll(const RingState& st) {
    for (const auto& [caller, v] : st.prev_iopoll) add_iopoll(retired_iopoll_[caller], v);
}

void Aggregator::plan_ring_cleanup(const RawSample& raw,
                                   const std::map<std::uint64_t, const iou_ring_record*>& live,
                                   const std::vector<std::uint64_t>& gone) {
    if (!raw.walk_complete) return;  // an entry's owner may be among the rings not reached
    std::set<std::uint64_t> orphans;
    const auto consider = [&](std::uint64_t ctx) {
        if (!live.count(ctx)) orphans.insert(ctx);
    };
    for (const auto& [ctx, born] : raw.births) consider(ctx);
    for (const auto& [ctx, w] : raw.ring_work) consider(ctx);
    for (const auto& [k, v] : raw.iopoll) consider(k.ctx);
    // Closed rings go now; keys no walk has seen go when the next walk misses them too, since
    // a ring created just after this walk has entries but no record yet.
    std::set<std::uint64_t> doomed(gone.begin(), gone.end());
    std::set<std::uint64_t> pending;
    for (auto ctx : orphans) (orphan_rings_.count(ctx) ? doomed : pending).insert(ctx);
    orphan_rings_ = std::move(pending);
    // Their final io_do_iopoll counts are in this sample's read: they join the retired totals.
    for (const auto& [k, v] : raw.iopoll)
        if (doomed.count(k.ctx)) add_iopoll(retired_iopoll_[k.caller], v);
    cleanup_.rings.assign(doomed.begin(), doomed.end());
}

void Aggregator::plan_waker_cleanup(const RawSample& raw) {
    if (!raw.walk_complete) return;
    const std::set<std::uint32_t> expired(cleanup_.threads.begin(), cleanup_.threads.end());
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> orphans;
    for (const auto& [k, v] : raw.wakers) {
        const auto t = threads_.find(k.sq_tid);
        const bool stale =
            t != threads_.end() && t->second.start_ns && v.sq_start_ns != t->second.start_ns;
        if (expired.count(k.sq_tid) || stale) {
            cleanup_.wakers.push_back(k);
        } else if (t == threads_.end()) {
            const std::tuple key{k.sq_tid, k.waker_pid, k.context};
            if (orphan_wakers_.count(key))
                cleanup_.wakers.push_back(k);
            else
                orphans.insert(key);
        }
    }
    orphan_wakers_ = std::move(orphans);
}

// Threads with BPF state but no ring any more, and threads that vanished, expire after a few
// samples: long enough to ride out a ring that is being set up, short enough to keep the maps
// bounded under churn.
void Aggregator::expire_threads(const UpdateContext& cx) {
    for (const auto& [tid, s] : cx.raw.sched) threads_.try_emplace(tid);
    for (const auto& [tid, g] : cx.raw.gaps) threads_.try_emplace(tid);
    for (const auto& [tid, p] : cx.raw.passes) threads_.try_emplace(tid);
    for (auto it = threads_.begin(); it != threads_.end();) {
        if (cx.by_thread.count(static_cast<std::int32_t>(it->first)) || !cx.raw.walk_complete ||
            ++it->second.missing < kExpireAfter) {
            ++it;
            continue;
        }
        cleanup_.threads.push_back(it->first);
        it = threads_.erase(it);
    }
}

}  // namespace iouscope
