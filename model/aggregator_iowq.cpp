// The io-wq stage of Aggregator::update: each process's io-wq workers from the exits counted in
// BPF and the walk of the live workers (collect/iowq.cpp). A worker is counted live by the walk
// or exited by the exit program, never both: the walk passes over workers already exiting.
#include <algorithm>
#include <set>

#include "model/aggregator_update.hpp"

namespace iouscope::aggregation {

namespace {

struct ProcessCounts {
    IowqSnapshot snap;
    std::uint64_t cpu_ns = 0;
    std::set<std::uint64_t> wqs;
};

// Each process's requests in flight on io-wq, by tgid: its rings' (a ring whose fd two
// processes hold counts for the first the walk found).
std::map<std::uint32_t, std::uint64_t> on_iowq_by_process(const RequestSample& rq,
                                                          const RingRecords& rings) {
    std::map<std::uint32_t, std::uint64_t> out;
    if (!rq.timed) return out;
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint32_t> pid_of;
    for (const auto& r : rings) pid_of.emplace(std::pair{r.ctx, r.born_ns}, r.pid);
    for (const auto& f : rq.in_flight) {
        const auto it = pid_of.find({f.ctx, f.born_ns});
        if (it != pid_of.end()) out[it->second] += f.on_iowq;
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
