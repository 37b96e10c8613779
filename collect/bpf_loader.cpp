// The collector's life: make() (plan, load, attach), the links the scheduler gate and the NVMe
// tracepoint drop and remake, the probes' states and their skipped runs.
#include "collect/bpf_loader.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "collect/gap_duty.hpp"
#include "common/clock.hpp"
#include "common/duration.hpp"
#include "iouscope.skel.h"
#include "iouscope_nvme.skel.h"
#include "iouscope_req.skel.h"

namespace iouscope {

std::unique_ptr<BpfCollector> BpfCollector::make(const KernelFeatures& kf,
                                                 const LoaderOptions& opts, std::string& error) {
    install_libbpf_log();
    const auto& table = probe_table();
    std::unique_ptr<BpfCollector> c(new BpfCollector);
    std::vector<int> chosen;
    c->probes_ = plan_probes(kf, opts, chosen);
    c->gap_config_ = opts.gap_sampling;
    c->stuck_after_ns_ = opts.stuck_after_ns;
    const auto sel = load_probes(kf, opts, chosen, c->probes_, c->objs_, error);
    if (!sel) return nullptr;
    c->attached_programs_.resize(table.size());
    c->gated_links_.resize(table.size());
    for (auto [i, v] : *sel)
        if (!c->attach(i, v, error)) return nullptr;
    bpf_map* order = c->objs_.core->maps.walk_order;
    c->order_ = WalkOrder(bpf_map__fd(order), bpf_map__max_entries(order));
    c->refresh_modules();
    c->log_probes();
    // Opcode names from the kernel's own enum, never a table of ours: 5.10 has it anonymous,
    // later kernels as enum io_uring_op, each with the opcodes it knows.
    c->opcode_names_ = std::make_shared<const std::vector<std::string>>(
        kf.btf_enum_names("IORING_OP_NOP", "IORING_OP_", "IORING_OP_LAST"));
    return c;
}

bool BpfCollector::attach(std::size_t i, int v, std::string& error) {
    const auto& spec = probe_table()[i];
    const auto& variant = spec.variants[static_cast<std::size_t>(v)];
    const auto& programs = variant.programs;
    auto& st = probes_[i];
    if (variant.per_sqe && gap_config_.enabled()) {
        std::vector<bpf_program*> progs;
        for (auto get : programs) progs.push_back(get(objs_));
        attached_programs_[i] = progs;
        gap_duty_ =
            std::make_unique<GapDutyCycle>(progs, &objs_.core->data_shared->gap_start_ns,
                                           &objs_.core->data_shared->gap_end_ns, gap_config_,
                                           GapDutyHooks{
                                               [this] { return gaps_recorded(); },
                                               [this] { return sqpoll_rings_ == 0; },
                                           });
        st.attached = true;
        return true;
    }
    std::vector<std::unique_ptr<AttachedProbe>> links;
    std::string why;
    for (auto get : programs) {
        auto probe = AttachedProbe::make(get(objs_), why);
        if (!probe) break;
        if (get(objs_) == objs_.core->progs.iou_iter_rings) iter_link_ = probe->link();
        if (objs_.req && get(objs_) == objs_.req->progs.iou_iter_workers) {
            workers_link_ = probe->link();
            // Before the exit program attaches: a worker started from here on was created
            // while the daemon watched (iouscope_iowq_workers_created_total).
            objs_.req->bss->iowq_since_ns = monotonic_ns();
        }
        links.push_back(std::move(probe));
    }
    if (!why.empty()) {
        st.reason = why;
        if (!spec.essential) return true;
        error = std::string("cannot attach ") + spec.name + ": " + why;
        return false;
    }
    st.attached = true;
    if (objs_.nvme && programs.front()(objs_) == objs_.nvme->progs.iou_tp_nvme_complete) {
        nvme_tp_probe_ = static_cast<int>(i);
        // Opened now, while privileged: see module_symbol_addresses().
        kallsyms_ = UniqueFd(::open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
        // It runs on every block request of the machine and matches nothing until nvme_core's
        // addresses are known: attached only from then (refresh_modules(), at the end of make()).
        // The attach above proved it can be.
        links.clear();
    }
    for (auto& l : links) (spec.gateable ? gated_links_[i] : links_).push_back(std::move(l));
    for (auto get : programs) attached_programs_[i].push_back(get(objs_));
    return true;
}

bool BpfCollector::relink(std::size_t i, std::vector<std::unique_ptr<AttachedProbe>>& links,
                          std::string& why) {
    for (auto* prog : attached_programs_[i]) {
        auto probe = AttachedProbe::make(prog, why);
        if (!probe) return false;
        links.push_back(std::move(probe));
    }
    return true;
}

bool BpfCollector::set_sched_gate(bool closed, std::string& error) {
    const auto& table = probe_table();
    bool ok = true;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (!table[i].gateable || !probes_[i].attached) continue;
        auto& links = gated_links_[i];
        if (closed) {
            links.clear();  // bpf_link__destroy: the tracepoint runs nothing of ours from here
        } else if (links.empty()) {
            std::string why;
            if (!relink(i, links, why)) {
                error = std::string(table[i].name) + ": " + why;
                ok = false;
            }
        }
        probes_[i].gated = links.empty();
    }
    return ok;
}

bool BpfCollector::sched_gate_closed() const {
    return std::any_of(probes_.begin(), probes_.end(), [](const auto& p) { return p.gated; });
}

void BpfCollector::log_probes() const {
    if (gap_duty_)
        spdlog::info("probe work_gaps: per SQE, so attached {} of every {} (--probes.gap-sampling)",
                     format_duration(gap_config_.on), format_duration(gap_config_.period));
    for (const auto& st : probes_) {
        if (st.attached && !st.waiting_for.empty())
            spdlog::info("probe {} ({}): loaded, its link off until module {} loads; {}", st.probe,
                         st.kind, st.waiting_for, st.reason);
        else if (st.attached && !st.reason.empty())
            spdlog::info("probe {} ({}): attached; higher tiers passed over: {}", st.probe, st.kind,
                         st.reason);
        else if (st.attached)
            spdlog::info("probe {} ({}): attached", st.probe, st.kind);
        else
            spdlog::warn("probe {} ({}): off, {}", st.probe, st.kind, st.reason);
    }
}

bool BpfCollector::attached(ProbeId probe) const {
    const auto i = static_cast<std::size_t>(probe);
    return i < probes_.size() && probes_[i].attached;
}

bool BpfCollector::provides(Feature f) const {
    return first_attached([&](const ProbeSpec& p) { return iouscope::provides(p, f); }) != nullptr;
}

const char* BpfCollector::gate_holder() const {
    const ProbeSpec* p = first_attached([](const ProbeSpec& s) { return s.holds_gate_open; });
    return p ? p->name : nullptr;
}

void BpfCollector::refresh_modules() {
    if (nvme_tp_probe_ < 0) return;
    const std::uint64_t instance = module_instance("nvme_core");
    // An instance is read a few times at most: its symbols are in /proc/kallsyms before its
    // /sys/module directory appears, so only hidden addresses (no CAP_SYSLOG) keep them 0.
    constexpr int kReads = 3;
    const bool was_resolved = objs_.nvme->bss->nvme_end_io_fn != 0;
    if (instance == nvme_core_instance_ && (was_resolved || nvme_reads_ >= kReads)) return;
    if (instance != nvme_core_instance_) nvme_reads_ = 0;
    const bool first = nvme_core_instance_ == 0 && nvme_reads_ == 0 && !was_resolved;
    std::vector<std::uint64_t> fn(2, 0);
    if (instance)
        fn = module_symbol_addresses(kallsyms_.get(), "nvme_core",
                                     {"nvme_uring_cmd_end_io", "nvme_uring_cmd_end_io_meta"});
    objs_.nvme->bss->nvme_end_io_meta_fn = fn[1];
    objs_.nvme->bss->nvme_end_io_fn = fn[0];
    const bool resolved = fn[0] != 0;
    nvme_core_instance_ = instance;
    nvme_reads_ = instance ? nvme_reads_ + 1 : kReads;
    auto& st = probes_[static_cast<std::size_t>(nvme_tp_probe_)];
    st.waiting_for = resolved ? "" : "nvme_core";
    attach_nvme_tp(resolved);
    if (resolved && !first)
        spdlog::info("probe {} ({}): nvme_core loaded, passthrough completions counted from now",
                     st.probe, st.kind);
    else if (instance && !resolved && nvme_reads_ == kReads)
        spdlog::warn(
            "probe {} ({}): nvme_core is loaded but /proc/kallsyms shows no address for "
            "nvme_uring_cmd_end_io (hidden without CAP_SYSLOG?); it will be looked for "
            "again when nvme_core is reloaded",
            st.probe, st.kind);
    else if (!instance && was_resolved)
        spdlog::info("probe {} ({}): nvme_core unloaded, waiting for it to load again", st.probe,
                     st.kind);
}

void BpfCollector::attach_nvme_tp(bool on) {
    if (!on) {
        nvme_tp_links_.clear();
        return;
    }
    if (!nvme_tp_links_.empty()) return;
    const auto i = static_cast<std::size_t>(nvme_tp_probe_);
    auto& st = probes_[i];
    if (std::string why; !relink(i, nvme_tp_links_, why)) {
        // It attached at start; if the kernel now refuses, say so rather than count nothing.
        nvme_tp_links_.clear();
        st.attached = false;
        st.reason = "nvme_core loaded, but the tracepoint would not attach again: " + why;
        spdlog::error("probe {} ({}): {}", st.probe, st.kind, st.reason);
        return;
    }
    if (!st.attached) {  // refused once, attached at a later load of the module
        st.attached = true;
        st.reason.clear();
    }
}

BpfCollector::~BpfCollector() {
    gap_duty_.reset();  // its thread attaches and detaches: stop it first
    links_.clear();     // detach before the skeleton unloads the programs
}

std::vector<ProbeState> BpfCollector::probes_with_misses() const {
    // The kernel skips a kprobe/kretprobe program when another one is running on the same CPU
    // (an interrupt arriving during a probe, typically); fentry and tp_btf count the same way.
    // These counts say how much a probe's numbers under-report.
    auto out = probes_;
    for (std::size_t i = 0; i < out.size() && i < attached_programs_.size(); ++i) {
        for (auto* prog : attached_programs_[i]) {
            bpf_prog_info info{};
            __u32 len = sizeof info;
            if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
                out[i].missed += info.recursion_misses;
        }
    }
    return out;
}

}  // namespace iouscope
