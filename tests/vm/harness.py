"""iouscope's kernel-matrix harness: boots Debian kernels under QEMU (TCG) and runs a command.

tests/vm/run is the command-line entry point and calls main(); the steps live beside this file,
one module each, importable by their unit tests (test_<module>.py):
  common.py     paths, exit statuses, errors, log lines
  matrix.py     kernels.toml and --kernel
  packages.py   Debian package selection and apt
  initramfs.py  kernel modules, cpio, the guest's initramfs
  store.py      the cache: prepares a kernel (download, extract or build, initramfs), probes
  qemu.py       QEMU's command line, host CPU pinning, --append
  boot.py       one guest: boot, console, timeouts, status
  results.py    a guest's result and the summary table
  cli.py        the command line and --help
  pool.py       guests side by side (--jobs, --batch)
  kbuild.py     a kernel built from linux-source (the seeds entry)
This file ties them together: one guest per kernel of each run, the logs, the summary.
docs/VM.md describes the design. Standard library only: it runs with Debian's /usr/bin/python3
on a fresh machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pool
from boot import Guest
from cli import parse_args, root_image_for
from common import (DEFAULT_CACHE, DEFAULT_LOGS, EXIT_HARNESS, EXIT_USAGE, HarnessError, Log,
                    UsageError, find_tool)
from matrix import Kernel, load_matrix, select_kernels
from qemu import RUNNING, kill_qemu, qemu_binary
from results import RunResult, summary_table
from store import KernelStore, build_probe_tools

KEEP_LOG_RUNS = 10


def new_log_dir(root: Path) -> Path:
    """A directory of its own for this run (runs may overlap), with root/latest pointing to it;
    only the newest KEEP_LOG_RUNS runs are kept."""
    root.mkdir(parents=True, exist_ok=True)
    run = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    run.mkdir()
    latest = root / "latest"
    tmp = root / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run.name)
    os.replace(tmp, latest)
    runs = sorted(d for d in root.iterdir() if d.is_dir() and not d.is_symlink()
                  and re.fullmatch(r"[0-9]{8}-[0-9]{6}-[0-9]+", d.name))
    for old in runs[:-KEEP_LOG_RUNS]:
        shutil.rmtree(old, ignore_errors=True)
    return run


def list_kernels(kernels: list[Kernel], store: KernelStore) -> None:
    rows = [("NAME", "SUITE", "SERIES", "CACHED VERSION", "ARCHIVES")]
    for k in kernels:
        sel = store.cached_selection(k)
        rows.append((k.name, k.suite, f"{k.series}.x", sel.version if sel else "-",
                     " ".join(k.archives)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])


def run_one(job: pool.Job, store: KernelStore, log: Log,
            probes: tuple[dict[str, str], str] | None, logs_root: Path, slot: int = 0,
            label_output: bool = False) -> RunResult:
    """One guest: prepares its kernel, boots it and runs its run's command."""
    kernel, args, name = job.kernel, job.args, pool.name(job)
    log = log.for_kernel(name)
    result = RunResult(kernel=kernel.name)
    t0 = time.monotonic()
    try:
        p = store.prepare(kernel, log)
        result.version, result.release = p.selection.version, p.release
        result.seconds_prepare = time.monotonic() - t0
        log(f"kernel {p.release} (Debian {p.selection.version}) ready in "
            f"{result.seconds_prepare:.1f} s")
        if args.prepare_only:
            result.result, result.status = "pass", 0
        else:
            guest = Guest(p, args.command, args.env, store.root, logs_root / name, log,
                          timeout=args.timeout or kernel.timeout,
                          boot_timeout=args.boot_timeout or kernel.boot_timeout,
                          expect=args.expect_status, probe_config=probes[0],
                          probe_reason=probes[1], memory=args.memory or kernel.memory,
                          cpus=args.cpus or kernel.cpus, extra_append=args.kernel_append,
                          nvme_subsystem=args.nvme_subsystem, slot=slot,
                          root_image=root_image_for(args, kernel.name),
                          prefix_output=name if label_output else "")
            guest.run(result)
    except HarnessError as e:
        result.reason = str(e)
        log(f"FAILED: {e}")
    result.seconds_total = time.monotonic() - t0
    if not args.prepare_only:
        log(f"{result.result.upper()} in {result.seconds_total:.0f} s "
            f"(prepare {result.seconds_prepare:.0f} s, boot {result.seconds_boot:.0f} s, "
            f"command {result.seconds_command:.0f} s)"
            + (f": {result.reason}" if result.reason else ""))
    return result


def run_all(jobs: list[pool.Job], slots: int, store: KernelStore, log: Log,
            probes: tuple[dict[str, str], str] | None, logs_root: Path) -> list[RunResult]:
    """Every job, `slots` guests at a time (tests/vm/pool.py), results in the jobs' order.
    Kernels are prepared (downloads, builds) under the cache lock, one at a time."""
    # Several guests, or a labelled run (every run of --batch): each line says whose it is.
    label = len(jobs) > 1 or bool(getattr(jobs[0].args, "label", None))
    if slots == 1 or jobs[0].args.prepare_only:
        return [run_one(job, store, log, probes, logs_root, label_output=label) for job in jobs]
    durations = pool.RunDurations(store.root / "durations.json")
    return pool.run_pool(jobs, slots, durations,
                         lambda job, slot: run_one(job, store, log, probes, logs_root, slot=slot,
                                                   label_output=label), log)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = Log(verbose=args.verbose)
    try:
        kernels = load_matrix(args.matrix)
        store = KernelStore(Path(os.environ.get("IOUSCOPE_VM_CACHE") or DEFAULT_CACHE), log,
                            offline=args.offline, refresh=args.refresh)
        if args.list:
            list_kernels(kernels, store)
            return 0
        runs = args.runs if args.batch else [args]
        jobs = [pool.Job(i, run, k) for i, run in enumerate(runs)
                for k in select_kernels(kernels, run.kernel)]
        for job in jobs:
            images = getattr(job.args, "root_image", None)
            if images and root_image_for(job.args, job.kernel.name) is None:
                raise UsageError(f"--root-image gives no root to kernel {job.kernel.name}: "
                                 f"add {job.kernel.name}=FILE, or a FILE for every kernel")
        # Check the tools before downloading hundreds of megabytes.
        if not args.prepare_only:
            qemu_binary()
        for tool, pkg in (("apt-get", "apt"), ("dpkg-deb", "dpkg"), ("depmod", "kmod")):
            find_tool(tool, pkg)
        store.ensure_root()
    except UsageError as e:
        print(f"tests/vm/run: {e}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as e:
        print(f"tests/vm/run: {e}", file=sys.stderr)
        return EXIT_HARNESS

    logs_root = Path(os.environ.get("IOUSCOPE_VM_LOGS") or DEFAULT_LOGS)
    if not args.prepare_only:
        try:
            logs_root = new_log_dir(logs_root)
        except OSError as e:
            print(f"tests/vm/run: cannot create a log directory under {logs_root}: {e.strerror}; "
                  f"set IOUSCOPE_VM_LOGS", file=sys.stderr)
            return EXIT_HARNESS
    probes = None
    if not args.prepare_only:
        with store.lock():
            probes = build_probe_tools(store.root, log)
        if probes[1]:
            log(f"WARNING: capability probes unavailable: {probes[1]}")

    # A CI runner that gives up sends SIGTERM: turn it into the same clean-up as Ctrl-C, so
    # that no QEMU is left running behind it.
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        results = run_all(jobs, args.jobs, store, log, probes, logs_root)
    except KeyboardInterrupt:
        for proc in list(RUNNING):
            kill_qemu(proc)
        print("\ntests/vm/run: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Whoever read our output went away (e.g. `| head`); QEMU is already gone.
        sys.stdout = open(os.devnull, "w")
        return 141
    return report(args, runs, jobs, results)


def report(args: argparse.Namespace, runs: list[argparse.Namespace], jobs: list[pool.Job],
           results: list[RunResult]) -> int:
    """Each run's --results-json and summary table; the exit status of tests/vm/run."""
    for i, run in enumerate(runs):
        mine = [r for job, r in zip(jobs, results) if job.run == i]
        if run.results_json:
            run.results_json.write_text(json.dumps([dataclasses.asdict(r) for r in mine],
                                                   indent=1))
        if len(jobs) == 1 and not args.prepare_only and not args.batch:
            return results[0].exit_code()
        print()
        if args.batch:
            print(f"{run.label}:")
        print(summary_table(mine))
    return 0 if all(r.result in ("pass", "skip") for r in results) else 1
