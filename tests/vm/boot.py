"""One boot of a prepared kernel: the job share and disks of a guest, QEMU started with them,
its console streamed (the guest's "iouscope-vm: " lines are the harness's, the rest between
"command start" and "command end" is COMMAND's output), the timeouts enforced, and the
guest's status read back into a RunResult (docs/VM.md, "How it works", step 5)."""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from common import CHECKOUT, EXIT_HARNESS, Log, UsageError
from qemu import RUNNING, SUBSYSTEM_ADDRS, kill_qemu, qemu_binary, qemu_command, qemu_host_cpu
from results import RunResult, classify
from store import Prepared

# Starts the console lines of guest/init meant for the harness (the rest is the kernel's and
# COMMAND's).
MARK = "iouscope-vm: "
# Where a --root-image guest mounts the host root (tests/package/root-image's job runner).
ROOT_IMAGE_HOST = "/mnt/iouscope-vm/host"


def job_script(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    """The shell script the guest runs in the chroot: environment, directory, then exec."""
    lines = ["# written by tests/vm/run; run by the guest's init inside the chroot"]
    base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}
    for k, v in {**base, **env}.items():
        lines.append(f"export {k}={shlex.quote(v)}")
    lines.append(f"cd {shlex.quote(str(cwd))} || exit {EXIT_HARNESS}")
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines) + "\n"


class Guest:
    """One boot: streams the console, enforces the timeouts, collects the results."""

    def __init__(self, p: Prepared, argv: list[str], env: dict[str, str], cache: Path,
                 logs: Path, log: Log, timeout: int, boot_timeout: int, expect: int,
                 probe_config: dict[str, str], probe_reason: str, memory: str, cpus: int,
                 extra_append: str = "", nvme_subsystem: bool = False, slot: int = 0,
                 prefix_output: str = "", root_image: Path | None = None):
        self.p, self.argv, self.env, self.cache, self.logs, self.log = p, argv, env, cache, logs, log
        self.timeout, self.boot_timeout, self.expect = timeout, boot_timeout, expect
        self.probe_config, self.probe_reason = probe_config, probe_reason
        self.memory, self.cpus, self.extra_append = memory, cpus, extra_append
        self.nvme_subsystem = nvme_subsystem
        # --root-image: systemd boots that root; the host root is a mount inside it.
        self.root_image = root_image
        # With guests side by side, each command line says whose it is ("[bookworm] ...", or
        # "[vm-nvme/bookworm] ..." for a labelled run of a batch).
        self.slot = slot
        self.out_prefix = f"[{prefix_output}] " if prefix_output else ""
        self.tail: deque[str] = deque(maxlen=40)
        self.fatal = ""  # the guest's own account of why it failed, if it gave one

    def run(self, result: RunResult) -> None:
        qemu = qemu_binary()
        runs = self.cache / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{self.p.kernel.name}-", dir=runs))
        try:
            self._run(qemu, scratch, result)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run(self, qemu: str, scratch: Path, result: RunResult) -> None:
        job = scratch / "job"
        job.mkdir()
        disks, subsystem_disks = self._make_disks(scratch)
        self._write_job(job, result)
        cmd = self._command(qemu, job, disks, subsystem_disks)
        (self.logs / "qemu.cmdline").write_text(shlex.join(cmd) + "\n")
        t0, returncode, timed_out, t_ready, t_cmd_end = self._boot(cmd, result)

        end = time.monotonic()
        result.seconds_boot = (t_ready or end) - t0
        if t_ready:
            result.seconds_command = (t_cmd_end or end) - t_ready
        for name in ("dmesg", "capabilities", "status", "journal"):
            if (job / name).exists():
                shutil.copy(job / name, self.logs / name)
        self._judge(result, job / "status", returncode, timed_out, t_ready)

    def _make_disks(self, scratch: Path) -> tuple[list[Path], list[Path]]:
        """The sparse backing files of the two NVMe controllers, and of the subsystem's two
        namespaces with --nvme-subsystem."""
        disks = []
        for name in ("nvme-polled.img", "nvme-unpolled.img"):
            disk = scratch / name
            with open(disk, "wb") as f:
                f.truncate(1 << 30)  # sparse: costs no disk space until written
            disks.append(disk)
        subsystem_disks = []
        for name in (("nvme-shared.img", "nvme-shared-meta.img") if self.nvme_subsystem else ()):
            disk = scratch / name
            with open(disk, "wb") as f:
                f.truncate(256 << 20)
            subsystem_disks.append(disk)
        return disks, subsystem_disks

    def _write_job(self, job: Path, result: RunResult) -> None:
        """The job share's job.sh and config, which the guest's init reads, and the command in
        the logs."""
        env = {"IOUSCOPE_VM": "1", "IOUSCOPE_VM_KERNEL": self.p.kernel.name,
               "IOUSCOPE_VM_MODULES": "/run/iouscope-vm-modules",
               "IOUSCOPE_VM_DEB_VERSION": self.p.selection.version, **self.env}
        cwd = Path(ROOT_IMAGE_HOST + str(CHECKOUT)) if self.root_image else CHECKOUT
        (job / "job.sh").write_text(job_script(self.argv, cwd, env))
        # Paths the guest must keep visible even if they lie below a directory it covers with
        # a tmpfs (/tmp, /var/tmp, /run): the checkout and the probe tools.
        keep = [str(CHECKOUT)] + [str(Path(v).parent) for k, v in self.probe_config.items()
                                  if k == "PROBE_CHECK"]
        config = {"KEEP_PATHS": " ".join(keep), **self.probe_config}
        if self.root_image:
            config["ROOT_IMAGE"] = "vda"
        if self.nvme_subsystem:
            config["NVME_SUBSYSTEM"] = " ".join(f"0000:00:{a[2:]}.0" for a in SUBSYSTEM_ADDRS)
        if self.probe_reason:
            config["PROBE_CHECK_REASON"] = self.probe_reason
        (job / "config").write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in config.items()))

        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / "command").write_text(job_script(self.argv, cwd, env))
        result.log_dir = str(self.logs)

    def _command(self, qemu: str, job: Path, disks: list[Path],
                 subsystem_disks: list[Path]) -> list[str]:
        """QEMU's command line for this guest, pinned to its host CPU under single-threaded TCG."""
        tcg_thread = os.environ.get("IOUSCOPE_VM_TCG_THREAD") or self.p.kernel.tcg_thread
        if tcg_thread not in ("single", "multi"):
            raise UsageError(f"IOUSCOPE_VM_TCG_THREAD must be single or multi, not {tcg_thread!r}")
        host_cpu = qemu_host_cpu(tcg_thread, slot=self.slot)
        if host_cpu is not None:
            self.log(f"QEMU pinned to host CPU {host_cpu} (single-threaded TCG; docs/VM.md, "
                     "\"Lost NVMe doorbells\")")
        if self.extra_append:
            self.log(f"kernel command line: appended {self.extra_append} (--append)")
        return qemu_command(qemu, self.p, job, disks, self.memory, self.cpus, tcg_thread, host_cpu,
                            extra_append=self.extra_append, subsystem_disks=subsystem_disks,
                            root_image=self.root_image)

    def _boot(self, cmd: list[str], result: RunResult):
        """Starts QEMU, streams its console until the guest powers off or a timeout, and leaves
        no QEMU behind. Returns (QEMU's start, its exit status, why it timed out or "", when
        COMMAND started, when it ended), the times from time.monotonic()."""
        console = open(self.logs / "console.log", "w", errors="replace")
        qerr = open(self.logs / "qemu.stderr", "wb")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=qerr, start_new_session=True)
        RUNNING.add(proc)
        timed_out = ""
        try:
            timed_out, t_ready, t_cmd_end = self._stream(proc, console, t0, result)
        except KeyboardInterrupt:
            kill_qemu(proc)
            raise
        finally:
            if timed_out or proc.poll() is None:
                kill_qemu(proc)
            proc.wait()
            RUNNING.discard(proc)
            console.close()
            qerr.close()
        return t0, proc.returncode, timed_out, t_ready, t_cmd_end

    def _stream(self, proc: subprocess.Popen, console, t0: float, result: RunResult):
        """Reads the console line by line into console.log, the tail and _on_line until QEMU
        exits or a deadline passes. Returns (why it timed out or "", t_ready, t_cmd_end)."""
        phase = "boot"  # boot -> command -> shutdown
        t_ready = t_cmd_end = None
        deadline_boot = t0 + self.boot_timeout
        deadline = t0 + self.timeout
        buf = b""
        timed_out = ""
        fd = proc.stdout.fileno()
        while True:
            now = time.monotonic()
            if phase == "boot" and now > deadline_boot:
                timed_out = f"timed out: the guest was not ready after {self.boot_timeout} s"
                break
            if now > deadline:
                timed_out = f"timed out after {self.timeout} s (phase: {phase})"
                break
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            if len(buf) > 1 << 20:  # a megabyte without a newline: pass it on as a line
                lines.append(buf)
                buf = b""
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                console.write(line + "\n")
                self.tail.append(line)
                phase, t_ready, t_cmd_end = self._on_line(line, phase, t0, t_ready, t_cmd_end,
                                                          result)
        if buf:
            line = buf.decode(errors="replace").rstrip("\r")
            console.write(line + "\n")
            self.tail.append(line)
            if phase == "command":
                print(self.out_prefix + line, flush=True)
        return timed_out, t_ready, t_cmd_end

    def _judge(self, result: RunResult, status_file: Path, returncode: int, timed_out: str,
               t_ready: float | None) -> None:
        """The result from the status file the guest wrote, or the reason there is none."""
        if timed_out:
            result.reason = timed_out
            self._report_tail(result.reason)
            return
        if not status_file.exists():
            qerr_text = (self.logs / "qemu.stderr").read_text(errors="replace").strip()
            if returncode != 0:
                result.reason = f"qemu exited with status {returncode}" + (
                    f": {qerr_text.splitlines()[-1]}" if qerr_text else " and said nothing")
            elif self.fatal:
                result.reason = self.fatal
            else:
                result.reason = "the guest stopped without reporting an exit status"
            self._report_tail(result.reason)
            return
        try:
            status = int(status_file.read_text().strip())
        except ValueError:
            result.reason = f"unreadable status file: {status_file.read_text()!r}"
            return
        if status == EXIT_HARNESS and t_ready is None:
            result.reason = self.fatal or "the guest could not set itself up"
            self._report_tail(result.reason)
            return
        result.status = status
        result.result = classify(status, self.expect)
        if result.result == "fail":
            result.reason = f"exit status {status}" + (f", expected {self.expect}" if self.expect else "")
        elif result.result == "skip":
            result.reason = "the command exited 77 (skipped)"

    def _on_line(self, line, phase, t0, t_ready, t_cmd_end, result):
        at = line.find(MARK)
        panic = line.find("Kernel panic - not syncing")
        if panic >= 0 and not self.fatal:
            self.fatal = line[panic:].strip()
        if phase == "command":
            if at >= 0 and line[at + len(MARK):].startswith("==== command end"):
                return "shutdown", t_ready, time.monotonic()
            print(self.out_prefix + line, flush=True)
            return phase, t_ready, t_cmd_end
        if at < 0:
            if self.log.verbose:
                self.log(f"console: {line}")
            return phase, t_ready, t_cmd_end
        msg = line[at + len(MARK):]
        if msg.startswith("FATAL: ") and not self.fatal:
            self.fatal = "guest setup failed: " + msg[len("FATAL: "):]
        if msg.startswith("==== command start"):
            self.log(f"booted in {time.monotonic() - t0:.1f} s (kernel {result.seconds_kernel:.1f} s, "
                     f"then devices, mounts and probes); running: {shlex.join(self.argv)}")
            return "command", time.monotonic() if t_ready is None else t_ready, t_cmd_end
        if msg == "ready":
            return phase, time.monotonic(), t_cmd_end
        if msg.startswith("init started"):
            result.seconds_kernel = time.monotonic() - t0
        if msg.startswith("cap "):
            result.capabilities.append(msg[4:])
        if not msg.startswith("==== "):
            self.log(msg)
        return phase, t_ready, t_cmd_end

    def _report_tail(self, reason: str) -> None:
        if not self.tail:
            self.log(f"FAILED: {reason}; the guest printed nothing on its console")
            return
        self.log(f"FAILED: {reason}; last console lines:")
        for line in self.tail:
            print(f"    | {line}", file=sys.stderr)
        self.log(f"full console log: {self.logs / 'console.log'}")
