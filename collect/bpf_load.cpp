// Loading: which variant of each probe this kernel can run (plan_probes), and the load of the
// per-tier objects with a fallback, per probe and variant, when the verifier rejects something.
#include "collect/bpf_load.hpp"

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "iouscope.skel.h"
#include "iouscope/records.h"
#include "iouscope_deep.skel.h"
#include "iouscope_gaps.skel.h"
#include "iouscope_nvme.skel.h"
#include "iouscope_req.skel.h"

namespace iouscope {

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

// Why a classic tracepoint's event cannot be attached, as libbpf looks for its id (tracefs,
// then debugfs's tracing), or nullopt when it can: the kernel lacks the event, or tracefs is
// not mounted, which is the host's to fix, not the kernel's.
std::optional<std::string> trace_event_missing(const std::string& name) {
    bool mounted = false;
    for (std::string root : {"/sys/kernel/tracing/events/", "/sys/kernel/debug/tracing/events/"}) {
        if (access((root + name + "/id").c_str(), R_OK) == 0) return std::nullopt;
        mounted = mounted || access(root.c_str(), R_OK) == 0;
    }
    if (!mounted)
        return "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing): cannot "
               "attach " +
               name;
    return "no trace event " + name + " (for syscalls: a kernel without CONFIG_FTRACE_SYSCALLS)";
}

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
            case Requirement::Kind::tp_params: {
                auto n = kf.btf_tracepoint_params(r.name);
                if (!n) return std::string("no BTF type btf_trace_") + r.name;
                if (*n != r.params)
                    return std::string("tracepoint ") + r.name + " has " + std::to_string(*n) +
                           " parameters, this variant expects " + std::to_string(r.params);
                break;
            }
            case Requirement::Kind::trace_event:
                if (auto why = trace_event_missing(r.name)) return why;
                break;
            case Requirement::Kind::ksym:
                if (!kf.has_ksym(r.name)) return std::string("no kernel symbol ") + r.name;
                break;
            case Requirement::Kind::kernel_function:
                if (kernel_function_range(r.name).first == 0)
                    return std::string("no address in /proc/kallsyms for kernel function ") +
                           r.name;
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

// Values the programs take from userspace before load.
struct LoadConstants {
    bool iopoll_counts_in_arg = false;
    bool ring_cast = false;  // the walk reads rings through bpf_rdonly_cast (core_fixes.bpf.h)
    std::uint64_t gap_cutoff_ns = 0;  // per-SQE gap programs record only in windows
    // REQ_F_CQE_SKIP and REQ_F_FORCE_ASYNC, from the kernel's BTF enumerators; 0 if absent.
    std::uint64_t cqe_skip_mask = 0, force_async_mask = 0;
    std::uint32_t worker_bound_mask = 0;  // IO_WORKER_F_BOUND as a mask, 0 if absent
    std::uint64_t task_work_add_start = 0, task_work_add_end = 0;   // its code, from kallsyms
    std::vector<std::pair<std::string, std::uint32_t>> capacities;  // map -> max_entries
};

bool selects(const Selection& sel, Feature f) {
    return std::any_of(sel.begin(), sel.end(),
                       [&](const auto& s) { return provides(probe_table()[s.first], f); });
}

bool selects(const Selection& sel, ProbeId id) {
    return std::any_of(sel.begin(), sel.end(),
                       [&](const auto& s) { return probe_table()[s.first].id == id; });
}

// The load-time switches, in every open object that has them.
void set_constants(const Selection& sel, const LoadConstants& k, BpfObjects& objs) {
    // sched_switch keeps the SQ thread's time switched out of these calls out of their time.
    objs.core->rodata->track_call_cpu =
        selects(sel, ProbeId::io_submit_sqes) || selects(sel, ProbeId::io_do_iopoll);
    objs.core->rodata->gap_cutoff_ns = k.gap_cutoff_ns;
    objs.core->rodata->ring_work_kept = objs.deep != nullptr;
    objs.core->rodata->ring_cast = k.ring_cast;
    if (objs.gaps) objs.gaps->rodata->gap_cutoff_ns = k.gap_cutoff_ns;
    // Without the pass probe nothing would close a pass's work bracket, and end_io notes
    // commands for io_uring_cmd_done only when something will take them off.
    if (objs.deep) {
        objs.deep->rodata->iopoll_counts_in_arg = k.iopoll_counts_in_arg;
        objs.deep->rodata->track_passes = selects(sel, Feature::ring_turns);
    }
    if (objs.nvme) objs.nvme->rodata->track_cmd_done = selects(sel, Feature::cmd_cqes);
    if (objs.req) {
        objs.req->rodata->time_requests = selects(sel, Feature::request_latency);
        objs.req->rodata->cqe_skip_mask = k.cqe_skip_mask;
        objs.req->rodata->force_async_mask = k.force_async_mask;
        objs.req->rodata->worker_bound_mask = k.worker_bound_mask;
        objs.req->rodata->task_work_add_start = k.task_work_add_start;
        objs.req->rodata->task_work_add_end = k.task_work_add_end;
    }
}

// Every open object that declares a sized map gets the same capacity, so a follower's map still
// matches the owner's it reuses (BpfObjects::load).
int size_maps(const LoadConstants& k, BpfObjects& objs) {
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_object* obj = objs.object(static_cast<BpfObject>(o));
        if (!obj) continue;
        for (const auto& [name, n] : k.capacities)
            if (bpf_map* m = bpf_object__find_map_by_name(obj, name.c_str()))
                if (int err = bpf_map__set_max_entries(m, n); err) return err;
    }
    // The light walks' order: one entry per ring's holder, as many as the per-ring maps hold.
    for (const auto& [name, n] : k.capacities)
        if (name == "ring_births") return bpf_map__set_max_entries(objs.core->maps.walk_order, n);
    return 0;
}

// A follower object's maps that only unselected probes of it own are not created: the default
// tier's CQ overflow probe loads the request object, whose per-request maps would otherwise lock
// 12 MB of kernel memory for nothing. A map the default tier's object also defines is shared,
// and always created there.
void skip_unused_maps(const Selection& sel, BpfObjects& objs) {
    const auto& table = probe_table();
    std::map<std::string, bool> wanted;  // map -> some probe of its object that owns it is on
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (table[i].object == BpfObject::core) continue;
        for (const auto& m : table[i].maps) wanted[m.map] |= sel.count(i) > 0;
    }
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_object* obj = objs.object(static_cast<BpfObject>(o));
        if (!obj || static_cast<BpfObject>(o) == BpfObject::core) continue;
        bpf_map* map = nullptr;
        bpf_object__for_each_map(map, obj) {
            const char* name = bpf_map__name(map);
            const auto w = wanted.find(name);
            if (w != wanted.end() && !w->second &&
                !bpf_object__find_map_by_name(objs.object(BpfObject::core), name))
                bpf_map__set_autocreate(map, false);
        }
    }
}

// Opens the objects of the selected probes (the default tier's always) with only the selected
// variants' programs autoloaded, and loads them: the default tier's first, the others handed
// its shared maps. A tier with nothing selected opens no object.
int try_load(const Selection& sel, const LoadConstants& k, BpfObjects& out) {
    const auto& table = probe_table();
    BpfObjects objs;
    // Without the cast, the build that does not name the kfunc: a weak kfunc missing from
    // vmlinux still costs CAP_SYS_ADMIN before 6.2 (bpf/core_fixes.bpf.h, get_ring_ctx).
    objs.core_without_cast = !k.ring_cast;
    std::array<bool, kBpfObjects> used{};
    used[static_cast<std::size_t>(BpfObject::core)] = true;
    for (const auto& [probe, variant] : sel)
        used[static_cast<std::size_t>(table[probe].object)] = true;
    for (std::size_t o = 0; o < kBpfObjects; ++o)
        if (used[o] && !objs.open(static_cast<BpfObject>(o))) return -errno;
    std::set<bpf_program*> on;
    for (const auto& [probe, variant] : sel)
        for (auto get : table[probe].variants[static_cast<std::size_t>(variant)].programs)
            on.insert(get(objs));
    set_constants(sel, k, objs);
    if (int err = size_maps(k, objs); err) return err;
    skip_unused_maps(sel, objs);
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_program* prog = nullptr;
        if (bpf_object* obj = objs.object(static_cast<BpfObject>(o)))
            bpf_object__for_each_program(prog, obj) bpf_program__set_autoload(prog, on.count(prog));
    }
    if (int err = objs.load(); err) return err;
    out = std::move(objs);
    return 0;
}

}  // namespace

std::vector<std::pair<std::string, std::uint32_t>> map_capacities(const LoaderOptions& opts) {
    const std::uint32_t rings = opts.max_rings ? opts.max_rings : IOU_MAX_RINGS;
    const std::uint32_t threads = opts.max_sq_threads ? opts.max_sq_threads : IOU_MAX_SQ_THREADS;
    return {{"ring_births", rings},  {"created_rings", rings}, {"ring_work", rings},
            {"iopoll_stats", rings}, {"sched_state", threads}, {"work_gaps", threads},
            {"sq_passes", threads},  {"wakers", 2 * threads}};
}

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
        if (table[i].requests && !opts.requests) {
            st.reason = "request tier off (enable with --probes.requests)";
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
        BpfObjects probe;
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
        BpfObjects probe;
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

void install_libbpf_log() {
    libbpf_set_print(libbpf_to_spdlog);
}

std::optional<Selection> load_probes(const KernelFeatures& kf, const LoaderOptions& opts,
                                     const std::vector<int>& chosen,
                                     std::vector<ProbeState>& states, BpfObjects& objs,
                                     std::string& error) {
    const auto& table = probe_table();
    LoadConstants consts;
    consts.capacities = map_capacities(opts);
    consts.iopoll_counts_in_arg = kf.btf_func_params("io_do_iopoll").value_or(0) == 3;
    consts.ring_cast = kf.casts_rings();
    const auto mask = [&](const char* bit) {
        const auto b = kf.btf_enumerator(bit);
        return b && *b >= 0 && *b < 64 ? std::uint64_t{1} << *b : 0;
    };
    consts.cqe_skip_mask = mask("REQ_F_CQE_SKIP_BIT");
    consts.force_async_mask = mask("REQ_F_FORCE_ASYNC_BIT");
    // IO_WORKER_F_BOUND is a mask where IO_WORKER_F_UP is 1 (6.1 and before), a bit number
    // where it is 0 (6.12); gone where a worker points at its account (core_fixes.bpf.h).
    const auto up = kf.btf_enumerator("IO_WORKER_F_UP");
    const auto bound = kf.btf_enumerator("IO_WORKER_F_BOUND");
    if (up && bound && *bound >= 0 && *bound < 32)
        consts.worker_bound_mask = *up == 0 ? 1u << *bound : static_cast<std::uint32_t>(*bound);
    if (opts.gap_sampling.enabled())
        consts.gap_cutoff_ns = static_cast<std::uint64_t>(kGapCutoff.count());
    if (chosen[static_cast<std::size_t>(ProbeId::task_work_ipis)] >= 0) {
        std::tie(consts.task_work_add_start, consts.task_work_add_end) =
            kernel_function_range("task_work_add");
    }
    Selection sel, essential;
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (chosen[i] >= 0) {
            sel[i] = chosen[i];
            if (table[i].essential) essential[i] = chosen[i];
        } else if (table[i].essential) {
            error = "cannot observe io_uring on this kernel: " + states[i].reason;
            return std::nullopt;
        }
    }
    const auto loaded = [&](Selection s) {
        spdlog::info("the ring walk reads rings with {}", consts.ring_cast
                                                              ? "plain loads (bpf_rdonly_cast)"
                                                              : "probe reads (no bpf_rdonly_cast)");
        return s;
    };
    if (try_load(sel, consts, objs) == 0) return loaded(sel);
    if (consts.ring_cast) {
        // A kernel whose BTF names the kfunc but that refuses it to iterators: probe reads.
        consts.ring_cast = false;
        if (try_load(sel, consts, objs) == 0) {
            spdlog::warn(
                "the kernel refused bpf_rdonly_cast to the ring walk; it reads rings "
                "with probe reads instead");
            return loaded(sel);
        }
    }
    auto good = fall_back(sel, essential, kf, opts, consts, states, error);
    if (!good) return std::nullopt;
    if (int err = try_load(*good, consts, objs); err != 0) {
        error = load_error_text(err);
        return std::nullopt;
    }
    return loaded(*good);
}

}  // namespace iouscope
