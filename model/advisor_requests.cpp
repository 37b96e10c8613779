// The request path's findings (request tier; CQ overflow also in the default tier): each ring's
// window between two snapshots, per opcode where the finding is about one, and what to change.
//   requests_forced_async          IOSQE_ASYNC on requests that ran on io-wq without waiting
//   requests_punted_without_nowait reads or writes punted because the file cannot do them
//                                  without blocking
//   single_sqe_per_enter           a busy ring that pays a system call per SQE
//   cq_overflow                    CQEs that took the overflow list
//   provided_buffers_ran_dry       requests that failed with -ENOBUFS
//   requests_stuck                 requests in flight longer than --requests.stuck-after
//   waiter_woken_per_completion    one thread submits and waits, and is woken for each batch
//                                  of task work before its wait is over: DEFER_TASKRUN
//   task_work_interrupts_thread    completions' task work interrupts the thread where it runs
//                                  its own code, by IPI: COOP_TASKRUN
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include "iouscope/requests.h"
#include "model/advisor_findings.hpp"

namespace iouscope::advisor {

namespace {

// One ring between the two snapshots; `a` is null for a ring born inside the window, whose
// counts all fall in it.
struct RingWindow {
    const RingSnapshot* a;
    const RingSnapshot& b;
    double window;
    const Snapshot& to;
};

const RequestOpSnapshot* find_op(const RingSnapshot* r, std::uint32_t opcode) {
    if (!r) return nullptr;
    for (const auto& op : r->requests.ops)
        if (op.opcode == opcode) return &op;
    return nullptr;
}

// Quantile q of the observations between two cumulative histograms of the same bounds
// (bucket_quantile of their difference), or nullopt without observations.
std::optional<double> window_quantile(const LatencyHistogram* a, const LatencyHistogram& b,
                                      double q) {
    const bool same = a && a->cumulative.size() == b.cumulative.size();
    LatencyHistogram d = b;
    for (std::size_t i = 0; same && i < d.cumulative.size(); ++i)
        d.cumulative[i] -= std::min(d.cumulative[i], a->cumulative[i]);
    d.count -= same ? std::min(d.count, a->count) : 0;
    return bucket_quantile(d, q);
}

Finding ring_finding(const char* id, const RingSnapshot& r, const std::string& op = {}) {
    Finding f = owned_finding(
        id, op.empty() ? fmt::format("ring {}", r.id) : fmt::format("ring {} {}", r.id, op), r.pid,
        r.comm, r.cgroup);
    f.ring = r.id;
    return f;
}

// The CPU the process's io-wq workers spent over the window, in cores; 0 where not walked.
double iowq_cores(const Snapshot* from, const Snapshot& to, std::uint32_t pid, double window) {
    const IowqSnapshot* b = find_process(to, pid);
    if (!b) return 0;
    const IowqSnapshot* a = from ? find_process(*from, pid) : nullptr;
    return delta(a ? a->cpu_seconds : 0.0, b->cpu_seconds) / window;
}

// read, readv, read_fixed, write, ... as the kernel's BTF names them (IORING_OP_ lowercased).
bool is_read_or_write(const std::string& name) {
    return name.rfind("read", 0) == 0 || name.rfind("write", 0) == 0;
}

// Opcodes whose prep sets REQ_F_FORCE_ASYNC itself on some kernels, as IOSQE_ASYNC does: the
// kernel never tries them inline, so their forced punts say nothing of the SQE's flags.
// io_uring/sync.c (fsync, sync_file_range, fallocate), advise.c (madvise; fadvise for most
// advice), fs.c (renameat, unlinkat, mkdirat, symlinkat, linkat), openclose.c (openat with
// O_CREAT, O_TRUNC or O_TMPFILE), statx.c, xattr.c, splice.c (splice, tee), truncate.c.
bool kernel_forces_async(const std::string& name) {
    static const std::set<std::string> kForced = {
        "fsync",    "sync_file_range", "fallocate", "madvise", "fadvise", "renameat", "unlinkat",
        "mkdirat",  "symlinkat",       "linkat",    "openat",  "openat2", "statx",    "fsetxattr",
        "setxattr", "fgetxattr",       "getxattr",  "splice",  "tee",     "ftruncate"};
    return kForced.count(name) > 0;
}

// The ring's io-wq punts over the window, all opcodes.
double ring_punts(const RingSnapshot* a, const RingSnapshot& b) {
    double n = 0;
    for (const auto& op : b.requests.ops) {
        const auto* old = find_op(a, op.opcode);
        n += delta(old ? old->punted : 0, op.punted);
    }
    return n;
}

// `punts_all`: the punts of every ring of the process over the window, among which its
// workers' CPU is shared.
void punt_findings(const RingWindow& w, const Snapshot& from, double punts_all,
                   const AdviseOptions& o, Advice& out) {
    const double worker_cores = iowq_cores(w.a ? &from : nullptr, w.to, w.b.pid, w.window);
    for (const auto& op : w.b.requests.ops) {
        const auto* old = find_op(w.a, op.opcode);
        const double submitted = delta(old ? old->submitted : 0, op.submitted) / w.window;
        const double forced = delta(old ? old->punted_forced : 0, op.punted_forced) / w.window;
        const double other = delta(old ? old->punted_other() : 0, op.punted_other()) / w.window;
        const double hashed = delta(old ? old->punted_hashed : 0, op.punted_hashed) / w.window;
        const std::string name = opcode_name(w.to, op.opcode);
        // The workers' CPU, shared among the process's punts by their number.
        const auto share_of_workers = [&](double punts) {
            return punts_all > 0 ? worker_cores * punts * w.window / punts_all : 0;
        };
        const auto* iowq_old = old ? &old->paths[IOU_PATH_IOWQ].latency : nullptr;
        const auto p50 = window_quantile(iowq_old, op.paths[IOU_PATH_IOWQ].latency, 0.5);
        if (forced >= o.punt_min_rate && p50 && *p50 <= o.forced_max_iowq_p50_seconds &&
            !kernel_forces_async(name)) {
            Finding f = ring_finding("requests_forced_async", w.b, name);
            f.summary = fmt::format(
                "ring {}: {:.0f} {} requests/s sent to io-wq by IOSQE_ASYNC ran there in a "
                "median of at most {}: they waited for nothing a worker is needed for",
                w.b.id, forced, name, fmt_seconds(*p50));
            f.evidence = {{"forced_punts_per_second", forced, "1/s"},
                          {"iowq_latency_p50_upper_bound", *p50, "s"},
                          {"iowq_worker_cpu_cores", worker_cores, "cores"}};
            f.change = fmt::format("drop IOSQE_ASYNC from the ring's {} SQEs", name);
            f.predicted = {{"forced_punts_per_second", 0, "1/s"},
                           {"cpu_cores_saved", share_of_workers(forced), "cores"}};
            f.assumption =
                "issued inline, the requests complete as they did on the workers, without the "
                "hand-over; the workers' CPU is shared among the process's punts by number";
            out.findings.push_back(std::move(f));
        }
        if (is_read_or_write(name) && other >= o.punt_min_rate &&
            other >= o.punt_min_share * submitted) {
            Finding f = ring_finding("requests_punted_without_nowait", w.b, name);
            f.summary = fmt::format(
                "ring {}: {:.0f} of {:.0f} {} requests/s punted to io-wq without IOSQE_ASYNC: "
                "the file cannot do them without blocking{}",
                w.b.id, other, submitted, name,
                hashed > 0
                    ? fmt::format(", and {:.0f}/s ran one at a time (hashed per file)", hashed)
                    : "");
            f.evidence = {{"punts_per_second", other, "1/s"},
                          {"submitted_per_second", submitted, "1/s"},
                          {"hashed_punts_per_second", hashed, "1/s"},
                          {"iowq_worker_cpu_cores", worker_cores, "cores"}};
            f.change =
                "open the file with O_DIRECT (aligned buffers; registered buffers and files "
                "save more), or put it on a filesystem whose buffered I/O has a nowait path";
            // No CPU is claimed: the workers' share moves to the submitter, and O_DIRECT pays
            // the device at submission what page-cache I/O leaves to writeback (the doctor's
            // check measured 2x the process's CPU with it at 5,000 and 20,000 writes/s).
            f.predicted = {{"punts_per_second", 0, "1/s"},
                           {"hashed_punts_per_second", 0, "1/s"},
                           {"iowq_worker_cpu_cores_moved", share_of_workers(other), "cores"}};
            f.assumption =
                "with O_DIRECT the filesystem issues the requests without blocking, so none "
                "needs a worker or waits behind another on the file's hash; the workers' CPU "
                "(shared among the process's punts by number) moves to the submitter and the "
                "device I/O is paid at once, so no CPU saving is claimed";
            out.findings.push_back(std::move(f));
        }
    }
}

// The ring's submissions with an SQ thread instead (the mirror of sq_thread_overpriced): the
// submitter makes no call, and the thread spins through every gap shorter than its shortest
// idle (one tick upstream, 1.5 ticks on average), so at a mean gap under that it never sleeps.
Alternative sqpoll_price(double sqes, const Snapshot& to) {
    const double hz = to.hz ? to.hz : 250;
    const double spin = 1.5 / hz;
    Alternative a;
    a.name = "sqpoll";
    a.change = "IORING_SETUP_SQPOLL with sq_thread_idle=1 (ms)";
    a.cpu_cores = std::min(1.0, sqes * spin);
    a.note = fmt::format(
        "an SQ thread spins about {} after each SQE before it sleeps; at a mean gap of {} "
        "between SQEs it {}",
        fmt_seconds(spin), fmt_seconds(1 / sqes),
        1 / sqes < spin ? "never sleeps: a whole core" : "sleeps between them");
    return a;
}

std::vector<Alternative> batching_alternatives(double enters, double sqes, double batch,
                                               const Snapshot& to, const AdviseOptions& o) {
    Alternative now, batched;
    now.name = "now";
    now.cpu_cores = enters * o.submit_syscall_seconds;
    now.note = "the io_uring_enter calls alone";
    batched.name = "batch_submissions";
    batched.change = fmt::format("{:.0f} SQEs per io_uring_submit", batch);
    batched.cpu_cores = sqes / batch * o.submit_syscall_seconds;
    batched.added_latency_seconds = o.batch_max_delay_seconds / 2;
    batched.recommended = true;
    // An SQ thread makes no call either, but it costs a core once the gaps between SQEs are
    // shorter than its spin, and batches of 32 cost 1/32 of the calls: it would beat them only
    // at tens of millions of SQEs a second. Priced, so the finding says what it would cost.
    return {now, batched, sqpoll_price(sqes, to)};
}

void batching_finding(const RingWindow& w, const AdviseOptions& o, Advice& out) {
    const RingRequests& b = w.b.requests;
    if (!b.has_enters || w.b.sq_thread > 0) return;
    const RingRequests* a = w.a ? &w.a->requests : nullptr;
    const double enters = delta(a ? a->enters : 0, b.enters) / w.window;
    const double sqes = delta(a ? a->enter_sqes : 0, b.enter_sqes) / w.window;
    if (enters <= 0 || sqes <= 0 || sqes / enters >= o.batch_max_sqes_per_enter) return;
    // A batch gathers at most batch_max_delay of submissions, and at most 32.
    const double batch = std::clamp(std::floor(sqes * o.batch_max_delay_seconds), 1.0, 32.0);
    const double saved = std::max(0.0, enters - sqes / batch);
    const double cores = saved * o.submit_syscall_seconds;
    if (batch < 2 || cores < o.min_cpu_saving_cores) return;
    Finding f = ring_finding("single_sqe_per_enter", w.b);
    f.alternatives = batching_alternatives(enters, sqes, batch, w.to, o);
    f.summary = fmt::format(
        "ring {}: {:.0f} io_uring_enter calls/s for {:.0f} SQEs/s ({:.2f} each): batches of "
        "{:.0f} would save {:.0f} calls/s, {:.2f} of a core; an SQ thread would cost {:.2f} of "
        "a core instead",
        w.b.id, enters, sqes, sqes / enters, batch, saved, cores, f.alternatives.back().cpu_cores);
    f.evidence = {{"enters_per_second", enters, "1/s"},
                  {"sqes_per_second", sqes, "sqes/s"},
                  {"sqes_per_enter", sqes / enters, "sqes"}};
    f.change = fmt::format(
        "queue SQEs and submit them {:.0f} at a time (one io_uring_submit per batch)", batch);
    f.predicted = {{"enters_per_second", enters - saved, "1/s"},
                   {"cpu_cores_saved", cores, "cores"},
                   {"added_latency_seconds", o.batch_max_delay_seconds / 2, "s"}};
    f.assumption = fmt::format(
        "each call costs what one io_uring_enter of one SQE costs ({}); a batch gathers at most "
        "{} of submissions, which waits half that on average",
        o.submit_cost_source, fmt_seconds(o.batch_max_delay_seconds));
    out.findings.push_back(std::move(f));
}

void overflow_finding(const RingWindow& w, Advice& out) {
    const RingRequests& b = w.b.requests;
    if (!b.has_overflow) return;
    const RingRequests* a = w.a ? &w.a->requests : nullptr;
    const double cqes = delta(a ? a->overflow_cqes : 0, b.overflow_cqes);
    const double dropped = delta(a ? a->overflow_dropped : 0, b.overflow_dropped);
    if (cqes <= 0) return;
    // A CQ that holds what overflowed besides what it holds: the kernel's limit is 64 Ki
    // entries (2 x IORING_MAX_ENTRIES).
    const auto want =
        std::min<std::uint64_t>(std::bit_ceil(static_cast<std::uint64_t>(w.b.cq_entries) +
                                              static_cast<std::uint64_t>(cqes)),
                                65536);
    Finding f = ring_finding("cq_overflow", w.b);
    f.summary = fmt::format(
        "ring {}: {:.0f} CQEs took the overflow list in {} ({:.0f} lost): the CQ of {} entries "
        "was full when they came",
        w.b.id, cqes, fmt_seconds(w.window), dropped, w.b.cq_entries);
    f.evidence = {{"overflow_cqes", cqes, "cqes"},
                  {"overflow_cqes_lost", dropped, "cqes"},
                  {"cq_entries", static_cast<double>(w.b.cq_entries), "entries"}};
    f.change = want > w.b.cq_entries
                   ? fmt::format(
                         "a CQ of {} entries (IORING_SETUP_CQSIZE, cq_entries = {}), or "
                         "reap CQEs before submitting more",
                         want, want)
                   : "reap CQEs before submitting more: the CQ is at the kernel's largest size";
    f.predicted = {{"overflow_cqes", 0, "cqes"}};
    f.assumption =
        "the CQEs that overflowed came at once; a steady overflow needs the reaping to keep up "
        "whatever the CQ's size";
    out.findings.push_back(std::move(f));
}

void enobufs_finding(const RingWindow& w, const AdviseOptions& o, Advice& out) {
    for (const auto& op : w.b.requests.ops) {
        const auto* old = find_op(w.a, op.opcode);
        double n = 0;
        for (std::size_t p = 0; p < op.paths.size(); ++p)
            n += delta(old ? old->paths[p].results[IOU_RES_ENOBUFS] : 0,
                       op.paths[p].results[IOU_RES_ENOBUFS]);
        if (n / w.window < o.enobufs_min_rate) continue;
        const std::string name = opcode_name(w.to, op.opcode);
        Finding f = ring_finding("provided_buffers_ran_dry", w.b, name);
        f.summary = fmt::format(
            "ring {}: {:.0f} {} requests failed with -ENOBUFS in {}: their provided-buffer "
            "group ran out of buffers",
            w.b.id, n, name, fmt_seconds(w.window));
        f.evidence = {{"enobufs_per_second", n / w.window, "1/s"}};
        f.change =
            "give the buffer group more buffers (a larger buffer ring), or return buffers to it "
            "as soon as each CQE is handled";
        f.predicted = {{"enobufs_per_second", 0, "1/s"}};
        f.assumption = "the requests retried after -ENOBUFS find a buffer the first time";
        out.findings.push_back(std::move(f));
    }
}

// IORING_SETUP_SINGLE_ISSUER and IORING_SETUP_DEFER_TASKRUN (6.1+): the ring's task work then
// waits in the ring for its one submitter, which is woken only once a wait has as many
// completions queued as it asked for. Said only on the evidence: one thread entered the ring
// all window, and its waits were woken several times each to post completions by task work.
void defer_taskrun_finding(const RingWindow& w, const AdviseOptions& o, Advice& out) {
    const RingRequests& b = w.b.requests;
    if (!b.has_enters || !b.has_wait_task_work || w.b.sq_thread > 0 ||
        (w.b.setup_flags & (IOU_SETUP_SQPOLL | IOU_SETUP_DEFER_TASKRUN)))
        return;
    const RingRequests* a = w.a ? &w.a->requests : nullptr;
    const double waits = delta(a ? a->enter_waits : 0, b.enter_waits) / w.window;
    const double wakes = delta(a ? a->wait_task_work : 0, b.wait_task_work) / w.window;
    const double switches = delta(a ? a->issuer_switches : 0, b.issuer_switches);
    if (switches > 0 || waits <= 0 || wakes < o.taskrun_min_wakes_per_wait * waits ||
        wakes - waits < o.taskrun_min_saved_wakes)
        return;
    Finding f = ring_finding("waiter_woken_per_completion", w.b);
    f.summary = fmt::format(
        "ring {}: one thread submits and waits, {:.0f} waits/s, and is woken {:.1f} times per "
        "wait to post completions by task work ({:.0f} wake-ups/s); IORING_SETUP_DEFER_TASKRUN "
        "would wake it once per wait",
        w.b.id, waits, wakes / waits, wakes);
    f.evidence = {{"waits_per_second", waits, "1/s"},
                  {"task_work_wakeups_per_second", wakes, "1/s"},
                  {"wakeups_per_wait", wakes / waits, "wakeups"},
                  {"issuer_switches", switches, "calls"}};
    f.change = "IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN at io_uring_setup (6.1+)";
    f.predicted = {{"task_work_wakeups_per_second", waits, "1/s"},
                   {"wakeups_saved_per_second", wakes - waits, "1/s"}};
    f.assumption =
        "the thread that submits is the only one that will ever enter the ring, and it waits "
        "(IORING_ENTER_GETEVENTS) for its completions rather than peeking at the CQ: deferred "
        "task work runs only in its waits. No CPU is priced: a wake-up's cost is not measured";
    out.findings.push_back(std::move(f));
}

// IORING_SETUP_COOP_TASKRUN (5.19+): the ring's task work no longer interrupts a running thread
// with an IPI but waits for its next kernel entry. Said on the evidence of the IPIs themselves,
// each tied to the ring whose poll wake-up just before it queued the task work.
void coop_taskrun_finding(const RingWindow& w, const AdviseOptions& o, Advice& out) {
    const RingRequests& b = w.b.requests;
    if (!b.has_task_work_ipis || w.b.sq_thread > 0 ||
        (w.b.setup_flags & (IOU_SETUP_SQPOLL | IOU_SETUP_COOP_TASKRUN | IOU_SETUP_DEFER_TASKRUN)))
        return;
    const RingRequests* a = w.a ? &w.a->requests : nullptr;
    const double ipis = delta(a ? a->task_work_ipis : 0, b.task_work_ipis) / w.window;
    if (ipis < o.coop_min_ipis) return;
    Finding f = ring_finding("task_work_interrupts_thread", w.b);
    f.summary = fmt::format(
        "ring {}: the kernel sent its thread {:.0f} IPIs a second to run the task work of "
        "completions while it ran its own code; IORING_SETUP_COOP_TASKRUN would leave the work "
        "for its next system call",
        w.b.id, ipis);
    f.evidence = {{"task_work_ipis_per_second", ipis, "1/s"}};
    f.change =
        "IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG at io_uring_setup (5.19+); with "
        "the flag, enter the kernel (io_uring_get_events) when the SQ ring's flags have "
        "IORING_SQ_TASKRUN, as liburing's io_uring_peek_cqe does";
    f.predicted = {{"task_work_ipis_per_second", 0, "1/s"}, {"ipis_saved_per_second", ipis, "1/s"}};
    f.assumption =
        "the thread enters the kernel often enough for its completions to wait for it: the "
        "work then runs at its next system call, or at a tick that finds it pending. The IPIs "
        "counted are those task_work_add sent right after a poll wake-up of the ring on the "
        "same CPU: poll completions only. No CPU is priced: an IPI's cost is not measured";
    out.findings.push_back(std::move(f));
}

// Kernels that trace only the CQEs that fit the CQ (6.18) post overflowed ones unseen: their
// requests stay in flight to the probes until the io_kiocb is reused, and look stuck. A ring
// with no more stuck requests than CQEs overflowed is not judged.
void stuck_finding(const RingSnapshot& r, const Snapshot& to, Advice& out) {
    if (r.requests.stuck == 0) return;
    if (r.requests.has_overflow && r.requests.stuck <= r.requests.overflow_cqes) {
        out.notes.push_back(fmt::format(
            "ring {}: {} requests look stuck, no more than its CQEs that overflowed, which this "
            "kernel may post unseen: not judged",
            r.id, r.requests.stuck));
        return;
    }
    const std::string name = opcode_name(to, r.requests.oldest_opcode);
    Finding f = ring_finding("requests_stuck", r);
    f.summary = fmt::format(
        "ring {}: {} requests in flight for longer than the stuck threshold; the oldest, {} on "
        "fd {}, for {}",
        r.id, r.requests.stuck, name, r.requests.oldest_fd,
        fmt_seconds(r.requests.oldest_age_seconds));
    f.evidence = {{"requests_stuck", static_cast<double>(r.requests.stuck), "requests"},
                  {"oldest_age_seconds", r.requests.oldest_age_seconds, "s"},
                  {"oldest_fd", static_cast<double>(r.requests.oldest_fd), "fd"}};
    f.change = fmt::format(
        "find what fd {} waits for; bound the wait with a linked IORING_OP_LINK_TIMEOUT, or "
        "cancel it (IORING_OP_ASYNC_CANCEL) when it is no longer wanted",
        r.requests.oldest_fd);
    f.predicted = {{"requests_stuck", 0, "requests"}};
    f.assumption = "a request that waits this long is waiting for something that will not come";
    out.findings.push_back(std::move(f));
}

}  // namespace

void request_findings(const FromIndex& index, const Snapshot& from, const Snapshot& to,
                      const AdviseOptions& o, double window, Advice& out) {
    std::size_t unseen = 0;
    std::vector<RingWindow> judged;
    std::map<std::uint32_t, double> punts;  // by process, over the window
    for (const auto& r : to.rings) {
        const RingRequests& q = r.requests;
        stuck_finding(r, to, out);
        const bool counted = (q.has_requests && !q.ops.empty()) || q.has_enters ||
                             (q.has_overflow && q.overflow_cqes > 0);
        if (!counted) continue;
        const RingSnapshot* a = index.ring(r);
        // A ring the window's start did not keep (idle then) and older than it: its counts
        // before the window are not known.
        if (!a && r.start_time_seconds < from.timestamp) {
            if (r.sqe_rate > 0) ++unseen;
            continue;
        }
        judged.push_back({a, r, window, to});
        if (q.has_requests) punts[r.pid] += ring_punts(a, r);
    }
    for (const auto& w : judged) {
        overflow_finding(w, out);
        if (!w.b.requests.has_requests) continue;
        punt_findings(w, from, punts[w.b.pid], o, out);
        batching_finding(w, o, out);
        enobufs_finding(w, o, out);
        defer_taskrun_finding(w, o, out);
        coop_taskrun_finding(w, o, out);
    }
    if (unseen)
        out.notes.push_back(fmt::format(
            "{} busy rings were idle at the window's start: their requests are judged once "
            "they have been busy for a whole window",
            unseen));
}

}  // namespace iouscope::advisor
