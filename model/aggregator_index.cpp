// What one Aggregator::update indexes of its raw sample (Aggregator::SampleIndex): the live
// rings by ctx, each map's entries by key, the SQ threads' rings grouped by thread; and the
// walked cgroups' labels. Sorted vectors whose capacity stays from one sample to the next, so
// that a steady sample costs a pass over what it read and allocates nothing here.
#include <algorithm>

#include "model/aggregator_update.hpp"

namespace iouscope {

namespace {

// Entries of a raw vector by key, in the raw order under one key: sorting the pairs sorts by
// key, then by the address in the vector, which is the raw order.
template <class K, class V, class Src, class Entry>
void index_by(RawIndex<K, V>& out, const Src& src, Entry entry) {
    out.clear();
    out.reserve(src.size());
    for (const auto& x : src) out.push_back(entry(x));
    std::sort(out.begin(), out.end());
}

// The keys of a vector's n elements into `keys`, in the vector's order, and their positions
// sorted by (key, position) into `order`. The walk visits the same files in the same order, and
// a BPF hash map hands out its entries in the same order, while nothing is added or removed:
// when the keys are the last call's, in the same places, the last call's order stands. That is
// checked in the vector's own order, which streams through it, where the sorted order jumps.
template <class Key>
void sort_positions(std::size_t n, Key key, std::vector<std::uint64_t>& keys,
                    std::vector<std::uint32_t>& order,
                    std::vector<std::pair<std::uint64_t, std::uint32_t>>& buf) {
    bool same = keys.size() == n;
    for (std::size_t i = 0; same && i < n; ++i) same = keys[i] == key(i);
    if (same) return;
    keys.resize(n);
    buf.clear();
    for (std::size_t i = 0; i < n; ++i) {
        keys[i] = key(i);
        buf.emplace_back(keys[i], static_cast<std::uint32_t>(i));
    }
    std::sort(buf.begin(), buf.end());
    order.clear();
    for (const auto& [k, i] : buf) order.push_back(i);
}

}  // namespace

void Aggregator::SampleIndex::build(const RawSample& raw) {
    const auto& rings = raw.rings;
    sort_positions(
        rings.size(), [&](std::size_t i) { return rings[i].ctx; }, live_keys_, live_order_,
        sort_buf_);
    live.clear();
    live.reserve(rings.size());
    for (auto i : live_order_)  // the first holder walked names a ring held twice
        if (live.empty() || live.back().first != live_keys_[i])
            live.emplace_back(live_keys_[i], &rings[i]);
    sort_positions(
        raw.births.size(), [&](std::size_t i) { return raw.births[i].first; }, births_keys_,
        births_order_, sort_buf_);
    births.clear();
    for (auto i : births_order_) births.push_back(births_keys_[i]);
    index_by(work, raw.ring_work, [](const auto& x) { return std::pair(x.first, &x.second); });
    index_by(polls, raw.iopoll, [](const auto& x) { return std::pair(x.first.ctx, &x); });
    index_by(sched, raw.sched, [](const auto& x) { return std::pair(x.first, &x.second); });
    index_by(gaps, raw.gaps, [](const auto& x) { return std::pair(x.first, &x.second); });
    index_by(passes, raw.passes, [](const auto& x) { return std::pair(x.first, &x.second); });
    index_by(wakers, raw.wakers, [](const auto& x) { return std::pair(x.first.sq_tid, &x); });
    sq_rings.clear();
    members.clear();
    threads.clear();
    holders.clear();
}

void Aggregator::SampleIndex::group_threads() {
    std::sort(sq_rings.begin(), sq_rings.end(), [](const SqRing& a, const SqRing& b) {
        return a.tid != b.tid ? a.tid < b.tid : a.index < b.index;
    });
    for (const auto& r : sq_rings) {
        if (threads.empty() || threads.back().tid != r.tid)
            threads.push_back({r.tid, members.size(), members.size()});
        members.emplace_back(r.index, r.d);
        threads.back().end = members.size();
    }
}

bool Aggregator::SampleIndex::has_thread(std::int32_t tid) const {
    const auto it =
        std::lower_bound(threads.begin(), threads.end(), tid,
                         [](const ThreadGroup& g, std::int32_t t) { return g.tid < t; });
    return it != threads.end() && it->tid == tid;
}

const iou_ring_record* Aggregator::UpdateContext::live(std::uint64_t ctx) const {
    return aggregation::first_of(ix.live, ctx);
}

// The cache follows the sample's paths exactly: an id the sample has no path for has no labels,
// and an id whose path changed (a cgroup renamed) is read again.
void Aggregator::sync_cgroups(const RawSample& raw) {
    last_labels_ = nullptr;
    for (const auto& [id, path] : raw.cgroup_paths) {
        auto [it, added] = cgroups_.try_emplace(id);
        if (added || it->second.path != path) {
            it->second.path = path;
            it->second.labels = cgroup_labels(raw, id);
        }
    }
    if (cgroups_.size() == raw.cgroup_paths.size()) return;
    for (auto it = cgroups_.begin(); it != cgroups_.end();)
        it = raw.cgroup_paths.count(it->first) ? std::next(it) : cgroups_.erase(it);
}

const CgroupLabels& Aggregator::labels_of(std::uint64_t cgroup_id) {
    static const CgroupLabels kNone;
    // Rings met one after another are mostly in the same cgroup: the last answer, first.
    if (last_labels_ && last_cgroup_id_ == cgroup_id) return *last_labels_;
    const auto it = cgroups_.find(cgroup_id);
    last_cgroup_id_ = cgroup_id;
    last_labels_ = it == cgroups_.end() ? &kNone : &it->second.labels;
    return *last_labels_;
}

}  // namespace iouscope
