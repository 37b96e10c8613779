#!/usr/bin/python3
"""Seed 002's table on the seeds kernel: SQ thread CPU over IOPS x sq_thread_idle in nanoseconds.

    tests/vm/run --kernel seeds -- bench/seed002.py [--seconds S] [--build DIR]

Seed 002 (ns sq_thread_idle) reports the SQ thread's CPU for 2k to 10k IOPS and idle times of 10
to 510 us, from fio on NVMe. This drives the same grid on the seeds kernel with paced NOPs
(iouscope-load --ring sqpoll,idle_ns=T,rate=R,batch=1: one SQE every 1/R s, as fio's
rate_iops does), the SQ thread pinned to CPU 1 and the submitter to CPU 0, and prints, per cell:

  * the SQ thread's CPU as iouscoped measures it (iouscope_sqthread_cpu_seconds_total's
    rate between two samples of its JSON API);
  * the kernel's own figure for the same thread, /proc/PID/task/TID/schedstat;
  * what the advisor predicts, from the work gaps of one run per rate at an idle of 1 s (the
    thread never sleeps, so the gaps are the submitter's own): model/advisor's idle_cost_fixed
    at each T (build/iouscope-idle-model), the curve `iouscope advise` draws;
  * the same model fed the cell's own gaps, which isolates the model from the change of gaps
    that sleeping and waking bring;
  * the idle sleeps per second the daemon counted, and what the measured CPU exceeds the
    model on the cell's gaps by, per sleep: the CPU of one sleep and wake-up, which the model
    does not charge.

Runs inside a guest: it needs the seeds kernel (IORING_SETUP_IDLE_NS) and root for the daemon.
Prints a Markdown table for docs/BENCHMARKS.md, "Seed 002's table on the seeds kernel".
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The seed's grid: idle times (us) per IOPS, and the SQ thread CPU (%) it reports for them.
SEED = {
    2000: [(10, 4), (60, 14), (110, 24), (160, 34.7), (210, 44.7), (260, 55), (310, 65.1),
           (360, 75.4), (410, 85.4), (460, 95.7), (510, 100)],
    4000: [(10, 7.7), (60, 28.2), (110, 48.5), (160, 69), (210, 90), (260, 100)],
    6000: [(10, 11.3), (60, 42), (110, 73), (160, 100)],
    8000: [(10, 15.3), (60, 56.3), (110, 97), (160, 100)],
    10000: [(10, 19), (60, 70), (110, 100)],
}
REFERENCE_IDLE_NS = 1_000_000_000  # spins through every gap: the gaps are the submitter's


def log(msg):
    print(f"seed002: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, build):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [os.path.join(build, "iouscoped"), f"--web.listen-address=127.0.0.1:{self.port}",
             "--sample.interval=250ms", "--probes.deep"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.snapshot()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("iouscoped did not answer within 60 s")

    def snapshot(self):
        url = f"http://127.0.0.1:{self.port}/api/v1/snapshot"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def schedstat_s(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def thread_of(snap, tid):
    return next((t for t in snap["threads"] if t["tid"] == tid), None)


def run_cell(a, daemon, rate, idle_ns, workdir):
    """One load at (rate, idle_ns); returns the measurements and the two snapshot files."""
    load = subprocess.Popen(
        ["taskset", "-c", "0", os.path.join(a.build, "iouscope-load"), "--ring",
         f"sqpoll,idle_ns={idle_ns},rate={rate},batch=1,cpu=1",
         "--duration", f"{a.seconds + 3}s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        setup = load.stdout.readline()
        fields = dict(kv.split("=", 1) for kv in setup.split()[1:] if "=" in kv)
        if not setup.startswith("setup") or int(fields.get("sq_thread", -1)) <= 0:
            raise RuntimeError(f"unexpected load output {setup!r}: {load.stderr.read()}")
        pid, tid = int(fields["pid"]), int(fields["sq_thread"])
        time.sleep(1.5)  # past the ramp-up and at least two samples of the thread
        ends = []
        for i in range(2):
            if i:
                time.sleep(a.seconds)
            text = daemon.snapshot()
            ends.append((text, schedstat_s(pid, tid), time.monotonic()))
    finally:
        load.kill()
        load.wait()
    (ta, ka, wa), (tb, kb, wb) = ends
    sa, sb = json.loads(ta), json.loads(tb)
    window = sb["monotonic_seconds"] - sa["monotonic_seconds"]
    ra, rb = thread_of(sa, tid), thread_of(sb, tid)
    if not ra or not rb:
        raise RuntimeError(f"SQ thread {tid} missing from the daemon's snapshots")
    files = []
    for name, text in (("a", ta), ("b", tb)):
        path = os.path.join(workdir, f"{rate}-{idle_ns}-{name}.json")
        with open(path, "w") as f:
            f.write(text)
        files.append(path)
    ring_a = next(r for r in sa["rings"] if r["sq_thread"] == tid)
    ring_b = next(r for r in sb["rings"] if r["id"] == ring_a["id"])
    return {
        "tid": tid,
        "files": files,
        "iops": (ring_b["sqes_total"] - ring_a["sqes_total"]) / window,
        "iouscope": (rb["cpu_seconds"] - ra["cpu_seconds"]) / window,
        "schedstat": (kb - ka) / (wb - wa),
        "sleeps": (rb["sleeps"] - ra["sleeps"]) / window,
        "idle_setting": rb["idle_setting_seconds"],
    }


def model(a, files, tid, settings_ns):
    out = subprocess.run([os.path.join(a.build, "iouscope-idle-model"), *files, str(tid),
                          *map(str, settings_ns)], capture_output=True, text=True, check=True)
    return {int(l.split()[0]): float(l.split()[1]) for l in out.stdout.splitlines()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=4, help="measured window per cell")
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "build"))
    p.add_argument("--rates", default=",".join(map(str, SEED)),
                   help="comma-separated IOPS of the seed's grid to run (default: all)")
    a = p.parse_args()
    rates = [int(r) for r in a.rates.split(",")]
    if any(r not in SEED for r in rates):
        p.error(f"--rates: the seed's grid has {', '.join(map(str, SEED))}")
    daemon = Daemon(a.build)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as workdir:
            for rate in rates:
                log(f"{rate} IOPS: reference run at idle 1 s")
                ref = run_cell(a, daemon, rate, REFERENCE_IDLE_NS, workdir)
                settings = [us * 1000 for us, _ in SEED[rate]]
                predicted = model(a, ref["files"], ref["tid"], settings)
                for us, seed_cpu in SEED[rate]:
                    cell = run_cell(a, daemon, rate, us * 1000, workdir)
                    own = model(a, cell["files"], cell["tid"], [us * 1000])[us * 1000]
                    if abs(cell["idle_setting"] - us * 1e-6) > 1e-12:
                        raise RuntimeError(f"idle {us} us read back as {cell['idle_setting']} s")
                    rows.append((rate, us, seed_cpu, cell, predicted[us * 1000], own))
                    log(f"  {us:>3} us: {cell['iops']:.0f} IOPS, iouscope "
                        f"{cell['iouscope'] * 100:.1f} %, schedstat {cell['schedstat'] * 100:.1f} %, "
                        f"predicted {predicted[us * 1000] * 100:.1f} %")
    finally:
        daemon.stop()
    print("| IOPS (seed) | idle | IOPS run | seed's CPU | iouscope | schedstat | "
          "advisor predicts | model on the cell's gaps | sleeps/s | excess per sleep |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate, us, seed_cpu, cell, pred, own in rows:
        excess = ((cell["iouscope"] - own) / cell["sleeps"] * 1e6) if cell["sleeps"] >= 1 else None
        print(f"| {rate // 1000}k | {us} us | {cell['iops']:.0f} | {seed_cpu:g} % | "
              f"{cell['iouscope'] * 100:.1f} % | {cell['schedstat'] * 100:.1f} % | "
              f"{pred * 100:.1f} % | {own * 100:.1f} % | {cell['sleeps']:.0f} | "
              f"{'-' if excess is None else f'{excess:.0f} us'} |")


if __name__ == "__main__":
    main()
