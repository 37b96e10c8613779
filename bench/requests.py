"""The request tier's cost per request (bench/run --requests).

The request tier (--probes.requests) runs programs on the submit, completion, io-wq and poll
tracepoints of every request of every ring, so its cost is per request, and the worst case is the
cheapest request there is: a NOP, on a submitter bound by its CPU. Two figures, side by side:

  * CPU per NOP with the tier attached over CPU per NOP with nothing attached, by the pairs of
    bench/overhead.py (fresh load and daemon per half, random order, bootstrap 95 % interval),
    with the A/A pairs of the same run as the method's noise floor. On a CPU-bound submitter the
    inverse of this ratio is the throughput ratio. (ratio - 1) times the A half's ns per NOP is
    the tier's added ns per request, with the interval carried through; the goal is 100 ns.
  * ns per run of each program from bpf_stats (run_time_ns / run_cnt, one run of each workload
    with bpf_stats on, never in the pairs) and runs per request: which program costs what.

The default tier is measured beside it on the same workloads, which must stay within its 1 %.
And so is the floor any tracer of these two tracepoints pays on this host: bpftrace counting
per ring at submit and at completion (bench/run's peer), whose programs do almost nothing.
"""
import random
import time

import overhead

BEGIN = "<!-- requests: bench/run --requests writes this section -->"
END = "<!-- /requests -->"
TIER = "iouscoped --probes.requests"
PEER = "bpftrace, count per ring at submit and complete"
DEFAULT = "iouscoped"
GOAL_NS = 100.0  # issue 47: the whole request path, per request
WORKLOADS = ("NOP, no SQPOLL (batches of 32)", "NOP, SQPOLL")


def observers(daemon, wait, peer=None):
    obs = overhead.Observer
    out = {"nothing (A/A)": obs(None, wait), DEFAULT: obs(daemon(), wait),
           TIER: obs(daemon("--probes.requests"), wait)}
    if peer:
        out[PEER] = obs(peer, wait)
    return out


def added_ns(rows, rng):
    """Median and bootstrap 95 % interval of (B - A) ns per operation over the pairs."""
    return overhead.bootstrap_median([b - a for _, a, b in rows], rng)


def report(results, costs, a, node, kernel):
    rng = random.Random(overhead.SEED)
    cmd = f"bench/run --requests --pairs {a.pairs} --runs {a.runs} --seconds {a.seconds}"
    lines = [BEGIN, "## The request tier's cost per request\n",
             f"`{cmd}` on {node}, kernel {kernel}, {time.strftime('%Y-%m-%d')}. CPU per NOP "
             "with each observer over CPU per NOP with nothing attached, by bench/overhead.py's "
             "pairs (median and bootstrap 95 % interval; the A/A row is the noise floor of the "
             "same run), and the ns each request gains, B minus A per pair. On these CPU-bound "
             "submitters the throughput ratio is the inverse of the CPU ratio. The goal for the "
             f"whole request path is {GOAL_NS:.0f} ns per request; the default tier's is 1 %.\n",
             "| workload | observer | pairs | CPU per op, median | 95 % interval | "
             "added ns per op | 95 % interval | A ns/op | goal | |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (oname, wname), rows in results.items():
        med, lo, hi = overhead.bootstrap_median([r for r, _, _ in rows], rng)
        ns, ns_lo, ns_hi = added_ns(rows, rng)
        a_ns = sorted(x for _, x, _ in rows)[len(rows) // 2]
        if oname in (TIER, PEER):
            goal, verdict = f"<= {GOAL_NS:.0f} ns", overhead.verdict(ns_lo, ns_hi, GOAL_NS)
        elif oname == DEFAULT:
            goal, verdict = "<= 1.01", overhead.verdict(lo, hi, 1.01)
        else:
            goal, verdict = "-", ""
        lines.append(f"| {wname} | {oname} | {len(rows)} | {med:.4f} | {lo:.4f} .. {hi:.4f} | "
                     f"{ns:,.1f} | {ns_lo:,.1f} .. {ns_hi:,.1f} | {a_ns:,.0f} | {goal} | "
                     f"{verdict} |")
    lines += ["", "Each program of the tier, one run of each workload with bpf_stats on: ns per "
              "run (two clock reads of bpf_stats included), runs per NOP, and ns per NOP.\n",
              "| workload | program | ns per run | runs per op | ns per op |",
              "|---|---|---|---|---|"]
    for (oname, wname), rows in costs.items():
        total = 0.0
        for name, ns, per_op in rows:
            if not name.startswith(("iou_req", "iou_cqe")):
                continue  # the default tier's, which run per sample or per ring, not per request
            total += ns * per_op
            lines.append(f"| {wname} | `{name}` | {ns:,.0f} | {per_op:.3f} | {ns * per_op:,.1f} |")
        lines.append(f"| {wname} | all | | | {total:,.1f} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def run(a, daemon_cls, prog_stats, log, node, kernel, peer=None):
    """Measures and returns the section; a.build, a.pairs, a.runs, a.seconds as bench/run's."""
    loads = {w: overhead.nop_load(a.build, rings, a.seconds)
             for w, rings in overhead.nop_workloads().items() if w in WORKLOADS}
    daemon = lambda *extra: lambda: daemon_cls(a.build, list(extra))  # noqa: E731
    obs = observers(daemon, overhead.DAEMON_WAIT_S, peer)
    results = overhead.measure(obs, loads, a.pairs, log, min_pairs={}, runs=a.runs)
    costs = overhead.program_costs({TIER: obs[TIER].attach}, loads, prog_stats, log)
    return report(results, costs, a, node, kernel)
