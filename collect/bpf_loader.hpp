#pragma once
// Owns every kernel object iouscope creates: the BPF skeleton, its links and iterator fds.
// Each is held by an RAII type, so every exit path — including an exception or a signal that
// ends main() — detaches everything and leaves nothing of ours in `bpftool prog show`.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collect/gap_duty.hpp"
#include "collect/kernel_features.hpp"
#include "iouscope/records.h"
#include "model/aggregator.hpp"
#include "model/snapshot.hpp"

struct bpf_program;
struct bpf_link;
struct iouscope_bpf;

namespace iouscope {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd();
    UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept;
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// One attached program. make() attaches or explains why it could not; the destructor detaches.
class AttachedProbe {
public:
    static std::unique_ptr<AttachedProbe> make(bpf_program* prog, std::string& error);
    ~AttachedProbe();
    AttachedProbe(const AttachedProbe&) = delete;
    AttachedProbe& operator=(const AttachedProbe&) = delete;
    bpf_link* link() const { return link_; }

private:
    explicit AttachedProbe(bpf_link* l) : link_(l) {}
    bpf_link* link_;
};

struct SkeletonDeleter {
    void operator()(iouscope_bpf* s) const;
};

// What a program needs from the kernel before we try to load it.
struct Requirement {
    enum class Kind {
        btf_typedef,  // a type in vmlinux BTF (tracepoints: btf_trace_<name>)
        btf_struct,   // a struct in vmlinux BTF
        btf_func,     // a function in vmlinux or module BTF (fentry/fexit targets)
        btf_params,   // btf_func with exactly `params` parameters (signature variants)
        ksym,         // a symbol in /proc/kallsyms (kprobe targets, typeless ksyms)
        kprobes,      // the kernel can attach kprobes at all
        module,       // a module loaded now (/sys/module/<name>): its BTF and symbols are read
                      // at load, so programs on it cannot follow a module loaded later
    } kind;
    const char* name = "";
    int params = 0;
};

using ProgramGetter = bpf_program* (*)(iouscope_bpf*);

// One way of attaching a probe: a set of programs that load and attach together.
struct ProbeVariant {
    const char* kind;  // metric label "kind": tp_btf, iter, fentry, kprobe
    std::vector<ProgramGetter> programs;
    std::vector<Requirement> needs;
    // Runs once per SQE of every ring: attached only in --probes.gap-sampling's windows.
    bool per_sqe = false;
};

// The probes, in probe_table() order. Code names a probe by its id; its name string is for the
// edges only (logs, metric labels, --probe-report).
enum class ProbeId : std::uint8_t {
    iter_rings,
    sched_switch,
    sched_waking,
    io_uring_create,
    io_sq_thread,
    io_submit_sqes,
    io_do_iopoll,
    nvme_uring_cmd_end_io,
    work_gaps,
    loop_passes,
    io_uring_cmd_done,
    nvme_uring_cmd_iopoll,
    count
};

// What an attached probe lets the rest of the daemon rely on (the sampler reads these, not
// probe names).
enum class Feature : std::uint8_t {
    submit_time,  // io_submit_sqes time per ring: the ring's work without loop passes
    ring_turns,   // loop passes cut into turns: the ring's work, adding up to the pass time
    cmd_cqes,     // NVMe uring_cmd completions reaching io_uring (the CQE delay)
};

// Whose life an entry of a BPF map follows, so that BpfCollector::cleanup() frees it when that
// owner goes (Aggregator::cleanup() names them). Entries of the last three kinds need nothing.
enum class KeyOwner : std::uint8_t {
    thread,       // key: SQ thread tid
    ring,         // key: io_ring_ctx address
    ring_caller,  // key: iou_iopoll_key {ctx, caller}, for each caller
    waker_pair,   // key: iou_waker_key
    drained,      // moved out by the sampler every sample
    in_flight,    // entry to exit of one call: the program deletes it
    bounded,      // one per device or command: kept, bounded by max_entries (LRU or devices)
};

struct OwnedMap {
    const char* map;  // its name in bpf/iouscope.bpf.c
    KeyOwner owner;
};

struct ProbeSpec {
    ProbeId id;
    const char* name;                    // metric label "probe"
    std::vector<ProbeVariant> variants;  // best first: fentry, then kprobe, ...
    bool essential;  // without it the daemon has nothing to report and refuses to start
    bool deep;       // part of the opt-in deep tier (--probes.deep)
    std::vector<Feature> provides = {};
    std::vector<OwnedMap> maps = {};  // the maps whose entries its programs create
    // Detached by the scheduler gate while every SQ thread runs without sleeping
    // (model/sched_gate.hpp): the program runs for every task on the machine.
    bool gateable = false;
    // Keeps the scheduler gate open while attached: sched_switch corrects its state at every
    // switch of an SQ thread, preemptions included, and the gate sees only voluntary ones.
    bool holds_gate_open = false;
};

// The programs of bpf/iouscope.bpf.c, their variants, what each one needs, what it provides
// and the maps it owns. The loader, the map cleanup and --probe-report all read this table;
// tests/unit/collect checks it against the BPF object (every program and map claimed once).
const std::vector<ProbeSpec>& probe_table();
const ProbeSpec& probe_spec(ProbeId id);

struct LoaderOptions {
    bool deep = false;               // load the deep tier (per batch / per request probes)
    bool no_fentry = false;          // skip fentry/fexit variants, e.g. to exercise kprobes
    GapSamplingConfig gap_sampling;  // duty cycle of per-SQE variants (ProbeVariant::per_sqe)
};

// Decides, without loading anything, which variant each probe would use on this kernel and why
// the others are out. The loader then confirms by loading.
std::vector<ProbeState> plan_probes(const KernelFeatures& kf, const LoaderOptions& opts,
                                    std::vector<int>& chosen_variant);

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
    // Follows modules loaded, unloaded or reloaded since the last call: a stat() of
    // /sys/module/nvme_core, and a /proc/kallsyms scan when its instance changed. Call it before
    // each sample; probes() says what it found (ProbeState::waiting_for).
    void refresh_modules();

    // One walk of every task's files; appends one record per io_uring file. complete is false
    // when the walk stopped before the end of the task list (the records read are kept); the
    // call fails only when it read nothing.
    bool walk_rings(std::vector<iou_ring_record>& out, bool& complete, std::string& error);
    void read_births(std::vector<std::pair<std::uint64_t, std::uint64_t>>& out) const;
    void read_sched(std::vector<std::pair<std::uint32_t, iou_sched_state>>& out) const;
    void read_wakers(std::vector<std::pair<iou_waker_key, iou_waker_val>>& out) const;
    // Moves every pending io_uring_create record out of the map.
    void drain_created(std::vector<iou_created_ring>& out);
    iou_stats stats() const;
    // Deletes the entries whose owners the aggregator found gone (Aggregator::cleanup()).
    void cleanup(const MapCleanup& c);
    // Deep tier maps (empty when the tier is off).
    void read_ring_work(std::vector<std::pair<std::uint64_t, iou_ring_work>>& out) const;
    void read_iopoll(std::vector<std::pair<iou_iopoll_key, iou_iopoll_stats>>& out) const;
    void read_nvme(std::vector<std::pair<iou_dev_key, iou_nvme_stats>>& out) const;
    void read_gaps(std::vector<std::pair<std::uint32_t, iou_work_gaps>>& out) const;
    void read_passes(std::vector<std::pair<std::uint32_t, iou_sq_passes>>& out) const;
    // The duty cycle of the work-gap probe; nullopt where every gap is recorded (a per-batch
    // variant, --probes.gap-sampling=off, or the probe off).
    std::optional<GapSampling> gap_sampling(std::uint64_t now_ns) const;
    // Gaps recorded so far, summed over threads: what closes a duty-cycled window early.
    std::uint64_t gaps_recorded() const;
    // What the latest complete walk found: whether any ring has SQPOLL. A duty-cycled window
    // closes early where none has, since the work-gap program records only SQ threads.
    void note_sqpoll_rings(bool any) { sqpoll_rings_.store(any ? 1 : 0); }

private:
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
    std::unique_ptr<iouscope_bpf, SkeletonDeleter> skel_;
    std::vector<std::unique_ptr<AttachedProbe>> links_;
    // The gateable probes' links, per probe index, apart so that the gate can drop and remake
    // them; destroyed with links_, before the skeleton.
    std::vector<std::vector<std::unique_ptr<AttachedProbe>>> gated_links_;
    bpf_link* iter_link_ = nullptr;
    std::vector<ProbeState> probes_;
    std::vector<std::vector<bpf_program*>> attached_programs_;  // per probe, parallel to probes_
    // The NVMe tracepoint variant, which matches requests by nvme_core's end_io addresses.
    int nvme_tp_probe_ = -1;                // index into probes_, -1 when another variant runs
    std::uint64_t nvme_core_instance_ = 0;  // module_instance() the addresses were read for
    int nvme_reads_ = 0;                    // /proc/kallsyms scans for this instance
    // Its links, empty while it waits for nvme_core (attach_nvme_tp); destroyed before skel_.
    std::vector<std::unique_ptr<AttachedProbe>> nvme_tp_links_;
    UniqueFd kallsyms_;  // /proc/kallsyms, opened before the daemon drops CAP_SYSLOG
    GapSamplingConfig gap_config_;
    std::atomic<int> sqpoll_rings_{-1};       // note_sqpoll_rings; -1 before the first walk
    std::unique_ptr<GapDutyCycle> gap_duty_;  // after skel_: stops and detaches before it unloads
};

}  // namespace iouscope
