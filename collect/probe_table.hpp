#pragma once
// The probe table: every probe, its variants (the programs that load and attach together, and
// what each needs from the kernel), the features it gives the rest of the daemon and the maps
// whose entries it creates. Declarative: the loader, the map cleanup and the tests read it.
#include <cstdint>
#include <vector>

#include "collect/bpf_objects.hpp"

struct bpf_program;

namespace iouscope {

// What a program needs from the kernel before we try to load it.
struct Requirement {
    enum class Kind {
        btf_typedef,      // a type in vmlinux BTF (tracepoints: btf_trace_<name>)
        btf_struct,       // a struct in vmlinux BTF
        btf_func,         // a function in vmlinux or module BTF (fentry/fexit targets)
        btf_params,       // btf_func with exactly `params` parameters (signature variants)
        tp_params,        // tracepoint `name` whose prototype has exactly `params` parameters, the
                          // context pointer included (btf_trace_<name>; signature variants)
        trace_event,      // a tracefs event ("syscalls/sys_enter_io_uring_enter"): classic
                          // tracepoints need its id, so tracefs mounted and the event built in
        ksym,             // a symbol in /proc/kallsyms (kprobe targets, typeless ksyms)
        kernel_function,  // a function of the kernel proper whose code range /proc/kallsyms
                          // gives (kernel_function_range: no BCC symbol cache)
        kprobes,          // the kernel can attach kprobes at all
        module,           // a module loaded now (/sys/module/<name>): its BTF and symbols are read
                          // at load, so programs on it cannot follow a module loaded later
    } kind;
    const char* name = "";
    int params = 0;
};

// A program of one of the opened objects (collect/bpf_objects.hpp).
using ProgramGetter = bpf_program* (*)(const BpfObjects&);

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
    cqe_overflow,
    req_submit,
    req_failed,
    req_punt,
    req_poll_arm,
    req_complete,
    req_enter,
    iowq_workers,
    wait_task_work,
    task_work_ipis,
    count
};

// What an attached probe lets the rest of the daemon rely on (the sampler reads these, not
// probe names).
enum class Feature : std::uint8_t {
    submit_time,      // io_submit_sqes time per ring: the ring's work without loop passes
    ring_turns,       // loop passes cut into turns: the ring's work, adding up to the pass time
    cmd_cqes,         // NVMe uring_cmd completions reaching io_uring (the CQE delay)
    request_latency,  // requests are timed from submission to their final CQE
};

// Whose life an entry of a BPF map follows, so that BpfCollector::cleanup() frees it when that
// owner goes (Aggregator::cleanup() names them). Entries of the last three kinds need nothing.
enum class KeyOwner : std::uint8_t {
    thread,       // key: SQ thread tid
    ring,         // key: io_ring_ctx address
    ring_caller,  // key: iou_iopoll_key {ctx, caller}, for each caller
    waker_pair,   // key: iou_waker_key
    ring_born,    // key or value names a ring by ctx and birth (include/iouscope/requests.h):
                  // the reader deletes the entries of rings that are gone (collect/requests.cpp)
    drained,      // moved out by the sampler every sample
    in_flight,    // entry to exit of one call: the program deletes it
    process,      // key: a process (iou_iowq_proc_key): the program deletes it when the
                  // process's last thread exits
    bounded,      // one per device or command: kept, bounded by max_entries (LRU or devices)
};

struct OwnedMap {
    const char* map;  // its name in the BPF objects (the default tier's, where two share it)
    KeyOwner owner;
};

struct ProbeSpec {
    ProbeId id;
    const char* name;                    // metric label "probe"
    BpfObject object;                    // the object that holds every variant's programs
    std::vector<ProbeVariant> variants;  // best first: fentry, then kprobe, ...
    bool essential;  // without it the daemon has nothing to report and refuses to start
    bool deep;       // part of the opt-in deep tier (--probes.deep)
    // Part of the opt-in request tier (--probes.requests): runs for every request of every ring.
    bool requests = false;
    std::vector<Feature> provides = {};
    std::vector<OwnedMap> maps = {};  // the maps whose entries its programs create
    // Detached by the scheduler gate while every SQ thread runs without sleeping
    // (model/sched_gate.hpp): the program runs for every task on the machine.
    bool gateable = false;
    // Keeps the scheduler gate open while attached: sched_switch corrects its state at every
    // switch of an SQ thread, preemptions included, and the gate sees only voluntary ones.
    bool holds_gate_open = false;
};

// The programs of bpf/*.bpf.c, their variants, what each one needs, what it provides and the
// maps it owns. The loader, the map cleanup and --probe-report all read this table;
// tests/unit/collect checks it against the BPF objects (every program and map claimed once).
const std::vector<ProbeSpec>& probe_table();
const ProbeSpec& probe_spec(ProbeId id);
// Whether the probe declares the feature.
bool provides(const ProbeSpec& p, Feature f);

}  // namespace iouscope
