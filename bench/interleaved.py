"""A running daemon's cost, in adjacent windows of one running load (bench/run --interleaved).

Why a second method. bench/overhead.py's pairs start a fresh load and a fresh daemon for every
half, so the two halves of a pair lie 5 to 6 s apart, and one SQPOLL ring's CPU per NOP wanders
slowly: on this host (2026-12-05, 400 windows of 0.25 s of one running ring) the standard
deviation of a 1 s block was 2.3 % and of a 4 s block still 2.0 %, while two adjacent 1 s blocks
differed by 1.2 % (Allan deviation). Most of that noise is slow, so it cancels between two
windows side by side and does not between two halves seconds apart. The price of that method
was 120 pairs, 46 minutes, to resolve about 1 %.

How. One load runs throughout (overhead.SteadyNopLoad: its CPU from every task's schedstat, its
operations from the rings' SQ heads), and one daemon beside it, started and settled once. A pair
is two adjacent windows in a random order: in A the daemon is stopped (SIGSTOP; the window
begins only when every one of its threads is), in B it runs (SIGCONT). The A/A pairs take their
turn between them on the same load beside the same daemon, stopped in both windows: the
method's noise floor. Windows last one sample interval, so a B window holds the sampling that a
second of a free daemon does.

What a stopped daemon leaves running, and how that is accounted. Its BPF programs stay attached
in both windows, so the ratio holds the daemon's own work (its sampler, the iterator walk it
runs, its exporter) and not theirs. So the method judges only an observer that runs no
per-event program on the load: bpf_stats is on for the whole cell and counts every run of every
iou_ program that is not an iterator (iterators run inside the daemon's reads, so in B alone);
the verdict stands only where that count is zero. And a daemon resumed after a stopped window
takes its overdue sample at once: the report sets its CPU per second of B window beside its CPU
per second running free, so a B window is seen to hold no less of its work than a second of
running does.
"""
import os
import random
import signal
import statistics
import time

import overhead

BEGIN = "<!-- interleaved: bench/run --interleaved writes this section -->"
END = "<!-- /interleaved -->"
WINDOW_S = 1.0      # the daemon's sample interval (iouscoped's default)
FREE_S = 5.0        # the daemon's CPU per second, running free, is measured over this long
STOP_TIMEOUT_S = 2.0
# Pairs per cell, fixed before a run. In the run of 2026-12-05 one pair's ratio had a standard
# deviation of 2.2 to 5.3 %, and the median of 400 a 95 % interval 0.003 to 0.005 wide.
PAIRS = 400


def task_states(pid):
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                # The state follows the command name, which is in parentheses and may hold any.
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return states


def stop(pid):
    """SIGSTOP, then wait until every thread is stopped: a thread inside a system call (an
    iterator read) stops only when that returns, and its work must not fall in an A window."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while not all(s in ("T", "t") for s in task_states(pid)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"pid {pid} did not stop within {STOP_TIMEOUT_S} s of SIGSTOP")
        time.sleep(0.001)


def pair(load, daemon_pid, runs_in_b, rng, window_s, out):
    """Two adjacent windows of `load` in a random order, the daemon stopped in A and in B unless
    runs_in_b; returns (B/A, A ns/op, B ns/op) and adds the daemon's CPU and the time of a
    running B window to out["b_daemon_ns"] and out["b_s"]."""
    got = {}
    for which in rng.sample(["A", "B"], 2):
        running = runs_in_b and which == "B"
        if running:
            os.kill(daemon_pid, signal.SIGCONT)
        else:
            stop(daemon_pid)
        d0, w0 = overhead.process_cpu_ns(daemon_pid), time.monotonic()
        got[which] = load.window(window_s)
        if running:
            out["b_daemon_ns"] += overhead.process_cpu_ns(daemon_pid) - d0
            out["b_s"] += time.monotonic() - w0
    return got["B"] / got["A"], got["A"], got["B"]


def measure(load, daemon_pid, pairs, prog_stats, log, label, window_s=WINDOW_S, seed=None):
    """Runs `pairs` A/B pairs and as many A/A pairs, in turn, on `load` (a SteadyNopLoad)
    beside the daemon `daemon_pid`, which runs on entry. Returns a dict: ab and aa, lists of
    (ratio, A ns/op, B ns/op); daemon_ns_per_s in B windows and running free; events, the
    event-program runs of the cell, {program: (runs, run ns)}."""
    rng = random.Random(overhead.SEED if seed is None else seed)
    c0, t0 = overhead.process_cpu_ns(daemon_pid), time.monotonic()
    time.sleep(FREE_S)
    free = (overhead.process_cpu_ns(daemon_pid) - c0) / (time.monotonic() - t0)
    out = {"ab": [], "aa": [], "b_daemon_ns": 0, "b_s": 0.0}
    try:
        with overhead.bpf_stats(prog_stats) as ran:
            for i in range(2 * pairs):
                kind = "ab" if i % 2 == 0 else "aa"
                out[kind].append(pair(load, daemon_pid, kind == "ab", rng, window_s, out))
                r, a_ns, b_ns = out[kind][-1]
                log(f"[{i + 1}/{2 * pairs}] {label} / {'A/B' if kind == 'ab' else 'A/A'}: "
                    f"{b_ns:.1f} vs {a_ns:.1f} ns/op, {r:.4f}")
    finally:
        os.kill(daemon_pid, signal.SIGCONT)  # never leave it stopped
    out["daemon_ns_per_s"] = {"B windows": out["b_daemon_ns"] / out["b_s"], "free": free}
    # Iterators run inside the daemon's own reads, so in B windows alone: not event programs.
    out["events"] = {p: v for p, v in ran.items() if not p.startswith("iou_iter")}
    return out


def report(results, pairs, window_s, node, kernel, only=None, daemon_args=()):
    """A markdown section: per workload, the A/A floor and the daemon's ratio with bootstrap
    intervals, judged against overhead.TARGETS only where no event program ran."""
    rng = random.Random(overhead.SEED)
    cmd = f"bench/run --interleaved --pairs {pairs} --seconds {window_s:g}"
    if only:
        cmd += f" --only '{only}'"
    cmd += "".join(f" --daemon-arg={arg}" for arg in daemon_args)
    observer = " ".join(["iouscoped", *daemon_args])
    lines = [BEGIN, "## The default tier in adjacent windows of a running load\n",
             f"`{cmd}` on {node}, kernel {kernel}, {time.strftime('%Y-%m-%d')}. One load runs "
             f"throughout each workload and one `{observer}` beside it; each pair "
             f"is two adjacent {window_s:g} s windows in a random order, the daemon stopped "
             "(SIGSTOP) in A and running in B; the A/A pairs take turns with them, the daemon "
             "stopped in both. Median of B/A with its bootstrap 95 % interval (the method: "
             "bench/interleaved.py). The ratio holds the daemon's own work; its BPF programs "
             "stay attached in both windows, so a cell is judged only where bpf_stats saw no "
             "run of any program but the iterator.\n",
             "| workload | pairs | A/A, median | A/A 95 % interval | iouscoped, median "
             "| 95 % interval | A ns/op (median) | daemon CPU per s: B windows / free "
             "| event-program runs | target | |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for wname, res in results.items():
        aa = overhead.bootstrap_median([r for r, _, _ in res["aa"]], rng)
        ab = overhead.bootstrap_median([r for r, _, _ in res["ab"]], rng)
        a_ns = statistics.median(a for _, a, _ in res["ab"])
        dns = res["daemon_ns_per_s"]
        runs = sum(c for c, _ in res["events"].values())
        named = ", ".join(f"{p} {c:,}" for p, (c, _) in sorted(res["events"].items()))
        target = overhead.TARGETS.get(("iouscoped", wname)) if not daemon_args else None
        verdict = (overhead.verdict(ab[1], ab[2], target) if runs == 0 else
                   "not judged: event programs ran" if target else "")
        lines.append(
            f"| {wname} | {len(res['ab'])} | {aa[0]:.4f} | {aa[1]:.4f} .. {aa[2]:.4f} | "
            f"{ab[0]:.4f} | {ab[1]:.4f} .. {ab[2]:.4f} | {a_ns:,.1f} | "
            f"{dns['B windows'] / 1e6:.2f} / {dns['free'] / 1e6:.2f} ms | {named or 0} | "
            f"{'<= %.2f' % target if target else '-'} | {verdict} |")
    lines.append(END)
    return "\n".join(lines) + "\n"
