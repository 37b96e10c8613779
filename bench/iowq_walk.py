#!/usr/bin/env python3
"""What the io-wq worker walk (the iowq_workers probe, request tier) costs as the machine's
threads grow: its program's time per sample, per thread visited and per thread that exits, and
the daemon's CPU with the request tier against without it, side by side.

usage: bench/iowq_walk.py [--build DIR] [--threads T,T,...] [--seconds S] [--pairs N]
                          [--interval D]

Each point holds T idle threads (default 100, 1,000 and 10,000, in a helper process, each
blocked on a lock) beside the machine's own, and runs N pairs (default 3) of fresh daemons at
--interval (default 1s), in alternating order: one with --probes.requests, one without. Each
daemon settles 3 s, then for S seconds (default 10):
  cpu     the daemon's on-CPU time (schedstat, every thread) in % of one core, for both;
then, the request tier's daemon only, S/2 seconds more with kernel.bpf_stats_enabled (which adds
two clock reads to every program run, so it is kept out of the CPU window):
  walk    the iter/task program's run time per walk (its runs over the tasks the walk visits,
          counted in /proc), in microseconds, and per task visited, in ns.
The table gives each figure's median and range over the pairs, and the CPU difference between
the two daemons of each pair with the difference between the pairs' first and second halves
beside it as the A/A noise. Then the helper's threads exit under a daemon with the tier, and the
sched_process_exit program's ns per exit is given.

Not a test: it prints figures for docs/BENCHMARKS.md ("The io-wq worker walk"). Needs root
(BPF, bpf_stats) and a build.
"""
import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from importlib.machinery import SourceFileLoader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree clean
import overhead  # noqa: E402
import scale  # noqa: E402  (its --threads list parser)

runner = SourceFileLoader("bench_run", os.path.join(HERE, "run")).load_module()

WALK = "iou_iter_workers"
EXIT = "iou_iowq_exit"

# The helper: T threads blocked on one lock, "ready" once all run, until stdin closes.
HELPER = r"""
import sys, threading
threading.stack_size(64 * 1024)
gate = threading.Lock(); gate.acquire()
threads = [threading.Thread(target=gate.acquire, daemon=True) for _ in range(int(sys.argv[1]))]
for t in threads: t.start()
print("ready", flush=True)
sys.stdin.read()
"""


def machine_tasks():
    """Threads of the whole machine now: what one iter/task walk visits."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                n += len(os.listdir(f"/proc/{pid}/task"))
    return n


def start_helper(threads):
    helper = subprocess.Popen([sys.executable, "-c", HELPER, str(threads)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    if helper.stdout.readline().strip() != "ready":
        helper.kill()
        raise SystemExit(f"bench/iowq_walk.py: the helper could not start {threads} threads")
    return helper


def one_daemon(a, requests):
    """CPU % of one core over S seconds, and with the tier the walk's (runs, ns) and tasks."""
    daemon = runner.Daemon(a.build, ["--probes.requests"] if requests else [], a.interval)
    try:
        time.sleep(3)
        pid = daemon.proc.pid
        c0, t0 = overhead.process_cpu_ns(pid), time.monotonic()
        time.sleep(a.seconds)
        cpu = (overhead.process_cpu_ns(pid) - c0) / 1e9 / (time.monotonic() - t0) * 100
        if not requests:
            return cpu, None, 0
        # Apart from the CPU window: bpf_stats adds two clock reads to every run.
        with overhead.bpf_stats(runner.prog_stats) as ran:
            time.sleep(a.seconds / 2)
            tasks = machine_tasks()
        return cpu, ran.get(WALK), tasks
    finally:
        daemon.stop()


def cell(values, fmt):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))} .. " \
           f"{fmt.format(max(values))})"


def point(a, threads):
    helper = start_helper(threads)
    try:
        on, off, per_walk, per_task = [], [], [], []
        for i in range(a.pairs):
            for requests in ((True, False) if i % 2 == 0 else (False, True)):
                cpu, walk, tasks = one_daemon(a, requests)
                (on if requests else off).append(cpu)
                if requests:
                    if not walk:
                        raise SystemExit(f"bench/iowq_walk.py: {WALK} never ran; is the request "
                                         "tier's iowq_workers probe attached on this kernel?")
                    runs, ns = walk
                    walks = max(1, round(runs / tasks))
                    per_walk.append(ns / walks / 1000)
                    per_task.append(ns / runs)
        return on, off, per_walk, per_task
    finally:
        helper.stdin.close()
        helper.wait(timeout=60)


def exit_cost(a, threads):
    """ns per run of the exit program while `threads` threads exit, the tier attached."""
    helper = start_helper(threads)
    daemon = runner.Daemon(a.build, ["--probes.requests"], a.interval)
    try:
        time.sleep(2)
        with overhead.bpf_stats(runner.prog_stats) as ran:
            helper.stdin.close()
            helper.wait(timeout=60)
            time.sleep(0.5)
        return ran.get(EXIT)
    finally:
        daemon.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=lambda t: scale.ints(t, 1), default=[100, 1000, 10000])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--interval", default="1s")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/iowq_walk.py: needs root (BPF programs and bpf_stats)")
    if a.pairs < 2:
        raise SystemExit("bench/iowq_walk.py: --pairs must be at least 2 (the A/A needs halves)")
    base = machine_tasks()
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {base} threads before the "
          f"helper, interval {a.interval}, {a.seconds:g} s per daemon, {a.pairs} pairs per point")
    print("| idle threads | walk (µs per sample) | ns per task | CPU with tier (%) | "
          "CPU without (%) | with − without (pp) | A/A (pp) |")
    print("|---|---|---|---|---|---|---|")
    for t in a.threads:
        on, off, per_walk, per_task = point(a, t)
        diff = [x - y for x, y in zip(on, off)]
        half = len(diff) // 2
        aa = statistics.median(diff[:half]) - statistics.median(diff[half:])
        print(f"| {t:,} | {cell(per_walk, '{:.1f}')} | {cell(per_task, '{:.1f}')} | "
              f"{cell(on, '{:.2f}')} | {cell(off, '{:.2f}')} | {cell(diff, '{:+.2f}')} | "
              f"{aa:+.2f} |", flush=True)
    ex = exit_cost(a, max(a.threads))
    if ex:
        print(f"\nexit program: {ex[1] / ex[0]:.0f} ns per exit over {ex[0]:,} exits")
    else:
        print(f"\nexit program {EXIT}: no runs seen")


if __name__ == "__main__":
    main()
