#!/usr/bin/env python3
"""What iouscoped costs as rings and SQ threads grow: its CPU per second of sampling, its memory
and its exposition, at each point of a grid of idle rings and SQ threads, with the cost per ring
and per SQ thread fitted from them.

usage: bench/scale.py [--build DIR] [--rings R,R,...] [--threads T,T,...] [--seconds S]
                      [--repeats N] [--interval D] [--settle S] [--daemon-arg ARG ...]
                      [--ab]

Each point runs iouscope-load holding R rings, T of them SQPOLL rings with an SQ thread each
(every ring submits one NOP, then all stay idle), and a fresh daemon beside them at --interval
(default 1s, the daemon's default). After --settle seconds (default 5) it measures, with
nothing scraping:
  cpu     the daemon's on-CPU time (schedstat, every thread) over S seconds (default 20), in %
          of one core;
  rss     its resident memory at the end, and its peak (VmHWM); the advisor keeps snapshots
          for its window (--advise.window, 60 s), so the memory is steady only once the
          settling and the CPU window together outlast it: --settle 45 with the default 20 s;
then five scrapes of /metrics, 1.1 s apart so that each reads a new sample and renders it:
  first   the slowest of them (a sample's first scrape renders the exposition), in ms, asking
          for gzip as Prometheus does (the daemon compresses once per sample);
  bytes   the exposition's size, uncompressed, and gzip-compressed.
The grid: the rings of --rings with the smallest --threads, then the threads of --threads with
the smallest --rings, then the most rings with the most SQ threads among them (the scale goal's
point, 10,000 and 1,000 by default; in no fit). Each point runs --repeats times (default 2); the table gives the median
and the range. --daemon-arg passes an argument to the daemon (repeat it for more); with --ab
every point runs both without them (A) and with them (B), in alternating order, and the table
gives both rows. The fit is a least-squares line through the medians of each series: CPU per
1,000 rings and per 100 SQ threads, and the same for memory.

Not a test: it prints figures for docs/BENCHMARKS.md ("Scale"). Needs root (BPF) and a build.
"""
import argparse
import gzip
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from importlib.machinery import SourceFileLoader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep the source tree clean
import overhead  # noqa: E402

# bench/run's daemon (start-up, scrape, stop) and its /proc readers.
runner = SourceFileLoader("bench_run", os.path.join(HERE, "run")).load_module()


def start_load(build, rings, threads):
    """iouscope-load holding `rings` rings, `threads` of them SQPOLL; returns once all are set up."""
    argv = [os.path.join(build, "iouscope-load"), "--hold", "inf"]
    if rings > threads:
        argv += ["--ring", f"plain,count=1,n={rings - threads}"]
    if threads:
        argv += ["--ring", f"sqpoll,count=1,n={threads}"]
    load = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in load.stdout:
        if line.startswith("done"):
            return load
    load.kill()
    raise SystemExit(f"bench/scale.py: iouscope-load ended before its rings were set up: "
                     f"{load.stderr.read().strip()[-300:]}")


def timed_scrape(daemon):
    """One scrape as Prometheus makes it (Accept-Encoding: gzip): ms, bytes, gzip bytes."""
    req = urllib.request.Request(daemon.url(), headers={"Accept-Encoding": "gzip"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        gzipped = r.headers.get("Content-Encoding") == "gzip"
    ms = (time.monotonic() - t0) * 1000
    text = gzip.decompress(body) if gzipped else body
    return ms, len(text), len(body) if gzipped else 0


def measure(a, rings, threads, extra):
    load = start_load(a.build, rings, threads)
    daemon = None
    try:
        daemon = runner.Daemon(a.build, extra, interval=a.interval)
        pid = daemon.proc.pid
        time.sleep(a.settle)
        c0, t0 = overhead.process_cpu_ns(pid), time.monotonic()
        time.sleep(a.seconds)
        cpu = (overhead.process_cpu_ns(pid) - c0) / 1e9 / (time.monotonic() - t0) * 100
        rss, peak = runner.proc_rss_mb(pid), runner.proc_peak_rss_mb(pid)
        scrapes = []
        for _ in range(5):
            time.sleep(1.1)
            scrapes.append(timed_scrape(daemon))
        return {"cpu": cpu, "rss": rss, "peak": peak,
                "first": max(ms for ms, _, _ in scrapes), "bytes": scrapes[-1][1],
                "gzip": scrapes[-1][2]}
    finally:
        if daemon:
            daemon.stop()
        load.terminate()
        load.wait(timeout=60)


def cell(values, fmt):
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def fit(results, ring_series, thread_series, key):
    """Least-squares cost per ring (from the ring series, SQ threads fixed) and per SQ thread
    (from the thread series, less what their rings cost by the first slope), on the medians."""
    med = {p: statistics.median(r[key] for r in results[p]) for p in results}
    per_ring = float("nan")
    if len({r for r, _ in ring_series}) > 1:
        per_ring = statistics.linear_regression([r for r, _ in ring_series],
                                                [med[p] for p in ring_series]).slope
    per_thread = float("nan")
    if len({t for _, t in thread_series}) > 1:
        ring_cost = 0 if per_ring != per_ring else per_ring
        per_thread = statistics.linear_regression(
            [t for _, t in thread_series],
            [med[(r, t)] - ring_cost * r for r, t in thread_series]).slope
    return per_ring, per_thread


def ints(text, least=0):
    """A --rings or --threads list: comma-separated whole numbers >= least, sorted, unique."""
    try:
        values = sorted({int(v) for v in text.split(",") if v})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want comma-separated whole numbers")
    if not values or values[0] < least:
        raise argparse.ArgumentTypeError(f"{text!r}: want one or more numbers >= {least}")
    return values


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rings", type=ints, default=[100, 1000, 10000])
    ap.add_argument("--threads", type=ints, default=[10, 100, 1000])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--interval", default="1s")
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--daemon-arg", action="append", default=[])
    ap.add_argument("--ab", action="store_true")
    a = ap.parse_args()
    if a.ab and not a.daemon_arg:
        raise SystemExit("bench/scale.py: --ab compares the daemon without and with --daemon-arg")
    if os.geteuid() != 0:
        raise SystemExit("bench/scale.py: needs root (the daemon loads BPF programs)")
    if a.seconds <= 0 or a.repeats < 1:
        raise SystemExit("bench/scale.py: --seconds must be > 0 and --repeats >= 1")
    for prog in ("iouscoped", "iouscope-load"):
        if not os.access(os.path.join(a.build, prog), os.X_OK):
            raise SystemExit(f"bench/scale.py: no {prog} in {a.build} (scripts/dev build)")
    t_min, r_min = a.threads[0], a.rings[0]
    grid = [(r, t_min) for r in a.rings if r >= t_min]
    grid += [(r_min if r_min >= t else t, t) for t in a.threads[1:]]
    # The scale issue's own point: the most rings with the most SQ threads among them.
    goal = (max(a.rings[-1], a.threads[-1]), a.threads[-1])
    fitted = list(grid)
    if goal not in grid:
        grid.append(goal)
    variants = [("A", []), ("B", a.daemon_arg)] if a.ab else [("", a.daemon_arg)]
    results, by_variant = {}, {}
    for i in range(a.repeats):
        for rings, threads in grid:
            for name, extra in (variants if i % 2 == 0 else variants[::-1]):
                print(f"[{i + 1}/{a.repeats}] {rings} rings, {threads} SQ threads {name} ...",
                      file=sys.stderr, flush=True)
                m = measure(a, rings, threads, extra)
                by_variant.setdefault((rings, threads, name), []).append(m)
                if name != "A":
                    results.setdefault((rings, threads), []).append(m)
    print(f"\niouscoped at --sample.interval={a.interval}, {a.seconds:g} s of CPU per point, "
          f"median (min-max) of {a.repeats} runs; idle rings, nothing scraping during the CPU "
          f"window\n")
    if a.daemon_arg:
        print(f"daemon arguments{' of B' if a.ab else ''}: {' '.join(a.daemon_arg)}\n")
    print("| rings | SQ threads | daemon CPU, % of a core | RSS, MB | peak RSS, MB "
          "| first scrape (gzip), ms | /metrics, bytes | gzip, bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for (rings, threads, name), runs in by_variant.items():
        print(f"| {rings:,} | {threads:,}{' ' + name if name else ''} "
              f"| {cell([r['cpu'] for r in runs], '{:.2f}')} "
              f"| {cell([r['rss'] for r in runs], '{:.1f}')} "
              f"| {cell([r['peak'] for r in runs], '{:.1f}')} "
              f"| {cell([r['first'] for r in runs], '{:.0f}')} "
              f"| {statistics.median(r['bytes'] for r in runs):,.0f} "
              f"| {statistics.median(r['gzip'] for r in runs):,.0f} |")
    ring_series = [p for p in fitted if p[1] == t_min]
    thread_series = [fitted[0]] + [p for p in fitted if p[1] != t_min]
    cpu_ring, cpu_thread = fit(results, ring_series, thread_series, "cpu")
    rss_ring, rss_thread = fit(results, ring_series, thread_series, "rss")
    def per(v, scale, unit, fmt):
        return "n/a (one point)" if v != v else f"{fmt.format(v * scale)} {unit}"
    print(f"\nfitted: CPU {per(cpu_ring, 1000, '% of a core per 1,000 rings', '{:.3f}')}, "
          f"{per(cpu_thread, 100, '% per 100 SQ threads', '{:.3f}')}; "
          f"RSS {per(rss_ring, 1000, 'MB per 1,000 rings', '{:.1f}')}, "
          f"{per(rss_thread, 100, 'MB per 100 SQ threads', '{:.1f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
