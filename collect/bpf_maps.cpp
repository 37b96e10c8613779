// The collector's reads: the ring walk, every map (by batch where the kernel has it), the
// shared counters, and the cleanup of entries whose owners are gone.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "collect/bpf_loader.hpp"
#include "collect/gap_duty.hpp"
#include "collect/map_read.hpp"
#include "iouscope.skel.h"
#include "iouscope_nvme.skel.h"

namespace iouscope {

bool BpfCollector::walk_rings(RingRecords& out, bool& complete, std::string& error, bool light) {
    complete = true;
    auto* bss = objs_.core->bss;
    bss->walk_light = light;
    bss->walk_known = order_.known();
    bss->walk_at = 0;
    ++bss->walk_gen;  // the walk's own holder facts (bpf/iouscope.bpf.c, task_facts)
    UniqueFd fd(bpf_iter_create(bpf_link__fd(iter_link_)));
    if (!fd) {
        error = std::string("cannot start the ring iterator: ") + std::strerror(errno);
        return false;
    }
    // Read straight into out (collect/map_read.hpp), whose capacity a steady sampler keeps from
    // the last walk (Aggregator::take_raw): no buffer to grow, nothing to copy. A partial record
    // would mean a layout mismatch, which is reported rather than misparsed.
    constexpr std::size_t kChunk = 64 * 1024 / sizeof(iou_ring_record);
    const std::size_t first = out.size();
    int read_errno = 0;
    if (!read_iter_into(fd.get(), out, kChunk, read_errno)) {
        error =
            "ring iterator returned a partial record: BPF object and daemon disagree on "
            "struct iou_ring_record";
        return false;
    }
    if (read_errno) {
        error = std::string("reading the ring iterator: ") + std::strerror(read_errno);
        complete = false;
    }
    return complete || out.size() > first;
}

void BpfCollector::read_maps(RawSample& raw) const {
    const auto fd = [](const bpf_map* m) { return bpf_map__fd(m); };
    const auto& maps = objs_.core->maps;
    read_hash(fd(maps.ring_births), raw.births);
    // Wakers before sched: a wake that lands between the two reads then shows in the total and
    // not yet by waker, so a thread's wakeups named by context never exceed its total in one
    // sample. Read the other way round, the NVMe test saw 40 named against 39 (seeds kernel).
    read_hash(fd(maps.wakers), raw.wakers);
    read_hash(fd(maps.sched_state), raw.sched);
    // The deep tier's: the default tier's object owns the maps it shares, so they are read
    // (empty) when the tier is off; nvme_stats is its own object's.
    read_hash(fd(maps.ring_work), raw.ring_work);
    read_hash(fd(maps.iopoll_stats), raw.iopoll);
    if (objs_.nvme) read_hash(fd(objs_.nvme->maps.nvme_stats), raw.nvme);
    read_hash(fd(maps.work_gaps), raw.gaps);
    read_hash(fd(maps.sq_passes), raw.passes);
}

void BpfCollector::drain_created(std::vector<iou_created_ring>& out) {
    std::vector<std::pair<iou_created_key, iou_created_ring>> all;
    int fd = bpf_map__fd(objs_.core->maps.created_rings);
    // Lookup-and-delete in one step: a record written between a read and its delete would
    // otherwise be lost.
    if (!read_hash_batch(fd, all, true)) {
        read_hash_by_key(fd, all);
        for (const auto& [key, rec] : all) bpf_map_delete_elem(fd, &key);
    }
    for (const auto& [key, rec] : all) out.push_back(rec);
}

iou_stats BpfCollector::stats() const {
    iou_stats s;
    std::memcpy(&s, const_cast<const iou_stats*>(&objs_.core->data_shared->stats), sizeof s);
    return s;
}

void BpfCollector::cleanup(const MapCleanup& c) {
    // Per-key deletes: a batch delete stops at the first key that is already gone, and these
    // lists are what changed since the last sample, not what is alive. Every map whose entries
    // follow a thread or a ring is named by its probe in probe_table(); none is listed here.
    if (c.empty()) return;  // most samples: nothing went, so no map need be looked up
    for (const auto& probe : probe_table())
        for (const auto& m : probe.maps) {
            const int fd = objs_.map_fd(m.map);  // the owner's, where two objects share it
            if (fd < 0) continue;
            switch (m.owner) {
                case KeyOwner::thread:
                    for (std::uint32_t tid : c.threads) bpf_map_delete_elem(fd, &tid);
                    break;
                case KeyOwner::ring:
                    for (std::uint64_t ctx : c.rings) bpf_map_delete_elem(fd, &ctx);
                    break;
                case KeyOwner::ring_caller:
                    for (std::uint64_t ctx : c.rings)
                        for (std::uint32_t caller : {IOU_CALLER_APP, IOU_CALLER_SQ_THREAD}) {
                            iou_iopoll_key key{ctx, caller, 0};
                            bpf_map_delete_elem(fd, &key);
                        }
                    break;
                case KeyOwner::waker_pair:
                    for (const auto& k : c.wakers) bpf_map_delete_elem(fd, &k);
                    break;
                case KeyOwner::ring_born:  // collect/requests.cpp, at each read
                case KeyOwner::drained:
                case KeyOwner::in_flight:
                case KeyOwner::process:
                case KeyOwner::bounded:
                    break;
            }
        }
}

std::uint64_t BpfCollector::gaps_recorded() const {
    std::vector<std::pair<std::uint32_t, iou_work_gaps>> gaps;
    read_hash(bpf_map__fd(objs_.core->maps.work_gaps), gaps);
    std::uint64_t n = 0;
    for (const auto& [tid, g] : gaps)
        for (auto c : g.count) n += c;
    return n;
}

std::optional<GapSampling> BpfCollector::gap_sampling(std::uint64_t now_ns) const {
    if (!gap_duty_) return std::nullopt;
    return gap_duty_->state(now_ns);
}

std::vector<std::pair<std::string, std::uint64_t>> BpfCollector::map_capacities() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const char* name :
         {"ring_births", "sched_state", "wakers", "ring_work", "iopoll_stats", "nvme_stats",
          "work_gaps", "sq_passes", "req_stats", "req_inflight", "ring_overflow"})
        for (std::size_t o = 0; o < kBpfObjects; ++o) {
            bpf_object* obj = objs_.object(static_cast<BpfObject>(o));
            if (const bpf_map* m = obj ? bpf_object__find_map_by_name(obj, name) : nullptr) {
                out.emplace_back(name, bpf_map__max_entries(m));
                break;
            }
        }
    return out;
}

}  // namespace iouscope
