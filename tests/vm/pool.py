"""Guests side by side: one pool of host-CPU slots for the guests of one or several runs
(tests/vm/run --jobs N, and --batch FILE for several runs at once), longest guest first.

A run is one tests/vm/run invocation's worth of work: its kernels, its guest command and the
options that shape a guest (--append, --nvme-subsystem, --expect-status ...). Several runs given
together share the slots, so that the short guests of one fill the time the other's last long
guest would leave a slot idle. Each worker keeps one slot for all the guests it boots, so that a
guest runs pinned to a host CPU no other guest of the pool uses (qemu.qemu_host_cpu).

Standard library only; nothing here boots anything: the caller passes the function that does."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import shlex
import threading
from pathlib import Path
from typing import Any, Callable

# A run's label names its guests' output lines ("[LABEL/kernel] ...") and its log directory.
LABEL = re.compile(r"[A-Za-z0-9_.-]+")
# What a line of a --batch file may not set: the pool's own options, given once for all runs.
POOL_ONLY = ("--jobs", "--batch", "--list", "--prepare-only", "--refresh", "--offline",
             "-v", "--verbose", "--matrix")


@dataclasses.dataclass
class Job:
    """One guest to boot: a kernel of a run."""
    run: int                 # which run (its place in the batch; 0 without --batch)
    args: argparse.Namespace  # the run's options and command
    kernel: Any              # matrix.Kernel


def batch_lines(text: str) -> list[list[str]]:
    """The argument lists of a --batch file: one run per line, shell-quoted; blank lines and
    lines starting with # are skipped. Raises ValueError for a line shlex cannot split or one
    that sets a pool-wide option."""
    runs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise ValueError(f"line {number}: {e}") from None
        head = words[:words.index("--")] if "--" in words else words
        for word in head:
            if word.split("=", 1)[0] in POOL_ONLY:
                raise ValueError(f"line {number}: {word.split('=', 1)[0]} is the pool's, given "
                                 f"once on the command line, not per run")
        runs.append(words)
    if not runs:
        raise ValueError("no run in it (one tests/vm/run argument list per line)")
    return runs


class RunDurations:
    """How long each kernel's guest took the last time its run's command ran, kept in the cache
    (durations.json), so that guests side by side start longest first: with two slots, the
    longest guest left for last would run alone at the end. Only the order depends on it; a
    missing or unreadable file gives the given order. A guest that failed keeps its earlier
    figure (a failure can end a guest early), and a kernel without one starts first. Keyed by
    kernel and by the guest command with its options, which set what a guest runs."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.table = json.loads(path.read_text())
            if not isinstance(self.table, dict):
                self.table = {}
        except (OSError, ValueError):
            self.table = {}

    @staticmethod
    def key(args: argparse.Namespace) -> str:
        images = getattr(args, "root_image", None) or {}
        words = [*args.command, str(getattr(args, "kernel_append", "")),
                 str(getattr(args, "nvme_subsystem", False)),
                 *(f"{k}={v}" for k, v in sorted(images.items()))]
        return hashlib.sha256("\0".join(words).encode()).hexdigest()[:16]

    def last(self, job: Job) -> float:
        value = self.table.get(self.key(job.args), {}).get(job.kernel.name, 0.0)
        return float(value) if isinstance(value, (int, float)) else 0.0

    def longest_first(self, jobs: list[Job]) -> list[Job]:
        """Jobs without a figure first (any of them may be the longest), then by their last
        time, longest first; ties keep the given order."""
        return sorted(jobs, key=lambda job: -(self.last(job) or float("inf")))

    def record(self, done: list[tuple[Job, Any]]) -> None:
        """Keeps each passed guest's seconds_total (results.RunResult) for its run's command."""
        for job, result in done:
            if result.result == "pass":
                mine = self.table.setdefault(self.key(job.args), {})
                mine[job.kernel.name] = round(result.seconds_total, 1)
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.table, indent=1, sort_keys=True) + "\n")
            tmp.replace(self.path)
        except OSError:
            pass  # an order hint only: the next run falls back to the given order


def run_pool(jobs: list[Job], slots: int, durations: RunDurations,
             boot: Callable[[Job, int], Any], log: Callable[[str], None]) -> list[Any]:
    """Boots every job, `slots` at a time, longest first; returns boot()'s results in the
    jobs' order. boot(job, slot) runs one guest on the slot's host CPU."""
    queue = durations.longest_first(list(jobs))
    known = [f"{name(job)} {durations.last(job):.0f} s" for job in queue if durations.last(job)]
    if known:
        log(f"longest first, by the last run of each command: {', '.join(known)}")
    order = {id(job): i for i, job in enumerate(jobs)}
    results: dict[int, Any] = {}
    lock = threading.Lock()

    def worker(slot: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            results[order[id(job)]] = boot(job, slot)

    workers = [threading.Thread(target=worker, args=(slot,), daemon=True)
               for slot in range(min(slots, len(jobs)))]
    for w in workers:
        w.start()
    for w in workers:
        while w.is_alive():
            w.join(0.5)  # a timed join, so that SIGINT/SIGTERM reach the main thread
    ordered = [results[i] for i in range(len(jobs))]
    durations.record(list(zip(jobs, ordered)))
    return ordered


def name(job: Job) -> str:
    """A guest's name in output lines and logs: its kernel, or LABEL/kernel for a labelled run."""
    label = getattr(job.args, "label", None)
    return f"{label}/{job.kernel.name}" if label else job.kernel.name
