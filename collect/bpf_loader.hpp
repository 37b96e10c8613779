#pragma once
// The collector: loads the probes the kernel can run (collect/bpf_load), attaches them, keeps
// their links (the scheduler gate, the NVMe tracepoint that waits for nvme_core, the duty-cycled
// gap probe) and reads their maps (collect/bpf_maps.cpp). Each kernel object is held by an RAII
// type, so every exit path — including an exception or a signal that ends main() — detaches
// everything and leaves nothing of ours in `bpftool prog show`.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collect/bpf_link.hpp"
#include "collect/bpf_load.hpp"
#include "collect/bpf_objects.hpp"
#include "collect/kernel_features.hpp"
#include "collect/probe_table.hpp"
#include "collect/walk_order.hpp"
#include "iouscope/records.h"
#include "model/aggregator.hpp"
#include "model/gap_sampling.hpp"
#include "model/snapshot.hpp"

struct bpf_program;
struct bpf_link;

namespace iouscope {

class GapDutyCycle;

// Loads the programs the kernel can run, attaches them, and reads their maps.
class BpfCollector {
public:
    // Returns nullptr and sets error when an essential program cannot run.
    static std::unique_ptr<BpfCollector> make(const KernelFeatures& kf, const LoaderOptions& opts,
                                              std::string& error);
    ~BpfCollector();

    const std::vector<ProbeState>& probes() const { return probes_; }
    // Whether the probe is attached; fixed once make() returns.
    bool attached(ProbeId probe) const;
    // Whether an attached probe provides the feature.
    bool provides(Feature f) const;
    // The scheduler gate: detaches (closed) or attaches again the gateable probes. Returns
    // false, with error set, when a program would not attach again; the gate then stays open
    // for the probes that did.
    bool set_sched_gate(bool closed, std::string& error);
    // The attached probe that keeps the gate open (ProbeSpec::holds_gate_open), or nullptr.
    const char* gate_holder() const;
    // Whether a gateable probe is detached now (closed, or an attach that failed).
    bool sched_gate_closed() const;
    // probes() with each attached probe's current count of skipped runs.
    std::vector<ProbeState> probes_with_misses() const;
    // One sample's reads, in one pass and in the order the counts need: follows nvme_core
    // (refresh_modules), drains the created rings, takes the sample's instant on both clocks,
    // walks the rings and reads every map and the shared counters. Fills raw's kernel-side
    // fields (all but kernel and cgroup_paths). Returns false, with error set, when the walk
    // read nothing; a walk that ended early keeps what it read (raw.walk_complete false) and
    // says why in error. light: the walk may pass over the plain rings the last full walk read
    // (model/ring_carry.hpp), which only light_walks() allows; raw.light_walk says if it did.
    bool read_sample(RawSample& raw, std::string& error, bool light = false);
    // Whether a walk may pass over plain rings: io_uring_create is attached, and announces each
    // new ring, which may sit at a closed one's place and address (collect/walk_order.hpp).
    bool light_walks() const { return attached(ProbeId::io_uring_create); }
    // Deletes the entries whose owners the aggregator found gone (Aggregator::cleanup()).
    void cleanup(const MapCleanup& c);
    // max_entries of each bounded map loaded, under the names Snapshot::map_entries uses; fixed
    // once make() returns.
    std::vector<std::pair<std::string, std::uint64_t>> map_capacities() const;
    // The kernel's IORING_OP_* names by value, lower case without the prefix (nop, readv, ...).
    std::shared_ptr<const std::vector<std::string>> opcode_names() const { return opcode_names_; }

private:
    // Follows modules loaded, unloaded or reloaded since the last call: a stat() of
    // /sys/module/nvme_core, and a /proc/kallsyms scan when its instance changed. Called before
    // each sample; probes() says what it found (ProbeState::waiting_for).
    void refresh_modules();
    // One walk of every task's files; appends one record per io_uring file. complete is false
    // when the walk stopped before the end of the task list (the records read are kept); the
    // call fails only when it read nothing.
    // light: pass over the plain rings of order_ (bpf/iouscope.bpf.c, walk_passes_over).
    bool walk_rings(RingRecords& out, bool& complete, std::string& error, bool light);
    // The maps, into raw; the deep tier's are empty when it is off.
    void read_maps(RawSample& raw) const;
    // The request tier's maps and the CQ overflow counts, of the rings alive in raw's walk,
    // into raw.requests; deletes the entries of rings gone before walk_start_ns
    // (collect/requests.cpp).
    void read_requests(RawSample& raw, std::uint64_t walk_start_ns) const;
    // io-wq workers (collect/iowq.cpp): the exits counted so far, then the live workers.
    void read_iowq(RawSample& raw) const;
    // Moves every pending io_uring_create record out of the map.
    void drain_created(std::vector<iou_created_ring>& out);
    iou_stats stats() const;
    // The duty cycle of the work-gap probe; nullopt where every gap is recorded (a per-batch
    // variant, --probes.gap-sampling=off, or the probe off).
    std::optional<GapSampling> gap_sampling(std::uint64_t now_ns) const;
    // Gaps recorded so far, summed over threads: what closes a duty-cycled window early.
    std::uint64_t gaps_recorded() const;
    // The first attached probe whose declaration satisfies pred, or nullptr.
    template <class Pred>
    const ProbeSpec* first_attached(Pred pred) const {
        const auto& table = probe_table();
        for (std::size_t i = 0; i < table.size(); ++i)
            if (probes_[i].attached && pred(table[i])) return &table[i];
        return nullptr;
    }
    BpfCollector() = default;
    // Attaches variant v of probe i (probe_table() order); false only when an essential probe
    // cannot attach, with error set.
    bool attach(std::size_t i, int v, std::string& error);
    // Links again the programs probe i attached at start, appending to `links`; on a refusal
    // returns false with why set, keeping the links made before it. What the scheduler gate
    // and attach_nvme_tp() remake after dropping them.
    bool relink(std::size_t i, std::vector<std::unique_ptr<AttachedProbe>>& links,
                std::string& why);
    // Makes (on) or drops the NVMe tracepoint variant's links: it is attached only while
    // nvme_core's end_io addresses are known, since until then it matches nothing.
    void attach_nvme_tp(bool on);
    void log_probes() const;
    // Declared before links_ so links are destroyed first: detach, then unload.
    BpfObjects objs_;
    std::vector<std::unique_ptr<AttachedProbe>> links_;
    // The gateable probes' links, per probe index, apart so that the gate can drop and remake
    // them; destroyed with links_, before the objects.
    std::vector<std::vector<std::unique_ptr<AttachedProbe>>> gated_links_;
    bpf_link* iter_link_ = nullptr;
    bpf_link* workers_link_ = nullptr;  // the io-wq worker walk's (iowq_workers)
    std::uint64_t stuck_after_ns_ = 0;  // LoaderOptions::stuck_after_ns
    std::vector<ProbeState> probes_;
    std::vector<std::vector<bpf_program*>> attached_programs_;  // per probe, parallel to probes_
    // The NVMe tracepoint variant, which matches requests by nvme_core's end_io addresses.
    int nvme_tp_probe_ = -1;                // index into probes_, -1 when another variant runs
    std::uint64_t nvme_core_instance_ = 0;  // module_instance() the addresses were read for
    int nvme_reads_ = 0;                    // /proc/kallsyms scans for this instance
    // Its links, empty while it waits for nvme_core (attach_nvme_tp); destroyed before objs_.
    std::vector<std::unique_ptr<AttachedProbe>> nvme_tp_links_;
    UniqueFd kallsyms_;  // /proc/kallsyms, opened before the daemon drops CAP_SYSLOG
    GapSamplingConfig gap_config_;
    // Whether the latest complete walk found a ring with SQPOLL; -1 before the first. A
    // duty-cycled window closes early where none has: the work-gap program records only SQ
    // threads.
    std::atomic<int> sqpoll_rings_{-1};
    WalkOrder order_;             // the last full walk's, for light walks
    bool order_refused_ = false;  // the map refused it once: logged
    std::shared_ptr<const std::vector<std::string>> opcode_names_;
    std::unique_ptr<GapDutyCycle> gap_duty_;  // after objs_: stops and detaches before they unload
};

}  // namespace iouscope
