"""The observer's cost as CPU per operation, with a confidence interval (bench/run --overhead).

Throughput ratios on a shared 2-vCPU machine swing by 30 % from one run to the next, so they
cannot show a 1 % cost. What an observer adds to a workload is CPU: its programs run in the
workload's threads, on its CPU time. So each run measures the workload's own CPU per operation:
the user and system time of the load process and every thread it had (submitters and SQ
threads), from the kernel's accounting of the children this script waited for (RUSAGE_CHILDREN,
which the kernel scales to the tasks' exact runtime), divided by the operations it completed.
Other tenants slow the workload down but hardly change what each operation costs.

Runs come in many short pairs, observer off (A) and on (B), in a random order per pair so that
a drift of the machine cancels, and one workload's cells take their pairs in turn so that a slow
stretch falls on all of them; the figure is the median of the B/A ratios with a bootstrap
95 % interval. The two halves of a pair are built alike: each waits as long as the observer
takes to start and settle (the B half with the observer starting, the A half idle), then runs
the workload RUNS_PER_HALF times back to back, and its figure is the CPU of all those runs over
their operations. A pause of the machine's own is worth about 1 % of CPU per NOP on an SQPOLL
ring here, so a half that waited and one that did not would differ with nothing attached. The
same procedure with nothing in B (A/A) gives the method's noise floor. A target counts as met
only when the whole interval lies inside it.
"""
import contextlib
import json
import os
import random
import re
import resource
import statistics
import struct
import subprocess
import tempfile
import threading
import time
from collections import namedtuple

BEGIN = "<!-- overhead: bench/run --overhead writes this section -->"
END = "<!-- /overhead -->"
SEED = 20261202  # fixed, so a rerun draws the same orders and resamples
BOOTSTRAP_RESAMPLES = 4000
SUBMIT_CPU = {1}      # the workload's submitters; the daemon and everything else float
SQ_THREAD_CPU = 0     # SQ threads, pinned with IORING_SETUP_SQ_AFF
# Runs of the workload in each half of a pair. One run of one SQPOLL ring moves by 6 to 12 %
# from one second to the next; a half of several back-to-back runs averages that out at less
# cost than as many pairs, each of which pays the observer's start and settle twice.
RUNS_PER_HALF = 4

# What a pair's B half runs beside the workload: attach() starts it (None: nothing) and returns
# an object with stop(); wait is how long after attach() was called the half's first run begins,
# and how long the A half waits idle before its own.
Observer = namedtuple("Observer", "attach wait")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measured(argv):
    """Runs argv pinned to SUBMIT_CPU; returns (its CPU seconds, stdout). Only the workload is
    reaped in between, so the RUSAGE_CHILDREN delta is its CPU alone (the daemon is reaped when
    it stops, outside any measurement)."""
    with tempfile.TemporaryFile() as err:
        before = children_cpu()
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                           preexec_fn=lambda: os.sched_setaffinity(0, SUBMIT_CPU))
        cpu = children_cpu() - before
        if p.returncode:
            err.seek(0)
            raise RuntimeError(f"{argv[0]} failed: {err.read().decode()[-300:]}")
    return cpu, p.stdout


def process_cpu_ns(pid):
    """On-CPU ns of every thread of process `pid` (their schedstat): /proc/PID/stat counts clock
    ticks, too coarse for a daemon that runs a few milliseconds a second. A thread that exits
    while it is read is left out."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total


def nop_load(build, rings, seconds):
    """A workload: CPU ns per NOP of iouscope-load with these rings for `seconds`."""
    def run():
        argv = [os.path.join(build, "iouscope-load"), "--duration", f"{seconds}s"]
        for r in rings:
            argv += ["--ring", r]
        cpu, out = measured(argv)
        ops = sum(int(dict(kv.split("=", 1) for kv in line.split()[1:])["sqes"])
                  for line in out.splitlines() if line.startswith("ring "))
        run.ops = ops
        return cpu * 1e9 / ops
    return run


class SteadyNopLoad:
    """One long-lived iouscope-load whose CPU per NOP is read over windows of its life: the SQ
    heads from the rings' memory and the CPU from every task's schedstat (the submitters and the
    SQ threads, which are the process's io-threads). For an observer that acts only after the
    workload has run a while, such as the scheduler gate, which a fresh load per run would never
    let close.

    Each ring's SQ head is read from the load's own mapping of it, through /proc/PID/mem: the
    mapping at offset 0 (IORING_OFF_SQ_RING) begins with struct io_rings, whose first field is
    sq.head (sq_off.head is 0 on every kernel since 5.1). The rings' fdinfo shows the same head,
    but printing it takes the ring's uring_lock (mutex_trylock), and a busy SQ thread that finds
    that lock held sleeps on it: on the 6.18 host that made the SQ thread sleep, which is what
    opens the lazy scheduler gate, so reading the load changed what it measured."""

    def __init__(self, build, rings, lifetime):
        argv = [os.path.join(build, "iouscope-load"), "--duration", f"{lifetime}s"]
        for r in rings:
            argv += ["--ring", r]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     preexec_fn=lambda: os.sched_setaffinity(0, SUBMIT_CPU))
        self.rings = len(rings)
        self.heads_at = []
        deadline = time.time() + 10
        while len(self.heads_at) < self.rings:
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("iouscope-load did not set up its rings")
            self.heads_at = self._sq_rings()
            time.sleep(0.05)
        self.mem = os.open(f"/proc/{self.proc.pid}/mem", os.O_RDONLY)
        self._check_layout()

    def _sq_rings(self):
        """Addresses of the load's SQ ring mappings (anon_inode:[io_uring] at offset 0)."""
        out = []
        with open(f"/proc/{self.proc.pid}/maps") as f:
            for line in f:
                fields = line.split()
                if (len(fields) >= 6 and fields[5] == "anon_inode:[io_uring]" and
                        int(fields[2], 16) == 0):
                    out.append(int(fields[0].split("-")[0], 16))
        return out

    def _head_tail(self, addr):
        return struct.unpack("<II", os.pread(self.mem, 8, addr))

    def _check_layout(self):
        """sq.tail follows sq.head, and the application moves it ahead by at most a ring's
        entries: a mapping laid out otherwise fails here, not as a wrong figure."""
        for addr in self.heads_at:
            for _ in range(100):
                head, tail = self._head_tail(addr)
                if (tail - head) % (1 << 32) > 1 << 16:
                    self.stop()
                    raise RuntimeError(f"SQ ring at {addr:#x}: head {head}, tail {tail} is not "
                                       "an io_rings layout this bench knows")

    def _heads(self):
        return {addr: self._head_tail(addr)[0] for addr in self.heads_at}

    def _cpu_ns(self):
        return process_cpu_ns(self.proc.pid)

    def window(self, seconds):
        """CPU ns per NOP over the next `seconds`."""
        h0, c0 = self._heads(), self._cpu_ns()
        time.sleep(seconds)
        h1, c1 = self._heads(), self._cpu_ns()
        if self.proc.poll() is not None:
            raise RuntimeError("iouscope-load ended before the window did")
        ops = sum((h1[a] - h0[a]) % (1 << 32) for a in h0)
        if ops == 0:
            raise RuntimeError("no SQE consumed in the window: the load stalled")
        return (c1 - c0) / ops

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        if getattr(self, "mem", None) is not None:
            os.close(self.mem)
            self.mem = None


def fio_load(path, seconds):
    """A workload: CPU ns per 4 KiB O_DIRECT random read of fio's io_uring engine."""
    def run():
        cpu, out = measured(["fio", "--output-format=json", "--name=bench", f"--filename={path}",
                             "--ioengine=io_uring", "--direct=1", "--rw=randread", "--bs=4k",
                             "--iodepth=32", "--size=256M", "--time_based",
                             f"--runtime={seconds}", "--numjobs=1", "--thread"])
        ops = json.loads(out)["jobs"][0]["read"]["total_ios"]
        run.ops = ops
        return cpu * 1e9 / ops
    return run


def half(run, attach, wait, runs):
    """One half of a pair: start `attach` (None: nothing), let `wait` seconds pass from the
    call, then `runs` runs; returns the CPU ns per operation of all of them. A half whose
    observer took longer than `wait` to start begins at once: the daemons here start in
    0.13 to 0.15 s against waits of 1.65 s or more."""
    t0 = time.monotonic()
    obs = attach() if attach else None
    try:
        time.sleep(max(0.0, wait - (time.monotonic() - t0)))
        if runs == 1:
            return run()
        cpu = ops = 0
        for _ in range(runs):
            ns = run()
            cpu += ns * run.ops
            ops += run.ops
        return cpu / ops
    finally:
        if obs:
            obs.stop()


def pair(run, observer, rng, runs=RUNS_PER_HALF):
    """One A/B pair in a random order; returns (B/A, A, B). Both halves wait observer.wait."""
    got = {}
    for which in rng.sample(["A", "B"], 2):
        attach = observer.attach if which == "B" else None
        got[which] = half(run, attach, observer.wait, runs)
    return got["B"] / got["A"], got["A"], got["B"]


def bootstrap_median(xs, rng, level=0.95):
    """(median, low, high): a percentile bootstrap of the median. statistics has no bootstrap
    and numpy is not otherwise needed here; this is the textbook procedure."""
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs)))
                  for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1 - level) / 2
    return (statistics.median(xs), meds[int(tail * len(meds))],
            meds[min(len(meds) - 1, int((1 - tail) * len(meds)))])


def verdict(low, high, target):
    if target is None:
        return ""
    if high <= target:
        return "met"
    if low > target:
        return "missed"
    return "not resolved (the interval straddles it)"


def nop_workloads():
    """{workload: iouscope-load's --ring specs} of the NOP workloads."""
    sq = f"idle=1000,cpu={SQ_THREAD_CPU}"
    return {
        "NOP, no SQPOLL (batches of 32)": ["plain,batch=32"],
        "NOP, SQPOLL": [f"sqpoll,batch=32,{sq}"],
        "NOP, 3 SQPOLL rings sharing a thread": [f"sqpoll,batch=32,{sq}", "sqpoll,share=0,batch=32",
                                                 "sqpoll,share=0,batch=32"],
    }


def workloads(build, seconds, tmp, have_fio, fio_file=None):
    out = {w: nop_load(build, rings, seconds) for w, rings in nop_workloads().items()}
    if have_fio:
        out["4 KiB O_DIRECT random reads (fio, io_uring)"] = fio_load(
            fio_file or os.path.join(tmp, "fio.dat"), max(1, round(seconds)))
    return out


# The deep tier, measured in its two phases where the work-gap program runs per SQE (bench/run).
DEEP_EVERY = "iouscoped --probes.deep, in a gap window (every SQE)"
DEEP_BETWEEN = "iouscoped --probes.deep, between gap windows"
DEEP_DUTY = "iouscoped --probes.deep, default 6s/60s, time-average"
DEEP_FENTRY = "iouscoped --probes.deep (fentry where it loads)"
DEEP_KPROBE = "iouscoped --probes.deep --no-fentry (kprobes)"
PERIOD_S = 60.0  # the default period; a window's share of it is measured per workload
# The default tier with the scheduler gate that follows a new SQ thread from its birth (the
# default until 2026-12-04, model/sched_gate.hpp): measured beside the default gate, lazy on a
# host with no nohz_full CPU (this one), which keeps sched_switch and sched_waking detached until
# an SQ thread sleeps. A comparison, not judged.
GATE_ON = "iouscoped --probes.sched-gate=on"
# Targets (issue 21): upper bound of the 95 % interval of CPU per operation, B/A.
TARGETS = {
    ("iouscoped", "NOP, no SQPOLL (batches of 32)"): 1.01,
    ("iouscoped", "NOP, SQPOLL"): 1.01,
    ("iouscoped", "NOP, 3 SQPOLL rings sharing a thread"): 1.01,
    (DEEP_DUTY, "NOP, no SQPOLL (batches of 32)"): 1.05,
    (DEEP_DUTY, "NOP, 3 SQPOLL rings sharing a thread"): 1.05,
    (DEEP_DUTY, "4 KiB O_DIRECT random reads (fio, io_uring)"): 1.02,
}


# Workloads whose A/A floor at 10 pairs is wider than a target. With one SQPOLL ring the SQ thread
# spins whatever time the submitter's wake-ups leave it, and one run's CPU per NOP moves by 6 to
# 12 % from one second to the next with the machine: an A/A pair's ratio, and each half's useful
# work alike (docs/BENCHMARKS.md). The interval narrows as 1/sqrt(pairs), so such a workload's
# A/A and targeted cells get enough pairs to resolve their target: 250 pairs of one run each
# left the A/A floor 0.024 wide on one SQPOLL ring; these pairs hold RUNS_PER_HALF runs a half.
# 80 such pairs put the lazy gate (the default since) at 1.0009 (0.9968 .. 1.0109) there on
# 2026-12-04, its top 0.0009 over the target; the interval narrows as 1/sqrt(pairs), so 120
# pairs bring that top to about 1.009 if the median holds. Fixed before the run, not after.
MIN_PAIRS = {"NOP, SQPOLL": 120, "NOP, 3 SQPOLL rings sharing a thread": 30}


# A daemon samples once a second from its start, so a 1 s run begun the moment it serves holds its
# first sample only at the very end, or not at all. Every daemon's run starts a sample interval
# and a half in, so it holds one sample, as every second of a daemon left running does: on the
# shared rings the default tier gave 1.0104 begun at once and 1.0503 begun 3 s in, the same hour.
STEADY_S = 1.5
# How long a daemon takes to serve here (0.13 to 0.15 s, three starts on 2026-12-04), and so the
# wait of a daemon's halves: its start, then STEADY_S.
DAEMON_START_S = 0.15
DAEMON_WAIT_S = DAEMON_START_S + STEADY_S


def pairs_of(oname, wname, pairs, min_pairs):
    """Pairs for one cell: `pairs`, or more where min_pairs asks it of the A/A floor and the
    cells a target judges (the deep tier's time-average is made of its two phases' cells); the
    others only explain, and keep `pairs`."""
    judged = (oname == "nothing (A/A)" or (oname, wname) in TARGETS or
              (oname in (DEEP_EVERY, DEEP_BETWEEN) and (DEEP_DUTY, wname) in TARGETS))
    return max(pairs, min_pairs.get(wname, 0)) if judged else pairs


def cells_of(observers, loads, only=None):
    """The (workload, observer) cells that `only`, a regular expression, keeps."""
    return [(w, o) for w in loads for o in observers
            if only is None or re.search(only, f"{w} / {o}")]


def measure(observers, loads, pairs, log, only=None, min_pairs=None, runs=RUNS_PER_HALF):
    """{(observer, workload): [(ratio, A, B)]}; observers maps a name to an Observer, whose
    attach is None for the A/A run; each half of a pair holds `runs` runs. `only`, a regular
    expression, keeps the cells whose "workload / observer" it matches; `min_pairs` is
    MIN_PAIRS or {} (a smoke run)."""
    rng = random.Random(SEED)
    min_pairs = MIN_PAIRS if min_pairs is None else min_pairs
    results, done = {}, 0
    cells = cells_of(observers, loads, only)
    total = sum(pairs_of(o, w, pairs, min_pairs) for w, o in cells)
    for wname, run in loads.items():
        if not any(w == wname for w, _ in cells):
            continue
        run()  # warm-up: caches, the fio file's layout
        # One workload's cells take their pairs in turn, so that a slow stretch of the machine
        # falls on all of them alike instead of on whichever cell it came in.
        left = {o: pairs_of(o, wname, pairs, min_pairs) for o in observers if (wname, o) in cells}
        while any(left.values()):
            for oname in [o for o, n in left.items() if n]:
                rows = results.setdefault((oname, wname), [])
                rows.append(pair(run, observers[oname], rng, runs))
                left[oname] -= 1
                done += 1
                r, a_ns, b_ns = rows[-1]
                log(f"[{done}/{total}] {wname} / {oname}: {b_ns:.0f} vs {a_ns:.0f} ns/op, {r:.4f}")
    return results


def report(results, seconds, pairs, node, kernel, only=None, extra="", shares=None,
           runs=RUNS_PER_HALF):
    """`shares`: {workload: the share of the period the default window stayed attached on it},
    for the deep tier's time-average."""
    shares = shares or {}
    rng = random.Random(SEED)
    cmd = (f"bench/run --overhead {extra + ' ' if extra else ''}--pairs {pairs} "
           f"--runs {runs} --seconds {seconds}")
    if only:
        cmd += f" --only '{only}'"
    lines = [BEGIN, "## CPU per operation with each observer, relative to nothing attached\n",
             f"`{cmd}` on {node}, kernel "
             f"{kernel}, {time.strftime('%Y-%m-%d')}. Each cell: median over its pairs ({pairs}, or "
             "more where one run's noise is wider than a target: bench/overhead.py MIN_PAIRS) of "
             "(the workload's CPU per operation with the observer) / (without), then its "
             "bootstrap 95 % interval; 1.000 = free. Each half of a pair waits as long as the "
             f"observer takes to start and settle ({DAEMON_WAIT_S:g} s for a daemon: its start, "
             f"then {STEADY_S:g} s, so that each run holds one of its once-a-second samples; "
             "the A half waits idle), then runs the workload "
             f"{runs} time{'s' if runs > 1 else ''} back to back; its figure is all those runs' "
             "CPU over their operations. \"nothing (A/A)\" runs the same pairs with nothing in "
             "either half: the method's noise floor. Submitters are pinned to CPU 1, SQ threads "
             "to CPU 0 (the method: bench/overhead.py). Where the deep tier's work-gap program "
             "runs once per SQE it is attached only in --probes.gap-sampling's windows: its "
             "rows give the cost in a window and between windows, and the time-average, "
             "bootstrapped from both cells' pairs. A window stays attached until it "
             "has recorded 20,000 gaps (and at least 1.25 s after its 2.15 s cutoff), 6 s at "
             "most; the share of the 60 s period it stayed attached is measured per workload "
             "with the default daemon" + share_text(shares) + ".\n",
             "| workload | observer | pairs | CPU per op, median | 95 % interval | A ns/op (median) "
             "| target | |",
             "|---|---|---|---|---|---|---|---|"]
    stats = {}
    for (oname, wname), rows in results.items():
        med, lo, hi = bootstrap_median([r for r, _, _ in rows], rng)
        stats[(oname, wname)] = (med, lo, hi, statistics.median(a for _, a, _ in rows),
                                 str(len(rows)))
        if oname == DEEP_BETWEEN and (DEEP_EVERY, wname) in results and wname in shares:
            every = [r for r, _, _ in results[(DEEP_EVERY, wname)]]
            stats[(DEEP_DUTY, wname)] = duty_weighted(
                every, [r for r, _, _ in rows], stats[(oname, wname)][3], rng,
                shares[wname]) + (f"{len(every)} + {len(rows)}",)
    for (oname, wname), (med, lo, hi, a_ns, n) in stats.items():
        target = TARGETS.get((oname, wname))
        tgt = f"<= {target:.2f}" if target else "-"
        lines.append(f"| {wname} | {oname} | {n} | {med:.4f} | {lo:.4f} .. {hi:.4f} | "
                     f"{a_ns:,.0f} | {tgt} | {verdict(lo, hi, target)} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def share_text(shares):
    if not shares:
        return ""
    return ": " + "; ".join(f"{w} {v:.3f} ({v * PERIOD_S:.2f} s)" for w, v in shares.items())


def duty_weighted(every, between, a_ns, rng, share, level=0.95):
    """The time-average of the two phases, `share` of the time in a window and the rest between,
    as (median, low, high, a_ns). The two cells' pairs are independent, so each bootstrap
    resample draws both and weighs their medians; the percentiles of that are the interval.
    (Adding the two intervals' ends, as this did first, assumes both phases at their worst at
    once, which a 95 % interval does not need; on the shared rings that was 0.045 wide against
    0.043.)"""
    med = share * statistics.median(every) + (1 - share) * statistics.median(between)
    sums = sorted(share * statistics.median(rng.choices(every, k=len(every))) +
                  (1 - share) * statistics.median(rng.choices(between, k=len(between)))
                  for _ in range(BOOTSTRAP_RESAMPLES))
    tail = (1 - level) / 2
    return (med, sums[int(tail * len(sums))],
            sums[min(len(sums) - 1, int((1 - tail) * len(sums)))], a_ns)


def window_shares(long_loads, start_daemon, cells, log, window_s=6.0):
    """{workload: the share of the default 60 s period its first gap window stayed attached}, for
    each workload with the deep tier's cells. A window records only threads born before it
    opened, so each workload (run for longer than a window) starts first; the daemon then starts
    with its defaults, its first window opening at once, and once that has surely closed the
    daemon's iouscope_probe_attached_seconds_total says how long it stayed."""
    out = {}
    for wname, run in long_loads.items():
        if not any(w == wname and o in (DEEP_EVERY, DEEP_BETWEEN) for w, o in cells):
            continue
        load = threading.Thread(target=run)
        load.start()
        try:
            time.sleep(0.5)  # the load's threads exist
            d = start_daemon()
            try:
                time.sleep(window_s + 1)
                m = re.search(
                    r'^iouscope_probe_attached_seconds_total\{probe="work_gaps"\} (\S+)$',
                    d.scrape(), re.M)
            finally:
                d.stop()
        finally:
            load.join()
        if not m:
            raise RuntimeError("the daemon exports no iouscope_probe_attached_seconds_total: "
                               "its work-gap probe is not duty-cycled here")
        out[wname] = float(m.group(1)) / PERIOD_S
        log(f"{wname}: the default gap window stayed attached {float(m.group(1)):.2f} s")
    return out


def write_section(path, section, begin=BEGIN, end=END):
    """Replaces the section between `begin` and `end` in `path`, or appends it."""
    text = open(path).read() if os.path.exists(path) else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


PROGRAMS_BEGIN = "<!-- programs: bench/run --overhead --attach-kinds writes this section -->"
PROGRAMS_END = "<!-- /programs -->"


@contextlib.contextmanager
def bpf_stats(prog_stats):
    """kernel.bpf_stats_enabled for the block. Yields a dict that, once the block has run, holds
    {program: (runs, run ns)} of every program prog_stats() lists that ran in it. bpf_stats
    brackets every run of every program with two clock reads, so it is on only in such blocks."""
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    ran = {}
    try:
        before = prog_stats()
        yield ran
        for name, (t1, c1) in prog_stats().items():
            t0, c0 = before.get(name, (0, 0))
            if c1 > c0:
                ran[name] = (c1 - c0, t1 - t0)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])


def program_costs(observers, loads, prog_stats, log):
    """{(observer, workload): [(program, ns per run, runs per operation)]}: each deep observer
    attached, one run of each workload with bpf_stats on. bpf_stats brackets every run of every
    program with two clock reads, so it is on only here, never in the A/B pairs."""
    out = {}
    for oname, attach in observers.items():
        for wname, run in loads.items():
            obs = attach()
            try:
                with bpf_stats(prog_stats) as ran:
                    run()
            finally:
                obs.stop()
            rows = [(name, ns / runs, runs / run.ops) for name, (runs, ns) in sorted(ran.items())]
            rows.sort(key=lambda r: -r[1] * r[2])
            out[(oname, wname)] = rows
            log(f"programs: {wname} / {oname}: {len(rows)} ran")
    return out


def programs_report(costs, node, kernel):
    lines = [PROGRAMS_BEGIN, "## Each deep program's cost, by attach kind\n",
             f"`bench/run --overhead --attach-kinds` on {node}, kernel {kernel}, "
             f"{time.strftime('%Y-%m-%d')}. One run of each workload per attach kind with "
             "bpf_stats on: ns per run (`run_time_ns / run_cnt`, two clock reads included), runs "
             "per operation of the workload, and their product, the program's ns per operation. "
             "Programs that did not run are left out.\n",
             "| workload | observer | program | ns per run | runs per op | ns per op |",
             "|---|---|---|---|---|---|"]
    for (oname, wname), rows in costs.items():
        for name, ns, per_op in rows:
            lines.append(f"| {wname} | {oname} | `{name}` | {ns:,.0f} | {per_op:.3f} | "
                         f"{ns * per_op:,.1f} |")
    lines.append(PROGRAMS_END)
    return "\n".join(lines) + "\n"
