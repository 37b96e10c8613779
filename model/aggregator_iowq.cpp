// The io-wq stage of Aggregator::update: each process's io-wq workers from the exits counted in
// BPF and the walk of the live workers (collect/iowq.cpp). A worker is counted live by the walk
// or exited by the exit program, never both: the walk passes over workers already exiting.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "model/aggregator_update.hpp"

namespace iouscope::aggregation {

namespace {

struct ProcessCounts {
    IowqSnapshot snap;
    std::uint64_t cpu_ns = 0;
    std::set<std::uint64_t> wqs;
};

// Each process's requests in flight on io-wq, by tgid: its rings' (a ring whose fd two
// processes hold counts for the first the walk found). Only the few rings with requests on
// io-wq are looked for among the walk's records, in one pass: no index of every ring.
std::map<std::uint32_t, std::uint64_t> on_iowq_by_process(const RequestSample& rq,
                                                          const RingRecords& rings) {
    using RingKey = std::pair<std::uint64_t, std::uint64_t>;  // ctx, born_ns
    std::vector<std::pair<RingKey, std::uint64_t>> busy;      // by ring, ascending
    if (rq.timed)
        for (const auto& f : rq.in_flight)
            if (f.on_iowq) busy.push_back({{f.ctx, f.born_ns}, f.on_iowq});
    std::map<std::uint32_t, std::uint64_t> out;
    if (busy.empty()) return out;
    std::sort(busy.begin(), busy.end());
    for (const auto& r : rings) {
        const RingKey k{r.ctx, r.born_ns};
        const auto at = std::lower_bound(busy.begin(), busy.end(), std::pair{k, std::uint64_t{0}});
        if (at != busy.end() && at->first == k && at->second) {
            out[r.pid] += at->second;
            at->second = 0;  // the first holder found counts it
        }
    }
    return out;
}

}  // namespace

std::vector<IowqSnapshot> iowq_processes(const RequestSample& rq, const RingRecords& rings,
                                         std::map<IowqProcKey, IowqFloor>& floor) {
    if (!rq.iowq_probe) {
        floor.clear();
        return {};
    }
    std::map<IowqProcKey, ProcessCounts> procs;
    for (const auto& [k, e] : rq.iowq_exits) {
        auto& p = procs[{k.tgid, k.leader_start_ns}];
        p.snap.pid = k.tgid;
        p.snap.comm = comm_of(e.comm);
        p.snap.exited = e.exited;
        p.snap.created = e.born_since;
        p.cpu_ns = e.cpu_ns;
    }
    for (const auto& w : rq.workers) {
        auto& p = procs[{w.tgid, w.leader_start_ns}];
        p.snap.pid = w.tgid;
        if (p.snap.comm.empty()) p.snap.comm = comm_of(w.comm);
        const std::size_t kind = w.kind == IOU_IOWQ_UNBOUND ? 1 : 0;
        ++p.snap.workers[kind];
        p.snap.max_workers[kind] = std::max(p.snap.max_workers[kind], w.max_workers);
        if (w.wq) p.wqs.insert(w.wq);
        p.cpu_ns += w.runtime_ns;
        if (w.start_ns >= rq.iowq_since_ns) ++p.snap.created;
    }
    const auto on_iowq = on_iowq_by_process(rq, rings);
    std::map<IowqProcKey, IowqFloor> next;
    std::vector<IowqSnapshot> out;
    out.reserve(procs.size());
    for (auto& [key, p] : procs) {
        IowqFloor f = floor.count(key) ? floor.at(key) : IowqFloor{};
        f.cpu_ns = std::max(f.cpu_ns, p.cpu_ns);
        f.created = std::max(f.created, p.snap.created);
        f.exited = std::max(f.exited, p.snap.exited);
        next[key] = f;
        p.snap.cpu_seconds = static_cast<double>(f.cpu_ns) / 1e9;
        p.snap.created = f.created;
        p.snap.exited = f.exited;
        p.snap.queues = static_cast<std::uint32_t>(p.wqs.size());
        if (rq.timed) {
            const auto n = on_iowq.find(p.snap.pid);
            p.snap.requests_in_flight =
                n == on_iowq.end() ? 0 : static_cast<std::int64_t>(n->second);
        }
        out.push_back(std::move(p.snap));
    }
    floor = std::move(next);
    std::sort(out.begin(), out.end(),
              [](const IowqSnapshot& a, const IowqSnapshot& b) { return a.pid < b.pid; });
    return out;
}

}  // namespace iouscope::aggregation
