#include "model/ring_series.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iouscope {

void RingSeries::observe(Ring& s, bool fresh, const RingSnapshot& r, const Snapshot& snap) const {
    if (!fresh && (s.id != r.id || s.start != r.start_time_seconds)) {
        s = Ring{};  // a new ring at a closed one's address
        fresh = true;
    }
    s.seen = samples_;
    s.reads += !r.carried;
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
    observe_requests(s, fresh && snap.interval_seconds == 0, r.requests);
    const double now = snap.monotonic_seconds;
    if (s.activity > 0 && now > s.at) s.activity *= std::exp(-(now - s.at) / kDecaySeconds);
    s.activity += static_cast<double>(s.dsqes + s.dcqes);
    s.at = now;
}

namespace {

FoldedOp counts_of(const RequestOpSnapshot& op) {
    FoldedOp f{op.opcode, op.submitted, op.punted_forced, op.punted_other()};
    for (std::size_t p = 0; p < f.completed.size(); ++p) f.completed[p] = op.paths[p].completed;
    return f;
}

std::uint64_t since(std::uint64_t now, std::uint64_t was) {
    return now > was ? now - was : 0;
}

}  // namespace

// The ring's requests per opcode in the last interval: ops is ascending by opcode, as the
// request stage builds it, and so is what the ring kept. An opcode the ring had not submitted
// before counts whole, except at the daemon's first sample (at_start), where nothing is known
// of the past.
void RingSeries::observe_requests(Ring& s, bool at_start, const RingRequests& rq) {
    s.drequests.clear();
    if (!rq.has_requests) {
        s.requests.clear();
        return;
    }
    auto before = s.requests.begin();
    std::vector<FoldedOp> now;
    now.reserve(rq.ops.size());
    for (const auto& op : rq.ops) {
        while (before != s.requests.end() && before->opcode < op.opcode) ++before;
        const bool known = before != s.requests.end() && before->opcode == op.opcode;
        const FoldedOp cur = counts_of(op);
        const FoldedOp was = known ? *before : at_start ? cur : FoldedOp{op.opcode};
        FoldedOp d{op.opcode, since(cur.submitted, was.submitted),
                   since(cur.punted_forced, was.punted_forced),
                   since(cur.punted_other, was.punted_other)};
        for (std::size_t p = 0; p < d.completed.size(); ++p)
            d.completed[p] = since(cur.completed[p], was.completed[p]);
        if (d != FoldedOp{op.opcode}) s.drequests.push_back(d);
        now.push_back(cur);
    }
    s.requests = std::move(now);
}

// It did nothing since iouscope first read it, read again since: a ring light walks carried
// (model/ring_carry.hpp) was not seen doing nothing.
bool RingSeries::known_idle(const Ring& r) {
    return r.activity == 0 && r.reads >= 2;
}

// This sample's plain rings, in ctx order, each joined to what is kept of it; rings no longer
// there are forgotten.
void RingSeries::join(Snapshot& snap) {
    plain_.clear();
    for (auto& r : snap.rings)
        if (r.mode == "plain") plain_.push_back({&r, nullptr});
    const auto by_ctx = [](const Plain& a, const Plain& b) { return a.snap->ctx < b.snap->ctx; };
    if (!std::is_sorted(plain_.begin(), plain_.end(), by_ctx))  // the aggregator's order already
        std::sort(plain_.begin(), plain_.end(), by_ctx);
    bool same = rings_.size() == plain_.size();
    for (std::size_t i = 0; same && i < plain_.size(); ++i)
        same = rings_[i].first == plain_[i].snap->ctx;
    if (!same) {  // rings came or went: merge
        rings_next_.clear();
        rings_next_.reserve(plain_.size());
        std::size_t i = 0;
        for (const auto& p : plain_) {
            const std::uint64_t ctx = p.snap->ctx;
            while (i < rings_.size() && rings_[i].first < ctx) ++i;
            const bool known = i < rings_.size() && rings_[i].first == ctx;
            rings_next_.emplace_back(ctx, known ? std::move(rings_[i++].second) : Ring{});
        }
        rings_.swap(rings_next_);
    }
    for (std::size_t i = 0; i < plain_.size(); ++i) {
        Ring& s = rings_[i].second;
        observe(s, s.seen == 0, *plain_[i].snap, snap);  // seen is 0 only for a new entry
        plain_[i].ring = &s;
    }
}

void RingSeries::apply(Snapshot& snap) {
    snap.ring_series_limit = limit_;
    if (limit_ == 0) return;
    ++samples_;
    join(snap);
    std::size_t held = 0, stirring = 0;  // rings with places; rings waiting that did something
    for (const auto& p : plain_) {
        held += p.ring->held;
        stirring += !p.ring->held && p.ring->activity > 0;
    }
    // With every place taken, only a waiting ring that did something can take one: at 10,000
    // idle rings nothing moves, and nothing is sorted.
    if (held < limit_ || stirring > 0) allot(held, snap.monotonic_seconds);
    for (auto& p : plain_) p.snap->folded = !p.ring->held;
    fold(snap);
}

// Free places go to the busiest rings waiting; then each waiting ring, busiest first, takes the
// place of the least busy held ring it is more than kMargin times as busy as, when that one has
// held its place for kTenureSeconds or never did anything.
void RingSeries::allot(std::size_t held, double now) {
    waiting_.clear();
    yielding_.clear();
    for (auto& p : plain_) {
        if (!p.ring->held)
            waiting_.push_back(&p);
        else if (known_idle(*p.ring) || now - p.ring->held_since >= kTenureSeconds)
            yielding_.push_back(&p);
    }
    // Stable between samples: ties (rings that did nothing) go by the most SQEs, then by address.
    const auto busier = [](const Plain* a, const Plain* b) {
        if (a->ring->activity != b->ring->activity) return a->ring->activity > b->ring->activity;
        if (a->snap->sqes_total != b->snap->sqes_total)
            return a->snap->sqes_total > b->snap->sqes_total;
        return a->snap->ctx < b->snap->ctx;
    };
    // Only the first free + yielding can get a place, and a ring that did nothing only a free
    // one: taking a held place needs more than kMargin times its holder's activity. So of
    // 10,000 idle rings waiting, none is sorted once the places are full.
    const std::size_t free = limit_ > held ? limit_ - held : 0;
    const auto active = std::partition(waiting_.begin(), waiting_.end(),
                                       [](const Plain* p) { return p->ring->activity > 0; });
    const auto n_active = static_cast<std::size_t>(active - waiting_.begin());
    const auto end_active =
        waiting_.begin() + static_cast<std::ptrdiff_t>(std::min(n_active, free + yielding_.size()));
    std::partial_sort(waiting_.begin(), end_active, active, busier);
    const auto n_idle = std::min(free > n_active ? free - n_active : 0,
                                 static_cast<std::size_t>(waiting_.end() - active));
    const auto end =
        end_active == active ? active + static_cast<std::ptrdiff_t>(n_idle) : end_active;
    std::partial_sort(active, active + static_cast<std::ptrdiff_t>(n_idle), waiting_.end(), busier);
    auto take = [now](Ring& r) {
        r.held = true;
        r.held_since = now;
    };
    auto w = waiting_.begin();
    for (std::size_t n = free; w != end && n > 0; ++w, --n) take(*(*w)->ring);
    if (w != end) {
        std::sort(yielding_.begin(), yielding_.end(), [](const Plain* a, const Plain* b) {
            if (a->ring->activity != b->ring->activity)
                return a->ring->activity < b->ring->activity;
            return a->snap->ctx > b->snap->ctx;
        });
    }
    for (auto y = yielding_.begin(); y != yielding_.end() && w != end; ++y, ++w) {
        if ((*w)->ring->activity <= kMargin * (*y)->ring->activity) break;
        (*y)->ring->held = false;
        take(*(*w)->ring);
    }
}

// Each process's folded rings: how many now, and what they did while folded. A process's fold
// lives as long as it holds a ring, so its counters never go back while it can still fold. A
// process's rings mostly come one after another: its entries are looked up once per run.
void RingSeries::fold(Snapshot& snap) {
    std::map<std::uint32_t, std::size_t> now;  // folded rings by pid
    Fold* f = nullptr;
    std::size_t* n = nullptr;
    std::uint32_t of = 0;  // the pid f and n are of
    for (const auto& p : plain_) {
        if (!p.snap->folded) continue;
        const std::uint32_t pid = p.snap->pid;
        if (!f || of != pid) {  // one walk reads one comm for all of a process's rings
            f = &folds_[pid];
            n = &now[pid];
            of = pid;
            f->comm = p.snap->comm;
        }
        f->sqes += p.ring->dsqes;
        f->cqes += p.ring->dcqes;
        for (const auto& d : p.ring->drequests) {
            FoldedOp& o = f->requests[d.opcode];
            o.opcode = d.opcode;
            o.submitted += d.submitted;
            o.punted_forced += d.punted_forced;
            o.punted_other += d.punted_other;
            for (std::size_t i = 0; i < o.completed.size(); ++i) o.completed[i] += d.completed[i];
        }
        ++*n;
    }
    auto seen = folds_.end();
    for (const auto& r : snap.rings) {
        if (seen == folds_.end() || seen->first != r.pid) seen = folds_.find(r.pid);
        if (seen != folds_.end()) seen->second.seen = samples_;
    }
    std::erase_if(folds_, [&](const auto& kv) { return kv.second.seen != samples_; });
    for (const auto& [pid, fd] : folds_) {
        const auto c = now.find(pid);
        snap.folded.push_back({pid, fd.comm, c == now.end() ? 0 : c->second, fd.sqes, fd.cqes, {}});
        auto& ops = snap.folded.back().requests;
        ops.reserve(fd.requests.size());
        for (const auto& [op, counts] : fd.requests) ops.push_back(counts);
    }
}

}  // namespace iouscope
