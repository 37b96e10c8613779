// The probe table (collect/probe_table.hpp): one designated-initializer entry per probe.
#include "collect/probe_table.hpp"

#include <algorithm>
#include <iterator>

#include "iouscope.skel.h"
#include "iouscope_deep.skel.h"
#include "iouscope_gaps.skel.h"
#include "iouscope_nvme.skel.h"
#include "iouscope_req.skel.h"

namespace iouscope {

namespace {

using K = Requirement::Kind;

// A program of object o, which is open whenever the probe is selected.
#define PROG(o, p) [](const BpfObjects& s) { return s.o->progs.p; }

// The default tier: the ring walk, the scheduler probes and ring births.
std::vector<ProbeSpec> core_probes() {
    return {
        {.id = ProbeId::iter_rings,
         .name = "iter_rings",
         .object = BpfObject::core,
         .variants = {{"iter",
                       {PROG(core, iou_iter_rings)},
                       {{K::btf_struct, "bpf_iter__task_file"},
                        {K::btf_struct, "io_ring_ctx"},
                        // libbpf resolves the typeless ksym itself; BTF says the function exists.
                        {K::btf_func, "io_uring_poll"}}}},
         .essential = true,
         .deep = false,
         // One entry per CPU: the task the walk is on, overwritten as it moves on. walk_order:
         // the last full walk's order, rewritten whole by each (collect/walk_order.hpp).
         .maps = {{"task_facts", KeyOwner::bounded}, {"walk_order", KeyOwner::bounded}}},
        {.id = ProbeId::sched_switch,
         .name = "sched_switch",
         .object = BpfObject::core,
         .variants = {{"tp_btf",
                       {PROG(core, iou_sched_switch)},
                       {{K::btf_typedef, "btf_trace_sched_switch"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"sched_state", KeyOwner::thread}},
         .gateable = true},
        {.id = ProbeId::sched_waking,
         .name = "sched_waking",
         .object = BpfObject::core,
         .variants = {{"tp_btf",
                       {PROG(core, iou_sched_waking)},
                       {{K::btf_typedef, "btf_trace_sched_waking"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"wakers", KeyOwner::waker_pair}},
         .gateable = true},
        {.id = ProbeId::io_uring_create,
         .name = "io_uring_create",
         .object = BpfObject::core,
         .variants = {{"tp_btf",
                       {PROG(core, iou_io_uring_create)},
                       {{K::btf_typedef, "btf_trace_io_uring_create"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"ring_births", KeyOwner::ring}, {"created_rings", KeyOwner::drained}}},
    };
}

// Deep tier: SQ threads, their submissions, IOPOLL and NVMe end_io.
std::vector<ProbeSpec> deep_probes() {
    return {
        // Deep tier. io_sq_thread fires once per SQ thread start: thread -> sqd, also for the
        // kthread-era 5.10/5.11 threads.
        {.id = ProbeId::io_sq_thread,
         .name = "io_sq_thread",
         .object = BpfObject::deep,
         .variants = {{"fentry",
                       {PROG(deep, iou_fentry_sq_thread)},
                       {{K::btf_func, "io_sq_thread"}}},
                      {"kprobe",
                       {PROG(deep, iou_kprobe_sq_thread)},
                       {{K::kprobes}, {K::ksym, "io_sq_thread"}}}},
         .essential = false,
         .deep = true},
        // Static and sometimes inlined before 6.0: then it has neither BTF nor a symbol.
        {.id = ProbeId::io_submit_sqes,
         .name = "io_submit_sqes",
         .object = BpfObject::deep,
         .variants = {{"fentry",
                       {PROG(deep, iou_fentry_submit), PROG(deep, iou_fexit_submit)},
                       {{K::btf_func, "io_submit_sqes"}}},
                      {"kprobe",
                       {PROG(deep, iou_kprobe_submit), PROG(deep, iou_kretprobe_submit)},
                       {{K::kprobes}, {K::ksym, "io_submit_sqes"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::submit_time},
         .maps = {{"ring_work", KeyOwner::ring}, {"submit_calls", KeyOwner::in_flight}}},
        // Two prototypes (see bpf/iouscope_deep.bpf.c): the fexit that reads the return value at
        // the right position is chosen by the BTF parameter count.
        {.id = ProbeId::io_do_iopoll,
         .name = "io_do_iopoll",
         .object = BpfObject::deep,
         .variants = {{"fentry",
                       {PROG(deep, iou_fentry_iopoll), PROG(deep, iou_fexit_iopoll)},
                       {{K::btf_params, "io_do_iopoll", 2}}},
                      {"fentry",
                       {PROG(deep, iou_fentry_iopoll_v510), PROG(deep, iou_fexit_iopoll_v510)},
                       {{K::btf_params, "io_do_iopoll", 3}}},
                      {"kprobe",
                       {PROG(deep, iou_kprobe_iopoll), PROG(deep, iou_kretprobe_iopoll)},
                       {{K::kprobes}, {K::ksym, "io_do_iopoll"}}}},
         .essential = false,
         .deep = true,
         .maps = {{"iopoll_stats", KeyOwner::ring_caller}, {"iopoll_calls", KeyOwner::in_flight}}},
        // nvme_core's end_io callbacks: nvme_uring_cmd_end_io, and for commands with a metadata
        // buffer nvme_uring_cmd_end_io_meta (6.1-6.7), whence the variants with and without it.
        {.id = ProbeId::nvme_uring_cmd_end_io,
         .name = "nvme_uring_cmd_end_io",
         .object = BpfObject::nvme,
         .variants =
             {{"fentry",
               {PROG(nvme, iou_fentry_nvme_end_io), PROG(nvme, iou_fentry_nvme_end_io_meta)},
               {{K::module, "nvme_core"},
                {K::btf_func, "nvme_uring_cmd_end_io"},
                {K::btf_func, "nvme_uring_cmd_end_io_meta"}}},
              {"fentry",
               {PROG(nvme, iou_fentry_nvme_end_io)},
               {{K::module, "nvme_core"}, {K::btf_func, "nvme_uring_cmd_end_io"}}},
              // Before the kprobe: see iou_tp_nvme_complete for the completions kprobes lose. It
              // needs nothing of nvme_core at load, so it also serves a module loaded later
              // (BpfCollector::refresh_modules()).
              {"tp_btf",
               {PROG(nvme, iou_tp_nvme_complete)},
               {{K::btf_typedef, "btf_trace_block_rq_complete"}, {K::btf_struct, "io_uring_cmd"}}},
              {"kprobe",
               {PROG(nvme, iou_kprobe_nvme_end_io), PROG(nvme, iou_kprobe_nvme_end_io_meta)},
               {{K::module, "nvme_core"},
                {K::kprobes},
                {K::ksym, "nvme_uring_cmd_end_io"},
                {K::ksym, "nvme_uring_cmd_end_io_meta"}}},
              {"kprobe",
               {PROG(nvme, iou_kprobe_nvme_end_io)},
               {{K::module, "nvme_core"}, {K::kprobes}, {K::ksym, "nvme_uring_cmd_end_io"}}}},
         .essential = false,
         .deep = true,
         .maps = {{"nvme_stats", KeyOwner::bounded}, {"cmd_pending", KeyOwner::bounded}}},
    };
}

// The gaps between submissions and the SQ threads' loop passes.
std::vector<ProbeSpec> gap_probes() {
    return {
        // The gaps between an SQ thread's submissions (advise's idle curve): per batch where
        // io_submit_sqes can be hooked, else per SQE from the tracepoint (renamed in 6.4),
        // duty-cycled (collect/gap_duty.hpp).
        {.id = ProbeId::work_gaps,
         .name = "work_gaps",
         .object = BpfObject::gaps,
         .variants = {{"fentry",
                       {PROG(gaps, iou_fexit_submit_gaps)},
                       {{K::btf_func, "io_submit_sqes"}}},
                      {"kprobe",
                       {PROG(gaps, iou_kretprobe_submit_gaps)},
                       {{K::kprobes}, {K::ksym, "io_submit_sqes"}}},
                      {"tp_btf",
                       {PROG(gaps, iou_submit_req)},
                       {{K::btf_typedef, "btf_trace_io_uring_submit_req"}},
                       true},
                      {"tp_btf",
                       {PROG(gaps, iou_submit_sqe)},
                       {{K::btf_typedef, "btf_trace_io_uring_submit_sqe"}},
                       true}},
         .essential = false,
         .deep = true,
         .maps = {{"work_gaps", KeyOwner::thread}}},
        // Loop passes and the on-CPU work of the busy ones: io_sq_tw ends every pass (6.9+;
        // before, the loop runs task work inline and has no per-pass function).
        // The entry separates the pass's task work (every ring's completions) from the last
        // ring's turn.
        {.id = ProbeId::loop_passes,
         .name = "loop_passes",
         .object = BpfObject::deep,
         .variants = {{"fentry",
                       {PROG(deep, iou_fentry_sq_tw), PROG(deep, iou_fexit_sq_tw)},
                       {{K::btf_params, "io_sq_tw", 2}}},
                      {"fentry",
                       {PROG(deep, iou_fentry_sq_tw), PROG(deep, iou_fexit_sq_tw_1arg)},
                       {{K::btf_params, "io_sq_tw", 1}}},
                      {"kprobe",
                       {PROG(deep, iou_kprobe_sq_tw), PROG(deep, iou_kretprobe_sq_tw)},
                       {{K::kprobes}, {K::ksym, "io_sq_tw"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::ring_turns},
         .maps = {{"sq_passes", KeyOwner::thread}},
         // A pass's time switched out is taken off its work at the switch (iou_sched_switch).
         .holds_gate_open = true},
    };
}

// NVMe passthrough completions and polls (deep tier).
std::vector<ProbeSpec> nvme_probes() {
    return {
        // Completions reaching the ring: io_uring_cmd_done, exported as __io_uring_cmd_done from
        // 6.18 (io_uring_cmd_done becomes an inline wrapper). Counts only commands whose NVMe
        // end_io was seen, so it needs nvme_uring_cmd_end_io attached to say anything.
        {.id = ProbeId::io_uring_cmd_done,
         .name = "io_uring_cmd_done",
         .object = BpfObject::nvme,
         .variants = {{"fentry",
                       {PROG(nvme, iou_fentry_cmd_done)},
                       {{K::btf_func, "io_uring_cmd_done"}}},
                      {"fentry",
                       {PROG(nvme, iou_fentry_cmd_done_618)},
                       {{K::btf_func, "__io_uring_cmd_done"}}},
                      {"kprobe",
                       {PROG(nvme, iou_kprobe_cmd_done)},
                       {{K::kprobes}, {K::ksym, "io_uring_cmd_done"}}},
                      {"kprobe",
                       {PROG(nvme, iou_kprobe_cmd_done_618)},
                       {{K::kprobes}, {K::ksym, "__io_uring_cmd_done"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::cmd_cqes}},
        // Multipath head char devices have their own iopoll on the kernels that poll by bio
        // (6.1); later ones poll every char device through nvme_ns_chr_uring_cmd_iopoll. Both
        // read nvme_core's structs, so they load only when its BTF is there at start.
        {.id = ProbeId::nvme_uring_cmd_iopoll,
         .name = "nvme_uring_cmd_iopoll",
         .object = BpfObject::nvme,
         .variants = {{"fentry",
                       {PROG(nvme, iou_fentry_nvme_poll), PROG(nvme, iou_fentry_nvme_head_poll)},
                       {{K::module, "nvme_core"},
                        {K::btf_func, "nvme_ns_chr_uring_cmd_iopoll"},
                        {K::btf_func, "nvme_ns_head_chr_uring_cmd_iopoll"}}},
                      {"fentry",
                       {PROG(nvme, iou_fentry_nvme_poll)},
                       {{K::module, "nvme_core"}, {K::btf_func, "nvme_ns_chr_uring_cmd_iopoll"}}},
                      {"kprobe",
                       {PROG(nvme, iou_kprobe_nvme_poll), PROG(nvme, iou_kprobe_nvme_head_poll)},
                       {{K::module, "nvme_core"},
                        {K::kprobes},
                        {K::ksym, "nvme_ns_chr_uring_cmd_iopoll"},
                        {K::ksym, "nvme_ns_head_chr_uring_cmd_iopoll"}}},
                      {"kprobe",
                       {PROG(nvme, iou_kprobe_nvme_poll)},
                       {{K::module, "nvme_core"},
                        {K::kprobes},
                        {K::ksym, "nvme_ns_chr_uring_cmd_iopoll"}}}},
         .essential = false,
         .deep = true},
    };
}

// CQ overflow (default tier) and the request tier's submit side and detours.
std::vector<ProbeSpec> request_probes() {
    return {
        // CQEs that found the CQ full (5.19+). Fires only for a ring in trouble, so it is in the
        // default tier: it loads the request object, whose other probes stay off without
        // --probes.requests.
        {.id = ProbeId::cqe_overflow,
         .name = "cqe_overflow",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_cqe_overflow)},
                       {{K::tp_params, "io_uring_cqe_overflow", 6}}}},
         .essential = false,
         .deep = false,
         .requests = false,
         .maps = {{"ring_overflow", KeyOwner::ring_born}}},
        // The request tier (--probes.requests). Each tracepoint changed its arguments over the
        // kernels; the variant is chosen by the prototype's parameter count in BTF (the leading
        // context pointer counted), as bpf/iouscope_req.bpf.c lists them.
        {.id = ProbeId::req_submit,
         .name = "req_submit",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_req_submit)},
                       {{K::tp_params, "io_uring_submit_req", 2}}},
                      {"tp_btf",
                       {PROG(req, iou_req_submit_sqe)},
                       {{K::tp_params, "io_uring_submit_sqe", 3}}},
                      {"tp_btf",
                       {PROG(req, iou_req_submit_sqe_v510)},
                       {{K::tp_params, "io_uring_submit_sqe", 8}}}},
         .essential = false,
         .deep = false,
         .requests = true,
         .maps = {{"req_stats", KeyOwner::ring_born}, {"req_inflight", KeyOwner::ring_born}}},
        // SQEs refused at initialisation, which the submit tracepoints do not see.
        {.id = ProbeId::req_failed,
         .name = "req_failed",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_req_failed)},
                       {{K::tp_params, "io_uring_req_failed", 4}}}},
         .essential = false,
         .deep = false,
         .requests = true},
        {.id = ProbeId::req_punt,
         .name = "req_punt",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_req_punt)},
                       {{K::tp_params, "io_uring_queue_async_work", 3}}},
                      {"tp_btf",
                       {PROG(req, iou_req_punt_v510)},
                       {{K::tp_params, "io_uring_queue_async_work", 6}}}},
         .essential = false,
         .deep = false,
         .requests = true},
        {.id = ProbeId::req_poll_arm,
         .name = "req_poll_arm",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_req_poll_arm)},
                       {{K::tp_params, "io_uring_poll_arm", 4}}},
                      {"tp_btf",
                       {PROG(req, iou_req_poll_arm_v510)},
                       {{K::tp_params, "io_uring_poll_arm", 7}}}},
         .essential = false,
         .deep = false,
         .requests = true},
    };
}

// The request tier's completions, enters and io-wq workers.
std::vector<ProbeSpec> completion_probes() {
    return {
        // Before 5.19 the completion carries no request: nothing to time, no variant.
        {.id = ProbeId::req_complete,
         .name = "req_complete",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_req_complete)},
                       {{K::tp_params, "io_uring_complete", 4}}},
                      {"tp_btf",
                       {PROG(req, iou_req_complete_v519)},
                       {{K::tp_params, "io_uring_complete", 8}}}},
         .essential = false,
         .deep = false,
         .requests = true,
         .provides = {Feature::request_latency}},
        // io_uring_enter per ring: calls, SQEs per call, time in calls that waited. Syscall
        // tracepoints, per batch; the ring is read from the caller's fd table.
        {.id = ProbeId::req_enter,
         .name = "req_enter",
         .object = BpfObject::req,
         .variants = {{"tracepoint",
                       {PROG(req, iou_enter), PROG(req, iou_enter_exit)},
                       {{K::trace_event, "syscalls/sys_enter_io_uring_enter"},
                        {K::trace_event, "syscalls/sys_exit_io_uring_enter"}}}},
         .essential = false,
         .deep = false,
         .requests = true,
         .maps = {{"ring_enters", KeyOwner::ring_born}, {"enter_calls", KeyOwner::in_flight}}},
        // io-wq workers: a walk of every task each sample (a flags test for all but io-threads)
        // and a program at every task's exit. Nothing on the I/O path.
        {.id = ProbeId::iowq_workers,
         .name = "iowq_workers",
         .object = BpfObject::req,
         .variants = {{"iter",
                       {PROG(req, iou_iter_workers), PROG(req, iou_iowq_exit)},
                       {{K::btf_struct, "bpf_iter__task"},
                        {K::btf_struct, "io_worker"},
                        {K::btf_typedef, "btf_trace_sched_process_exit"}}}},
         .essential = false,
         .deep = false,
         .requests = true,
         .maps = {{"iowq_exits", KeyOwner::process}}},
    };
}

// The request tier's task-work probes: what a ring's submitter is woken or interrupted for.
// Both count in req_enter's maps (ring_enters, enter_calls), which exist only where req_enter
// loads: they need its trace events too (a kernel without CONFIG_FTRACE_SYSCALLS, as the seeds
// kernel's, has neither).
std::vector<Requirement> with_enter_events(std::vector<Requirement> needs) {
    needs.push_back({K::trace_event, "syscalls/sys_enter_io_uring_enter"});
    needs.push_back({K::trace_event, "syscalls/sys_exit_io_uring_enter"});
    return needs;
}

std::vector<ProbeSpec> task_work_probes() {
    return {
        // Task work run by a thread waiting in io_uring_enter, on the ring it waits on: its
        // wake-ups to post completions. Once per task-work batch, after an enter-map lookup
        // that ends at once for a thread not waiting; needs req_enter's in-flight calls.
        {.id = ProbeId::wait_task_work,
         .name = "wait_task_work",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_task_work_run), PROG(req, iou_local_work_run)},
                       with_enter_events({{K::tp_params, "io_uring_task_work_run", 3},
                                          {K::tp_params, "io_uring_local_work_run", 4}})},
                      {"tp_btf",
                       {PROG(req, iou_task_work_run), PROG(req, iou_local_work_run)},
                       with_enter_events({{K::tp_params, "io_uring_task_work_run", 4},
                                          {K::tp_params, "io_uring_local_work_run", 4}})},
                      {"tp_btf",
                       {PROG(req, iou_task_work_run)},
                       with_enter_events({{K::tp_params, "io_uring_task_work_run", 4}})}},
         .essential = false,
         .deep = false,
         .requests = true},
        // IPIs task_work_add sends to running threads (TWA_SIGNAL) for poll completions, on
        // their ring: what COOP_TASKRUN saves. io_uring_task_add fires per poll wake-up,
        // ipi_send_cpu per IPI on the machine, of which only task_work_add's go past the first
        // compare. The loader gives it task_work_add's address range.
        {.id = ProbeId::task_work_ipis,
         .name = "task_work_ipis",
         .object = BpfObject::req,
         .variants = {{"tp_btf",
                       {PROG(req, iou_task_add), PROG(req, iou_ipi_send_cpu)},
                       with_enter_events({{K::tp_params, "io_uring_task_add", 3},
                                          {K::tp_params, "ipi_send_cpu", 4},
                                          {K::kernel_function, "task_work_add"}})}},
         .essential = false,
         .deep = false,
         .requests = true,
         // One entry per CPU: the latest poll wake-up there, overwritten by the next.
         .maps = {{"tw_stash", KeyOwner::bounded}}},
    };
}

#undef PROG

}  // namespace

// In ProbeId order: one table, built once from its parts.
const std::vector<ProbeSpec>& probe_table() {
    static const std::vector<ProbeSpec> table = [] {
        std::vector<ProbeSpec> all;
        for (auto part : {core_probes, deep_probes, gap_probes, nvme_probes, request_probes,
                          completion_probes, task_work_probes}) {
            auto specs = part();
            all.insert(all.end(), std::make_move_iterator(specs.begin()),
                       std::make_move_iterator(specs.end()));
        }
        return all;
    }();
    return table;
}

const ProbeSpec& probe_spec(ProbeId id) {
    return probe_table().at(static_cast<std::size_t>(id));
}

bool provides(const ProbeSpec& p, Feature f) {
    return std::find(p.provides.begin(), p.provides.end(), f) != p.provides.end();
}

}  // namespace iouscope
