#include "cli/advise.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "common/cli_parse.hpp"
#include "common/duration.hpp"

namespace iouscope::advise {

namespace {

const char* const kDescription =
    R"(iouscope advise - what to change when SQ threads burn CPU or requests stall

Judges the same measurements as iouscope top over a window and reports findings. Each names
the thread, ring or device it concerns, the evidence as measured figures, the change to make
(a setup flag, a parameter, ring sharing or a module parameter) and its predicted effect with
the assumption behind the prediction.

FINDINGS
  sq_idle_too_long            sq_thread_idle spins through the gaps in the work; shows the
                              predicted CPU and wake rate for each candidate value (needs the
                              deep tier's work_gaps probe: iouscoped --probes.deep, or
                              --local, which loads it)
  sq_spinning_without_work    an SQ thread burns CPU for (almost) no SQEs
  sq_thread_overpriced        an SQ thread costs 10x or more what the same SQEs would cost
                              without SQPOLL, with another sq_thread_idle, batched, or on a
                              kernel with nanosecond idle; prices each, and says when no
                              setting helps
  shared_thread_backlog       a ring waits for its turn on a saturated shared SQ thread
  sq_threads_should_share     several SQ threads of one process, each mostly spinning
  iopoll_without_poll_queues  polled NVMe requests completed by interrupts (no poll queues)

  The request path's, where the daemon runs the request tier (iouscoped --probes.requests;
  cq_overflow also without it, on 5.19+), per ring and opcode:
  requests_forced_async       IOSQE_ASYNC requests that ran on io-wq without waiting for
                              anything: drop the flag (predicts the workers' CPU saved)
  requests_punted_without_nowait
                              reads or writes punted to io-wq because the file cannot do them
                              without blocking (buffered I/O): O_DIRECT
  single_sqe_per_enter        a busy ring that makes one io_uring_enter per SQE: the batch
                              size, the calls and CPU it saves
  cq_overflow                 CQEs that took the overflow list: the CQ size that holds them
  provided_buffers_ran_dry    requests failed with -ENOBUFS: a larger buffer group
  requests_stuck              requests in flight past --requests.stuck-after: the oldest's
                              opcode, fd and age, and how to bound the wait
  iowq_workers_idle           a process's io-wq workers far above its requests on io-wq at
                              both ends of the window: the IORING_REGISTER_IOWQ_MAX_WORKERS cap

By default the findings come from the running iouscoped, over its --advise.window (60 s
unless changed). With --local, or when no daemon answers and you are root, advise loads the BPF
collector itself and watches for --duration.)";

const char* const kFooter = R"(EXAMPLES
  iouscope advise                       findings of the running daemon
  iouscope advise --thread 4242         only about SQ thread 4242
  iouscope advise --local --duration 30s --json

EXIT STATUS
  0 advice printed (with or without findings)   1 no source: no daemon and not root, or a
  fetch failed   2 bad command line   3 not enough data yet (the window is too short)
  4 no such --pid or --thread)";

}  // namespace

OptionsResult parse_options(int argc, const char* const* argv) {
    Options o;
    std::string duration = "15s";
    std::uint32_t pid = 0;
    std::int32_t thread = 0;
    CLI::App app{kDescription, "iouscope advise"};
    app.footer(kFooter);
    app.get_formatter()->column_width(30);
    app.add_option("--daemon", o.daemon_url, "Base URL of iouscoped.")->default_str(o.daemon_url);
    app.add_flag("--local", o.local, "Do not ask a daemon; sample in this process (root).");
    app.add_option("--duration", duration,
                   "How long --local watches before judging, e.g. 15s, 1m (5s to 1h).")
        ->default_str("15s");
    auto* pid_opt = app.add_option("--pid", pid, "Only findings about this process.");
    auto* tid_opt = app.add_option("--thread", thread, "Only findings about this SQ thread (tid).");
    app.add_option("--wake-weight", o.wake_weight,
                   "CPU-seconds one second of wake delay is worth when choosing sq_thread_idle "
                   "(--local only; the daemon uses 100).")
        ->check(CLI::Range(0.0, 1e6))
        ->default_str("100");
    app.add_flag("--json", o.json, "Print the advice as one JSON object (docs/API.md).");

    OptionsResult r;
    if (!cli::parse_or_answer(app, argc, argv, "iouscope advise", r)) return r;
    auto fail = [&](std::string msg) {
        r.exit_code = 2;
        r.output = "iouscope advise: " + msg;
        return r;
    };
    auto d = parse_duration(duration);
    if (!d) return fail("--duration: \"" + duration + "\" is not a duration (e.g. 15s, 1m)");
    o.duration_seconds = std::chrono::duration<double>(*d).count();
    if (o.duration_seconds < 5 || o.duration_seconds > 3600)
        return fail("--duration must be between 5s and 1h, got " + duration);
    if (*pid_opt) {
        if (pid == 0) return fail("--pid must be a process id above 0");
        o.pid = pid;
    }
    if (*tid_opt) {
        if (thread <= 0) return fail("--thread must be a thread id above 0");
        o.thread = thread;
    }
    if (o.daemon_url.rfind("http://", 0) != 0 && o.daemon_url.rfind("https://", 0) != 0)
        return fail("--daemon must be an http:// or https:// URL, got \"" + o.daemon_url + "\"");
    r.options = o;
    return r;
}

std::optional<std::string> filter_findings(const Snapshot& snap, const Options& o, Advice& advice) {
    if (o.pid) {
        const bool known = std::any_of(snap.threads.begin(), snap.threads.end(),
                                       [&](const auto& t) { return t.pid == *o.pid; }) ||
                           std::any_of(snap.rings.begin(), snap.rings.end(),
                                       [&](const auto& r) { return r.pid == *o.pid; });
        if (!known)
            return fmt::format("no io_uring ring or SQ thread belongs to pid {} (rings seen: {})",
                               *o.pid, snap.rings.size());
    }
    if (o.thread) {
        const bool known = std::any_of(snap.threads.begin(), snap.threads.end(),
                                       [&](const auto& t) { return t.tid == *o.thread; });
        if (!known) {
            // The first few: at 1,000 SQ threads the whole list would bury the message.
            constexpr std::size_t kListed = 20;
            std::string tids;
            for (std::size_t i = 0; i < snap.threads.size() && i < kListed; ++i)
                tids += (tids.empty() ? "" : " ") + std::to_string(snap.threads[i].tid);
            if (snap.threads.size() > kListed)
                tids += fmt::format(" and {} more", snap.threads.size() - kListed);
            return fmt::format("no SQ thread with tid {} (SQ threads now: {})", *o.thread,
                               tids.empty() ? "none" : tids);
        }
    }
    std::erase_if(advice.findings, [&](const Finding& f) {
        if (o.pid && f.pid != *o.pid) {
            bool ring_of_pid = f.ring.rfind(std::to_string(*o.pid) + ":", 0) == 0;
            if (!ring_of_pid) return true;
        }
        if (o.thread) {
            const std::string tid = std::to_string(*o.thread);
            const bool in_subject = f.subject.find(tid) != std::string::npos;
            if (f.sq_thread != *o.thread && !in_subject) return true;
        }
        return false;
    });
    return std::nullopt;
}

namespace {

std::string fmt_value(const Figure& f) {
    if (f.unit == "cores") return fmt::format("{:.3f} cores", f.value);
    if (f.unit == "ratio") return fmt::format("{:.1f}%", f.value * 100);
    if (f.unit == "s" || f.unit == "s/s") {
        const double v = f.value;
        std::string s = v >= 1      ? fmt::format("{:.3g} s", v)
                        : v >= 1e-3 ? fmt::format("{:.3g} ms", v * 1e3)
                                    : fmt::format("{:.3g} us", v * 1e6);
        return f.unit == "s/s" ? s + "/s" : s;
    }
    if (f.unit == "1/s") return fmt::format("{:.4g}/s", f.value);
    return fmt::format("{:.4g} {}", f.value, f.unit);
}

std::string figures(const std::vector<Figure>& figs, const std::string& indent) {
    std::string out;
    for (const auto& f : figs) out += fmt::format("{}{:<38} {}\n", indent, f.name, fmt_value(f));
    return out;
}

std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
    std::string out, line;
    std::size_t pos = 0;
    while (pos < text.size()) {
        auto sp = text.find(' ', pos);
        if (sp == std::string::npos) sp = text.size();
        std::string word = text.substr(pos, sp - pos);
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            out += indent + line + "\n";
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
        pos = sp + 1;
    }
    if (!line.empty()) out += indent + line + "\n";
    return out;
}

// sq_thread_overpriced, sq_threads_should_share: each way to do the work, with its price, then
// why any is unavailable.
std::string alternatives(const std::vector<Alternative>& alts) {
    if (alts.empty()) return "";
    std::string out = "  alternatives:\n";
    out += fmt::format("    {:<18} {:>8} {:>10} {:>13}\n", "", "cpu", "wakes/s", "added delay");
    for (const auto& a : alts) {
        if (!a.available) continue;
        out += fmt::format("    {:<18} {:>7.1f}% {:>10.1f} {:>10.1f} us{}\n", a.name,
                           a.cpu_cores * 100, a.wakeups_per_second, a.added_latency_seconds * 1e6,
                           a.recommended ? "  <- recommended" : "");
    }
    for (const auto& a : alts)
        if (!a.note.empty()) out += wrap(a.name + ": " + a.note, 94, "    ");
    return out;
}

}  // namespace

std::string render_text(const Advice& a, const Snapshot& snap) {
    std::string out;
    out += fmt::format(
        "iouscope advise: {} finding{} over {:.1f} s on {} ({}), {} SQ thread{}, "
        "{} ring{}\n",
        a.findings.size(), a.findings.size() == 1 ? "" : "s", a.window_seconds, snap.hostname,
        snap.kernel, snap.threads.size(), snap.threads.size() == 1 ? "" : "s", snap.rings.size(),
        snap.rings.size() == 1 ? "" : "s");
    if (a.findings.empty()) out += "\nNo findings: nothing to change on this evidence.\n";
    for (const auto& f : a.findings) {
        out += fmt::format("\n[{}] {}", f.id, f.subject);
        if (f.pid) out += fmt::format(" (pid {} {})", f.pid, f.comm);
        if (!f.container_id.empty()) out += " container " + f.container_id;
        if (!f.pod_uid.empty()) out += " pod " + f.pod_uid;
        out += "\n";
        out += wrap(f.summary, 96, "  ");
        out += "  evidence:\n" + figures(f.evidence, "    ");
        out += "  change:\n" + wrap(f.change, 94, "    ");
        out += "  predicted:\n" + figures(f.predicted, "    ");
        out += "  assuming:\n" + wrap(f.assumption, 94, "    ");
        if (!f.curve.empty()) {
            out += "  sq_thread_idle curve:\n";
            out += fmt::format("    {:>12} {:>12} {:>8} {:>10}\n", "setting", "mean spin", "cpu",
                               "wakes/s");
            for (const auto& p : f.curve) {
                out += fmt::format(
                    "    {:>12} {:>9.2f} ms {:>7.1f}% {:>10.1f}{}\n",
                    p.setting_seconds >= 1e-3 ? fmt::format("{:g} ms", p.setting_seconds * 1e3)
                                              : fmt::format("{:g} us", p.setting_seconds * 1e6),
                    p.effective_seconds * 1e3, p.cpu_cores * 100, p.wakeups_per_second,
                    p.recommended ? "  <- recommended"
                    : p.current   ? "  <- current"
                                  : "");
            }
        }
        out += alternatives(f.alternatives);
    }
    if (!a.notes.empty()) {
        out += "\nnotes:\n";
        for (const auto& n : a.notes) out += wrap(n, 94, "  ");
    }
    return out;
}

}  // namespace iouscope::advise
