#include "collect/bpf_loader.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "common/duration.hpp"
#include "iouscope.skel.h"

namespace iouscope {

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

std::unique_ptr<AttachedProbe> AttachedProbe::make(bpf_program* prog, std::string& error) {
    bpf_link* l = bpf_program__attach(prog);
    if (!l) {
        error = std::string("attach failed: ") + std::strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<AttachedProbe>(new AttachedProbe(l));
}

AttachedProbe::~AttachedProbe() {
    bpf_link__destroy(link_);
}

void SkeletonDeleter::operator()(iouscope_bpf* s) const {
    iouscope_bpf__destroy(s);
}

const std::vector<ProbeSpec>& probe_table() {
    using K = Requirement::Kind;
#define PROG(p) [](iouscope_bpf* s) { return s->progs.p; }
    static const std::vector<ProbeSpec> table = {
        {.id = ProbeId::iter_rings,
         .name = "iter_rings",
         .variants = {{"iter",
                       {PROG(iou_iter_rings)},
                       {{K::btf_struct, "bpf_iter__task_file"},
                        {K::btf_struct, "io_ring_ctx"},
                        // libbpf resolves the typeless ksym itself; BTF says the function exists.
                        {K::btf_func, "io_uring_poll"}}}},
         .essential = true,
         .deep = false},
        {.id = ProbeId::sched_switch,
         .name = "sched_switch",
         .variants = {{"tp_btf",
                       {PROG(iou_sched_switch)},
                       {{K::btf_typedef, "btf_trace_sched_switch"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"sched_state", KeyOwner::thread}},
         .gateable = true},
        {.id = ProbeId::sched_waking,
         .name = "sched_waking",
         .variants = {{"tp_btf",
                       {PROG(iou_sched_waking)},
                       {{K::btf_typedef, "btf_trace_sched_waking"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"wakers", KeyOwner::waker_pair}},
         .gateable = true},
        {.id = ProbeId::io_uring_create,
         .name = "io_uring_create",
         .variants = {{"tp_btf",
                       {PROG(iou_io_uring_create)},
                       {{K::btf_typedef, "btf_trace_io_uring_create"}}}},
         .essential = false,
         .deep = false,
         .maps = {{"ring_births", KeyOwner::ring}, {"created_rings", KeyOwner::drained}}},
        // Deep tier. io_sq_thread fires once per SQ thread start: thread -> sqd, also for the
        // kthread-era 5.10/5.11 threads.
        {.id = ProbeId::io_sq_thread,
         .name = "io_sq_thread",
         .variants = {{"fentry", {PROG(iou_fentry_sq_thread)}, {{K::btf_func, "io_sq_thread"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_sq_thread)},
                       {{K::kprobes}, {K::ksym, "io_sq_thread"}}}},
         .essential = false,
         .deep = true},
        // Static and sometimes inlined before 6.0: then it has neither BTF nor a symbol.
        {.id = ProbeId::io_submit_sqes,
         .name = "io_submit_sqes",
         .variants = {{"fentry",
                       {PROG(iou_fentry_submit), PROG(iou_fexit_submit)},
                       {{K::btf_func, "io_submit_sqes"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_submit), PROG(iou_kretprobe_submit)},
                       {{K::kprobes}, {K::ksym, "io_submit_sqes"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::submit_time},
         .maps = {{"ring_work", KeyOwner::ring}, {"submit_calls", KeyOwner::in_flight}}},
        // Two prototypes (see bpf/iouscope.bpf.c): the fexit that reads the return value at
        // the right position is chosen by the BTF parameter count.
        {.id = ProbeId::io_do_iopoll,
         .name = "io_do_iopoll",
         .variants = {{"fentry",
                       {PROG(iou_fentry_iopoll), PROG(iou_fexit_iopoll)},
                       {{K::btf_params, "io_do_iopoll", 2}}},
                      {"fentry",
                       {PROG(iou_fentry_iopoll_v510), PROG(iou_fexit_iopoll_v510)},
                       {{K::btf_params, "io_do_iopoll", 3}}},
                      {"kprobe",
                       {PROG(iou_kprobe_iopoll), PROG(iou_kretprobe_iopoll)},
                       {{K::kprobes}, {K::ksym, "io_do_iopoll"}}}},
         .essential = false,
         .deep = true,
         .maps = {{"iopoll_stats", KeyOwner::ring_caller}, {"iopoll_calls", KeyOwner::in_flight}}},
        // nvme_core's end_io callbacks: nvme_uring_cmd_end_io, and for commands with a metadata
        // buffer nvme_uring_cmd_end_io_meta (6.1-6.7), whence the variants with and without it.
        {.id = ProbeId::nvme_uring_cmd_end_io,
         .name = "nvme_uring_cmd_end_io",
         .variants =
             {{"fentry",
               {PROG(iou_fentry_nvme_end_io), PROG(iou_fentry_nvme_end_io_meta)},
               {{K::module, "nvme_core"},
                {K::btf_func, "nvme_uring_cmd_end_io"},
                {K::btf_func, "nvme_uring_cmd_end_io_meta"}}},
              {"fentry",
               {PROG(iou_fentry_nvme_end_io)},
               {{K::module, "nvme_core"}, {K::btf_func, "nvme_uring_cmd_end_io"}}},
              // Before the kprobe: see iou_tp_nvme_complete for the completions kprobes lose. It
              // needs nothing of nvme_core at load, so it also serves a module loaded later
              // (BpfCollector::refresh_modules()).
              {"tp_btf",
               {PROG(iou_tp_nvme_complete)},
               {{K::btf_typedef, "btf_trace_block_rq_complete"}, {K::btf_struct, "io_uring_cmd"}}},
              {"kprobe",
               {PROG(iou_kprobe_nvme_end_io), PROG(iou_kprobe_nvme_end_io_meta)},
               {{K::module, "nvme_core"},
                {K::kprobes},
                {K::ksym, "nvme_uring_cmd_end_io"},
                {K::ksym, "nvme_uring_cmd_end_io_meta"}}},
              {"kprobe",
               {PROG(iou_kprobe_nvme_end_io)},
               {{K::module, "nvme_core"}, {K::kprobes}, {K::ksym, "nvme_uring_cmd_end_io"}}}},
         .essential = false,
         .deep = true,
         .maps = {{"nvme_stats", KeyOwner::bounded}, {"cmd_pending", KeyOwner::bounded}}},
        // The gaps between an SQ thread's submissions (advise's idle curve): per batch where
        // io_submit_sqes can be hooked, else per SQE from the tracepoint (renamed in 6.4),
        // duty-cycled (collect/gap_duty.hpp).
        {.id = ProbeId::work_gaps,
         .name = "work_gaps",
         .variants = {{"fentry", {PROG(iou_fexit_submit_gaps)}, {{K::btf_func, "io_submit_sqes"}}},
                      {"kprobe",
                       {PROG(iou_kretprobe_submit_gaps)},
                       {{K::kprobes}, {K::ksym, "io_submit_sqes"}}},
                      {"tp_btf",
                       {PROG(iou_submit_req)},
                       {{K::btf_typedef, "btf_trace_io_uring_submit_req"}},
                       true},
                      {"tp_btf",
                       {PROG(iou_submit_sqe)},
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
         .variants = {{"fentry",
                       {PROG(iou_fentry_sq_tw), PROG(iou_fexit_sq_tw)},
                       {{K::btf_params, "io_sq_tw", 2}}},
                      {"fentry",
                       {PROG(iou_fentry_sq_tw), PROG(iou_fexit_sq_tw_1arg)},
                       {{K::btf_params, "io_sq_tw", 1}}},
                      {"kprobe",
                       {PROG(iou_kprobe_sq_tw), PROG(iou_kretprobe_sq_tw)},
                       {{K::kprobes}, {K::ksym, "io_sq_tw"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::ring_turns},
         .maps = {{"sq_passes", KeyOwner::thread}},
         // A pass's time switched out is taken off its work at the switch (iou_sched_switch).
         .holds_gate_open = true},
        // Completions reaching the ring: io_uring_cmd_done, exported as __io_uring_cmd_done from
        // 6.18 (io_uring_cmd_done becomes an inline wrapper). Counts only commands whose NVMe
        // end_io was seen, so it needs nvme_uring_cmd_end_io attached to say anything.
        {.id = ProbeId::io_uring_cmd_done,
         .name = "io_uring_cmd_done",
         .variants = {{"fentry", {PROG(iou_fentry_cmd_done)}, {{K::btf_func, "io_uring_cmd_done"}}},
                      {"fentry",
                       {PROG(iou_fentry_cmd_done_618)},
                       {{K::btf_func, "__io_uring_cmd_done"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_cmd_done)},
                       {{K::kprobes}, {K::ksym, "io_uring_cmd_done"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_cmd_done_618)},
                       {{K::kprobes}, {K::ksym, "__io_uring_cmd_done"}}}},
         .essential = false,
         .deep = true,
         .provides = {Feature::cmd_cqes}},
        // Multipath head char devices have their own iopoll on the kernels that poll by bio
        // (6.1); later ones poll every char device through nvme_ns_chr_uring_cmd_iopoll. Both
        // read nvme_core's structs, so they load only when its BTF is there at start.
        {.id = ProbeId::nvme_uring_cmd_iopoll,
         .name = "nvme_uring_cmd_iopoll",
         .variants = {{"fentry",
                       {PROG(iou_fentry_nvme_poll), PROG(iou_fentry_nvme_head_poll)},
                       {{K::module, "nvme_core"},
                        {K::btf_func, "nvme_ns_chr_uring_cmd_iopoll"},
                        {K::btf_func, "nvme_ns_head_chr_uring_cmd_iopoll"}}},
                      {"fentry",
                       {PROG(iou_fentry_nvme_poll)},
                       {{K::module, "nvme_core"}, {K::btf_func, "nvme_ns_chr_uring_cmd_iopoll"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_nvme_poll), PROG(iou_kprobe_nvme_head_poll)},
                       {{K::module, "nvme_core"},
                        {K::kprobes},
                        {K::ksym, "nvme_ns_chr_uring_cmd_iopoll"},
                        {K::ksym, "nvme_ns_head_chr_uring_cmd_iopoll"}}},
                      {"kprobe",
                       {PROG(iou_kprobe_nvme_poll)},
                       {{K::module, "nvme_core"},
                        {K::kprobes},
                        {K::ksym, "nvme_ns_chr_uring_cmd_iopoll"}}}},
         .essential = false,
         .deep = true},
    };
#undef PROG
    return table;
}

const ProbeSpec& probe_spec(ProbeId id) {
    return probe_table().at(static_cast<std::size_t>(id));
}

namespace {

// The verifier's verdict on the last rejected program: the last line of the log libbpf prints
// between its BEGIN/END PROG LOAD LOG markers. Loading happens on one thread; the fallback
// loop reads it right after each failed trial to say why a tier was passed over.
std::string last_verdict;

void remember_verifier_verdict(std::string_view msg) {
    const auto end = msg.find("-- END PROG LOAD LOG --");
    if (end == std::string_view::npos) return;
    auto log = msg.substr(0, end);
    // The verifier closes with statistics ("processed N insns ...", "verification time ...");
    // the verdict is the last line before them.
    for (;;) {
        while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.remove_suffix(1);
        const auto nl = log.rfind('\n');
        auto line = nl == std::string_view::npos ? log : log.substr(nl + 1);
        if (line.empty() || line.find("-- BEGIN PROG LOAD LOG --") != std::string_view::npos)
            return;
        if (line.starts_with("processed ") || line.starts_with("verification time") ||
            line.starts_with("stack depth")) {
            if (nl == std::string_view::npos) return;
            log = log.substr(0, nl);
            continue;
        }
        last_verdict.assign(line);
        return;
    }
}

int libbpf_to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
    // Sized to the message: a verifier log runs to many kilobytes and its last lines say why.
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return 0;
    std::string buf(static_cast<std::size_t>(n) + 1, '\0');
    vsnprintf(buf.data(), buf.size(), fmt, args);
    std::string_view msg(buf.data(), static_cast<std::size_t>(n));
    while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
    remember_verifier_verdict(msg);
    // libbpf warns about every failed load, including the ones the tier fallback expects and
    // reports itself; keep them at debug so the log says what matters once.
    spdlog::debug("libbpf{}: {}", level == LIBBPF_WARN ? " warning" : "", msg);
    return 0;
}

}  // namespace

namespace {

std::optional<std::string> missing_requirement(const KernelFeatures& kf,
                                               const ProbeVariant& variant) {
    for (const auto& r : variant.needs) {
        switch (r.kind) {
            case Requirement::Kind::btf_typedef:
                if (!kf.has_btf_typedef(r.name)) return std::string("no BTF type ") + r.name;
                break;
            case Requirement::Kind::btf_struct:
                if (!kf.has_btf_struct(r.name)) return std::string("no BTF struct ") + r.name;
                break;
            case Requirement::Kind::btf_func:
                if (!kf.has_btf_func(r.name)) return std::string("no BTF for function ") + r.name;
                break;
            case Requirement::Kind::btf_params: {
                auto n = kf.btf_func_params(r.name);
                if (!n) return std::string("no BTF for function ") + r.name;
                if (*n != r.params)
                    return std::string(r.name) + " has " + std::to_string(*n) +
                           " parameters, this "
                           "variant expects " +
                           std::to_string(r.params);
                break;
            }
            case Requirement::Kind::ksym:
                if (!kf.has_ksym(r.name)) return std::string("no kernel symbol ") + r.name;
                break;
            case Requirement::Kind::kprobes:
                if (!kf.has_kprobes()) return std::string("kernel has no kprobes (CONFIG_KPROBES)");
                break;
            case Requirement::Kind::module:
                if (!module_loaded(r.name))
                    return std::string("module ") + r.name +
                           " was not loaded when iouscoped "
                           "started (load it first, e.g. modprobe nvme, then restart iouscoped)";
                break;
        }
    }
    return std::nullopt;
}

std::string load_error_text(int err) {
    if (err == -EPERM || err == -EACCES)
        return "permission denied loading BPF programs: run iouscoped as root, or with "
               "CAP_BPF, CAP_PERFMON and CAP_SYSLOG";
    return std::string("loading BPF programs failed: ") + std::strerror(-err) +
           " (run with --log.level=debug for the verifier log)";
}

using SkelPtr = std::unique_ptr<iouscope_bpf, SkeletonDeleter>;

// A probe index and the variant of it to load.
using Selection = std::map<std::size_t, int>;

// Values the programs take from userspace before load.
struct LoadConstants {
    bool iopoll_counts_in_arg = false;
    std::uint64_t gap_cutoff_ns = 0;  // per-SQE gap programs record only in windows
};

bool provides(const ProbeSpec& p, Feature f) {
    return std::find(p.provides.begin(), p.provides.end(), f) != p.provides.end();
}

bool selects(const Selection& sel, Feature f) {
    return std::any_of(sel.begin(), sel.end(),
                       [&](const auto& s) { return provides(probe_table()[s.first], f); });
}

bool selects(const Selection& sel, ProbeId id) {
    return std::any_of(sel.begin(), sel.end(),
                       [&](const auto& s) { return probe_table()[s.first].id == id; });
}

// Opens a fresh skeleton with only the selected variants' programs autoloaded and loads it.
int try_load(const Selection& sel, const LoadConstants& k, SkelPtr& out) {
    SkelPtr skel(iouscope_bpf__open());
    if (!skel) return -errno;
    skel->rodata->iopoll_counts_in_arg = k.iopoll_counts_in_arg;
    skel->rodata->gap_cutoff_ns = k.gap_cutoff_ns;
    const auto& table = probe_table();
    std::set<bpf_program*> on;
    for (const auto& [probe, variant] : sel)
        for (auto get : table[probe].variants[static_cast<std::size_t>(variant)].programs)
            on.insert(get(skel.get()));
    // Without the pass probe nothing would close a pass's work bracket, and end_io notes
    // commands for io_uring_cmd_done only when something will take them off.
    skel->rodata->track_passes = selects(sel, Feature::ring_turns);
    skel->rodata->track_cmd_done = selects(sel, Feature::cmd_cqes);
    // sched_switch keeps the SQ thread's time switched out of these calls out of their time.
    skel->rodata->track_call_cpu =
        selects(sel, ProbeId::io_submit_sqes) || selects(sel, ProbeId::io_do_iopoll);
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, on.count(prog));
    int err = iouscope_bpf__load(skel.get());
    if (err) return err;
    out = std::move(skel);
    return 0;
}

}  // namespace

std::vector<ProbeState> plan_probes(const KernelFeatures& kf, const LoaderOptions& opts,
                                    std::vector<int>& chosen) {
    const auto& table = probe_table();
    std::vector<ProbeState> states(table.size());
    chosen.assign(table.size(), -1);
    for (std::size_t i = 0; i < table.size(); ++i) {
        auto& st = states[i];
        st.probe = table[i].name;
        st.kind = table[i].variants.front().kind;
        if (table[i].deep && !opts.deep) {
            st.reason = "deep tier off (enable with --probes.deep)";
            continue;
        }
        std::string why;
        for (std::size_t v = 0; v < table[i].variants.size(); ++v) {
            const auto& var = table[i].variants[v];
            std::string kind = var.kind;
            std::optional<std::string> miss;
            if (opts.no_fentry && kind == "fentry")
                miss = "fentry disabled by --no-fentry";
            else
                miss = missing_requirement(kf, var);
            if (!miss) {
                chosen[i] = static_cast<int>(v);
                st.kind = var.kind;
                // A lower tier's detail says what the higher ones lacked.
                st.reason = why;
                break;
            }
            // Signature variants of the same kind say nothing useful when another one fits.
            if (why.find(kind + ": ") == std::string::npos)
                why += (why.empty() ? "" : "; ") + kind + ": " + *miss;
        }
        if (chosen[i] < 0) st.reason = why;
    }
    return states;
}

namespace {

// The variants to try for probe i after the first choice was rejected: the first that loads
// beside the essential probes, or -1. Says in states[i] why each earlier one was passed over.
int loadable_variant(std::size_t i, int from, const Selection& essential, const KernelFeatures& kf,
                     const LoaderOptions& opts, const LoadConstants& consts, ProbeState& st) {
    const auto& spec = probe_table()[i];
    std::string why = st.reason;
    int found = -1;
    for (int v = from; v < static_cast<int>(spec.variants.size()) && found < 0; ++v) {
        const auto& var = spec.variants[static_cast<std::size_t>(v)];
        const std::string kind = var.kind;
        if (opts.no_fentry && kind == "fentry") continue;
        if (auto miss = missing_requirement(kf, var)) {
            if (why.find(kind + ": ") == std::string::npos)
                why += (why.empty() ? "" : "; ") + kind + ": " + *miss;
            continue;
        }
        auto trial = essential;
        trial[i] = v;
        SkelPtr probe;
        last_verdict.clear();
        if (int e = try_load(trial, consts, probe); e != 0) {
            why += (why.empty() ? "" : "; ") + kind + ": load failed: " + std::strerror(-e);
            if (!last_verdict.empty()) why += " (verifier: " + last_verdict + ")";
            continue;
        }
        found = v;
        st.kind = kind;
    }
    st.reason = why;
    return found;
}

// Something optional was rejected (the verifier, or a kernel that refuses fentry): each probe
// is tried beside the essential ones, falling back through its variants. Returns the selection
// that loads, or sets error when not even the essential probes do.
std::optional<Selection> fall_back(const Selection& sel, const Selection& essential,
                                   const KernelFeatures& kf, const LoaderOptions& opts,
                                   const LoadConstants& consts, std::vector<ProbeState>& states,
                                   std::string& error) {
    {
        SkelPtr probe;
        if (int e = try_load(essential, consts, probe); e != 0) {
            error = load_error_text(e);
            return std::nullopt;
        }
    }
    Selection good = essential;
    for (auto [i, v] : sel) {
        if (probe_table()[i].essential) continue;
        const int found = loadable_variant(i, v, essential, kf, opts, consts, states[i]);
        if (found >= 0) good[i] = found;
    }
    return good;
}

}  // namespace

std::unique_ptr<BpfCollector> BpfCollector::make(const KernelFeatures& kf,
                                                 const LoaderOptions& opts, std::string& error) {
    libbpf_set_print(libbpf_to_spdlog);
    const auto& table = probe_table();
    std::unique_ptr<BpfCollector> c(new BpfCollector);
    std::vector<int> chosen;
    c->probes_ = plan_probes(kf, opts, chosen);
    LoadConstants consts;
    consts.iopoll_counts_in_arg = kf.btf_func_params("io_do_iopoll").value_or(0) == 3;
    if (opts.gap_sampling.enabled())
        consts.gap_cutoff_ns = static_cast<std::uint64_t>(kGapCutoff.count());
    c->gap_config_ = opts.gap_sampling;

    Selection sel, essential;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (chosen[i] >= 0) {
            sel[i] = chosen[i];
            if (table[i].essential) essential[i] = chosen[i];
        } else if (table[i].essential) {
            error = "cannot observe io_uring on this kernel: " + c->probes_[i].reason;
            return nullptr;
        }
    }
    if (try_load(sel, consts, c->skel_) != 0) {
        auto good = fall_back(sel, essential, kf, opts, consts, c->probes_, error);
        if (!good) return nullptr;
        if (int err = try_load(*good, consts, c->skel_); err != 0) {
            error = load_error_text(err);
            return nullptr;
        }
        sel = *good;
    }
    c->attached_programs_.resize(table.size());
    c->gated_links_.resize(table.size());
    for (auto [i, v] : sel)
        if (!c->attach(i, v, error)) return nullptr;
    c->refresh_modules();
    c->log_probes();
    return c;
}

bool BpfCollector::attach(std::size_t i, int v, std::string& error) {
    const auto& spec = probe_table()[i];
    const auto& variant = spec.variants[static_cast<std::size_t>(v)];
    const auto& programs = variant.programs;
    auto& st = probes_[i];
    if (variant.per_sqe && gap_config_.enabled()) {
        std::vector<bpf_program*> progs;
        for (auto get : programs) progs.push_back(get(skel_.get()));
        attached_programs_[i] = progs;
        gap_duty_ = std::make_unique<GapDutyCycle>(progs, &skel_->bss->gap_start_ns,
                                                   &skel_->bss->gap_end_ns, gap_config_,
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
        auto probe = AttachedProbe::make(get(skel_.get()), why);
        if (!probe) break;
        if (get(skel_.get()) == skel_->progs.iou_iter_rings) iter_link_ = probe->link();
        links.push_back(std::move(probe));
    }
    if (!why.empty()) {
        st.reason = why;
        if (!spec.essential) return true;
        error = std::string("cannot attach ") + spec.name + ": " + why;
        return false;
    }
    st.attached = true;
    if (programs.front()(skel_.get()) == skel_->progs.iou_tp_nvme_complete) {
        nvme_tp_probe_ = static_cast<int>(i);
        // Opened now, while privileged: see module_symbol_addresses().
        kallsyms_ = UniqueFd(::open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
        // It runs on every block request of the machine and matches nothing until nvme_core's
        // addresses are known: attached only from then (refresh_modules(), at the end of make()).
        // The attach above proved it can be.
        links.clear();
    }
    for (auto& l : links) (spec.gateable ? gated_links_[i] : links_).push_back(std::move(l));
    for (auto get : programs) attached_programs_[i].push_back(get(skel_.get()));
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
    const bool was_resolved = skel_->bss->nvme_end_io_fn != 0;
    if (instance == nvme_core_instance_ && (was_resolved || nvme_reads_ >= kReads)) return;
    if (instance != nvme_core_instance_) nvme_reads_ = 0;
    const bool first = nvme_core_instance_ == 0 && nvme_reads_ == 0 && !was_resolved;
    std::vector<std::uint64_t> fn(2, 0);
    if (instance)
        fn = module_symbol_addresses(kallsyms_.get(), "nvme_core",
                                     {"nvme_uring_cmd_end_io", "nvme_uring_cmd_end_io_meta"});
    skel_->bss->nvme_end_io_meta_fn = fn[1];
    skel_->bss->nvme_end_io_fn = fn[0];
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

bool BpfCollector::walk_rings(std::vector<iou_ring_record>& out, bool& complete,
                              std::string& error) {
    complete = true;
    UniqueFd fd(bpf_iter_create(bpf_link__fd(iter_link_)));
    if (!fd) {
        error = std::string("cannot start the ring iterator: ") + std::strerror(errno);
        return false;
    }
    // The seq_file hands out whole records: a BPF program's bpf_seq_write either fits in the
    // buffer or is retried in the next read(), so records never straddle reads. A partial
    // record would mean a layout mismatch, which is reported rather than misparsed.
    std::vector<char> buf(64 * 1024);
    std::size_t have = 0;
    // EAGAIN means the kernel visited a million objects without output and kept its place: read
    // on. The bound only stops a walk that could never end (a billion files without a ring).
    int again = 0;
    for (;;) {
        if (buf.size() - have < sizeof(iou_ring_record)) buf.resize(buf.size() * 2);
        ssize_t n = ::read(fd.get(), buf.data() + have, buf.size() - have);
        if (n < 0 && (errno == EINTR || (errno == EAGAIN && ++again < 1000))) continue;
        if (n < 0) {
            error = std::string("reading the ring iterator: ") + std::strerror(errno);
            complete = false;
            break;
        }
        if (n == 0) break;
        have += static_cast<std::size_t>(n);
    }
    if (have % sizeof(iou_ring_record) != 0) {
        error =
            "ring iterator returned a partial record: BPF object and daemon disagree on "
            "struct iou_ring_record";
        return false;
    }
    if (!complete && have == 0) return false;
    std::size_t count = have / sizeof(iou_ring_record);
    auto first = out.size();
    out.resize(first + count);
    std::memcpy(out.data() + first, buf.data(), have);
    return true;
}

namespace {

template <typename K, typename V>
void read_hash_by_key(int map_fd, std::vector<std::pair<K, V>>& out) {
    K key{}, next{};
    K* prev = nullptr;
    while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
        V val{};
        if (bpf_map_lookup_elem(map_fd, &next, &val) == 0) out.emplace_back(next, val);
        key = next;
        prev = &key;
    }
}

// Reads a whole hash map with BPF_MAP_LOOKUP_BATCH (or LOOKUP_AND_DELETE_BATCH when drain is
// set): one bpf() call per batch instead of two per entry, which is what keeps a sample cheap
// when thousands of rings churn. Kernels or maps without batch operations get the per-key walk
// (and the caller's own deletes).
template <typename K, typename V>
bool read_hash_batch(int map_fd, std::vector<std::pair<K, V>>& out, bool drain) {
    const auto start = out.size();
    std::uint32_t chunk = 256;
    std::vector<K> keys(chunk);
    std::vector<V> vals(chunk);
    std::uint64_t in_batch = 0, out_batch = 0;  // the kernel's cursor (a bucket index)
    bool first = true;
    for (;;) {
        std::uint32_t count = chunk;
        int rc =
            drain ? bpf_map_lookup_and_delete_batch(map_fd, first ? nullptr : &in_batch, &out_batch,
                                                    keys.data(), vals.data(), &count, nullptr)
                  : bpf_map_lookup_batch(map_fd, first ? nullptr : &in_batch, &out_batch,
                                         keys.data(), vals.data(), &count, nullptr);
        const int err = rc < 0 ? -rc : 0;
        for (std::uint32_t i = 0; i < count && i < chunk; ++i) out.emplace_back(keys[i], vals[i]);
        if (err == ENOENT) return true;  // the end of the map
        if (err == ENOSPC && count == 0) {
            // One hash bucket holds more entries than the batch: a larger batch takes it whole.
            chunk *= 2;
            keys.resize(chunk);
            vals.resize(chunk);
            continue;
        }
        if (err) {
            if (out.size() != start && drain)
                return true;  // drained what it read; the rest next time
            out.resize(start);
            return false;
        }
        in_batch = out_batch;
        first = false;
    }
}

template <typename K, typename V>
void read_hash(int map_fd, std::vector<std::pair<K, V>>& out) {
    if (!read_hash_batch(map_fd, out, false)) read_hash_by_key(map_fd, out);
}

}  // namespace

void BpfCollector::read_sched(std::vector<std::pair<std::uint32_t, iou_sched_state>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.sched_state), out);
}

void BpfCollector::read_wakers(std::vector<std::pair<iou_waker_key, iou_waker_val>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.wakers), out);
}

void BpfCollector::read_births(std::vector<std::pair<std::uint64_t, std::uint64_t>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.ring_births), out);
}

void BpfCollector::drain_created(std::vector<iou_created_ring>& out) {
    std::vector<std::pair<iou_created_key, iou_created_ring>> all;
    int fd = bpf_map__fd(skel_->maps.created_rings);
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
    std::memcpy(&s, const_cast<const iou_stats*>(&skel_->bss->stats), sizeof s);
    return s;
}

void BpfCollector::cleanup(const MapCleanup& c) {
    // Per-key deletes: a batch delete stops at the first key that is already gone, and these
    // lists are what changed since the last sample, not what is alive. Every map whose entries
    // follow a thread or a ring is named by its probe in probe_table(); none is listed here.
    if (c.empty()) return;  // most samples: nothing went, so no map need be looked up
    for (const auto& probe : probe_table())
        for (const auto& m : probe.maps) {
            const int fd = bpf_map__fd(bpf_object__find_map_by_name(skel_->obj, m.map));
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
                case KeyOwner::drained:
                case KeyOwner::in_flight:
                case KeyOwner::bounded:
                    break;
            }
        }
}

}  // namespace iouscope

namespace iouscope {

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

void BpfCollector::read_ring_work(std::vector<std::pair<std::uint64_t, iou_ring_work>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.ring_work), out);
}

void BpfCollector::read_iopoll(
    std::vector<std::pair<iou_iopoll_key, iou_iopoll_stats>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.iopoll_stats), out);
}

void BpfCollector::read_nvme(std::vector<std::pair<iou_dev_key, iou_nvme_stats>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.nvme_stats), out);
}

void BpfCollector::read_gaps(std::vector<std::pair<std::uint32_t, iou_work_gaps>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.work_gaps), out);
}

std::uint64_t BpfCollector::gaps_recorded() const {
    std::vector<std::pair<std::uint32_t, iou_work_gaps>> gaps;
    read_gaps(gaps);
    std::uint64_t n = 0;
    for (const auto& [tid, g] : gaps)
        for (auto c : g.count) n += c;
    return n;
}

std::optional<GapSampling> BpfCollector::gap_sampling(std::uint64_t now_ns) const {
    if (!gap_duty_) return std::nullopt;
    return gap_duty_->state(now_ns);
}

void BpfCollector::read_passes(std::vector<std::pair<std::uint32_t, iou_sq_passes>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.sq_passes), out);
}

}  // namespace iouscope
