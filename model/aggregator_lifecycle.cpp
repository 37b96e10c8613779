// Births, deaths and cleanup: rings created (and those too short-lived for a walk), rings that
// closed or whose address a new ring took, threads that expired, and the BPF map entries whose
// owner is gone (MapCleanup), with the io_do_iopoll totals of retired rings.
#include <algorithm>
#include <set>
#include <tuple>

#include "model/aggregator_update.hpp"

namespace iouscope {

using namespace aggregation;

void Aggregator::count_created(const UpdateContext& cx) {
    // A ring announced by io_uring_create was walked if a walk saw its ctx with its birth time.
    for (const auto& c : cx.raw.created) {
        auto mode = ring_mode(c.setup_flags);
        ++created_by_mode_[mode];
        const iou_ring_record* l = cx.live(c.ctx);
        const auto known = std::lower_bound(ring_ctx_.begin(), ring_ctx_.end(), c.ctx);
        const bool walked = (l && l->born_ns == c.ts_ns) ||
                            (known != ring_ctx_.end() && *known == c.ctx &&
                             ring_states_[known - ring_ctx_.begin()].born_ns == c.ts_ns);
        if (!walked && cx.raw.walk_complete) ++short_lived_by_mode_[mode];
    }
}

std::vector<std::uint64_t> Aggregator::end_ring_lives(const UpdateContext& cx) {
    // Rings that closed: their state goes. Returns them. Afterwards every live ring has a state,
    // and the states are in the live rings' order, with those the walk did not reach among them
    // when it was incomplete. A ring whose address a new ring took is found by observe_ring.
    std::vector<std::uint64_t> gone;
    const auto& live = cx.ix.live;
    bool same = ring_ctx_.size() == live.size();
    for (std::size_t i = 0; same && i < live.size(); ++i) same = ring_ctx_[i] == live[i].first;
    if (same) return gone;  // the same rings as last time, the steady state
    ring_ctx_next_.clear();
    ring_states_next_.clear();
    const std::size_t n = live.size() + (cx.raw.walk_complete ? 0 : ring_ctx_.size());
    ring_ctx_next_.reserve(n);
    ring_states_next_.reserve(n);
    std::size_t i = 0, j = 0;
    while (i < ring_ctx_.size() || j < live.size()) {
        const bool old =
            j == live.size() || (i < ring_ctx_.size() && ring_ctx_[i] <= live[j].first);
        const bool closed = old && (j == live.size() || ring_ctx_[i] < live[j].first);
        if (closed && cx.raw.walk_complete) {
            gone.push_back(ring_ctx_[i++]);
            continue;
        }
        ring_ctx_next_.push_back(old ? ring_ctx_[i] : live[j].first);
        ring_states_next_.push_back(old ? std::move(ring_states_[i]) : RingState{});
        i += old;
        j += !closed;
    }
    ring_ctx_.swap(ring_ctx_next_);
    ring_states_.swap(ring_states_next_);
    ring_states_next_.clear();
    return gone;
}

// A ring whose address a new ring took: its state goes, and the new ring starts from its own
// counts (a counter reset, as Prometheus expects), never from the old ring's.
void Aggregator::renew_if_replaced(RingState& st, const iou_ring_record& rec) {
    if (!replaced_by(st, rec)) return;
    // The BPF side dropped the old ring's deep entries when the new one was created; what it
    // last showed of them stays in the host totals.
    retire_iopoll(st);
    ++rings_replaced_;
    st = RingState{};
}

bool Aggregator::replaced_by(const RingState& st, const iou_ring_record& rec) const {
    if (!st.seen_before) return false;
    return st.born_ns != rec.born_ns || !st.sqes.continues(rec.sq_head) ||
           !st.cqes.continues(rec.cq_tail);
}

void Aggregator::retire_iopoll(const RingState& st) {
    for (const auto& [caller, v] : st.prev_iopoll) add_iopoll(retired_iopoll_[caller], v);
}

void Aggregator::plan_ring_cleanup(const UpdateContext& cx,
                                   const std::vector<std::uint64_t>& gone) {
    const RawSample& raw = cx.raw;
    if (!raw.walk_complete) return;  // an entry's owner may be among the rings not reached
    // Keys with no live ring: each list ascends, as the live rings do.
    std::set<std::uint64_t> orphans;
    const auto consider = [&](const auto& keys, auto key_of) {
        std::size_t at = 0;
        for (const auto& k : keys) {
            const std::uint64_t ctx = key_of(k);
            while (at < cx.ix.live.size() && cx.ix.live[at].first < ctx) ++at;
            if (at == cx.ix.live.size() || cx.ix.live[at].first != ctx) orphans.insert(ctx);
        }
    };
    consider(cx.ix.births, [](std::uint64_t ctx) { return ctx; });
    consider(cx.ix.work, [](const auto& e) { return e.first; });
    consider(cx.ix.polls, [](const auto& e) { return e.first; });
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
        if (cx.ix.has_thread(static_cast<std::int32_t>(it->first)) || !cx.raw.walk_complete ||
            ++it->second.missing < kExpireAfter) {
            ++it;
            continue;
        }
        cleanup_.threads.push_back(it->first);
        it = threads_.erase(it);
    }
}

}  // namespace iouscope
