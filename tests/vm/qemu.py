"""QEMU's side of a boot: the binary, the host CPU a guest is pinned to, the guest kernel's
command line and what --append may add to it, the command line with its NVMe devices, and the
QEMU processes running now (killed on an interrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from common import find_tool
from store import Prepared


def qemu_binary() -> str:
    return find_tool(os.environ.get("IOUSCOPE_VM_QEMU") or "qemu-system-x86_64",
                     "qemu-system-x86")


def qemu_host_cpu(tcg_thread: str, env: dict[str, str] | None = None, slot: int = 0) -> int | None:
    """The one host CPU a single-threaded TCG guest runs on, or None to leave QEMU unpinned.
    Guests that run side by side (--jobs) take slots 0, 1, ...: the last allowed CPU, the one
    before it, and so on, so each has a CPU of its own.

    Debian bookworm's QEMU 7.2 drops the guest's memory barriers under single-threaded TCG
    (`tcg_gen_mb` emits nothing without CF_PARALLEL; QEMU 8.1 changed that), while its device
    models run in other host threads. The NVMe shadow-doorbell handshake is a store then a load
    on each side (driver: SQ tail, then event index; device: event index, then SQ tail); without
    the guest's barrier the host CPU reorders it, both sides skip the doorbell, and commands sit
    in the submission queue until the driver's 30 s timeout (docs/VM.md, "Why QEMU runs pinned").
    Threads on one logical CPU see each other's memory operations in program order, so pinning
    the whole QEMU process there closes the race. Multi-threaded TCG emits the barriers but
    patches code across vCPUs unsafely (a stale int3 after text_poke_bp), so it is not the fix.
    IOUSCOPE_VM_PIN=0 turns pinning off (to measure the race)."""
    env = os.environ if env is None else env
    if tcg_thread != "single" or env.get("IOUSCOPE_VM_PIN", "1") == "0":
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[-1 - slot % len(allowed)] if allowed else None


# The words of the guest kernel's command line the harness depends on, and why: --append may
# not set them again (for rdinit= and panic= the last one wins; a second console= takes
# /dev/console away from the serial port the harness reads).
ESSENTIAL_KERNEL_PARAMS = {
    "console": "the harness reads the guest through console=ttyS0,115200, and another console= "
               "would take /dev/console (init's and COMMAND's output) away from that port",
    "rdinit": "rdinit=/init starts the harness's guest/init from the initramfs, which mounts the "
              "host root, runs COMMAND and reports its status",
    "panic": "panic=-1 (with QEMU's -no-reboot) ends the run as soon as the guest panics; "
             "another value makes a panicked guest wait (panic=0: until the timeout)",
}


def kernel_param_names(text: str) -> list[str]:
    """The parameter names in a kernel command line, split as the kernel's next_arg() does:
    words end at white space outside double quotes, a leading quote is dropped, and a word's
    name is what precedes its first '=' (the whole word if it has none)."""
    names = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        in_quote = text[i] == '"'
        if in_quote:
            i += 1
        start, equals = i, None
        while i < n and (in_quote or not text[i].isspace()):
            if equals is None and text[i] == "=":
                equals = i
            if text[i] == '"':
                in_quote = not in_quote
            i += 1
        names.append(text[start:i if equals is None else equals].strip('"'))
    return names


def check_kernel_append(value: str) -> str | None:
    """Why one --append value cannot go on the guest kernel's command line, or None if it can."""
    if "\n" in value:
        return (f"--append {value!r}: contains a newline; the kernel command line is one line "
                "(separate words with spaces, or give --append again)")
    if "\0" in value:
        return (f"--append {value!r}: contains a NUL byte, which would end the kernel command "
                "line there")
    for name in kernel_param_names(value):
        if name in ESSENTIAL_KERNEL_PARAMS:
            return (f"--append {value!r}: may not set {name}= because "
                    f"{ESSENTIAL_KERNEL_PARAMS[name]}")
    return None


def qemu_command(qemu: str, p: Prepared, job_dir: Path, disks: list[Path], memory: str,
                 cpus: int, tcg_thread: str = "single", host_cpu: int | None = None,
                 extra_append: str = "", subsystem_disks: list[Path] | None = None,
                 root_image: Path | None = None) -> list[str]:
    """QEMU's command line for one boot. extra_append (from --append, already checked by
    check_kernel_append) goes on the kernel command line after the harness's own words.
    root_image is a virtio disk (/dev/vda) that guest/init hands to systemd as the root; QEMU
    writes the guest's changes to a temporary overlay (snapshot=on), never to the image."""
    append = " ".join([
        "console=ttyS0,115200", "rdinit=/init",
        # A panicking guest reboots at once and -no-reboot turns that into QEMU exiting.
        "panic=-1",
        # Speculation mitigations only cost time under TCG; these guests run trusted tests.
        "mitigations=off",
        "loglevel=6",
        # systemd's status lines would interleave with COMMAND's output on the one console.
        *(["systemd.show_status=0"] if root_image else []),
        *([extra_append.strip()] if extra_append.strip() else []),
    ])
    pin = ["taskset", "--cpu-list", str(host_cpu)] if host_cpu is not None else []
    cmd = [*pin, qemu, "-nodefaults", "-no-user-config", "-machine", "pc",
           "-accel", f"tcg,thread={tcg_thread}", "-cpu", "max", "-smp", str(cpus), "-m", memory,
           "-display", "none", "-monitor", "none", "-no-reboot",
           "-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console",
           "-kernel", str(p.vmlinuz), "-initrd", str(p.initramfs), "-append", append,
           "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
           "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
           "-fsdev", f"local,id=job,path={job_dir},security_model=none,multidevs=remap",
           "-device", "virtio-9p-pci,fsdev=job,mount_tag=job"]
    # Fixed PCI addresses: the guest's init binds the second controller by address, after
    # switching poll_queues off (guest/init explains why).
    for i, (disk, addr, serial) in enumerate(zip(disks, ("0x10", "0x11"),
                                                 ("iou-polled", "iou-unpolled"))):
        cmd += ["-drive", f"file={disk},if=none,id=nvm{i},format=raw,cache=unsafe",
                "-device", f"nvme,serial={serial},drive=nvm{i},addr={addr}"]
    cmd += nvme_subsystem_devices(subsystem_disks)
    if root_image:
        cmd += ["-drive", f"file={root_image},if=virtio,format=raw,snapshot=on"]
    return cmd


# PCI addresses of the two controllers of --nvme-subsystem (guest/init binds them in order).
SUBSYSTEM_ADDRS = ("0x12", "0x13")


def nvme_subsystem_devices(disks: list[Path]) -> list[str]:
    """QEMU arguments for --nvme-subsystem: one NVMe subsystem with two controllers that share
    two namespaces, so that Linux sees them through multipath (a head disk and char device per
    namespace, a hidden path disk per controller). disks: the plain namespace's backing file,
    then the one whose blocks carry 8 bytes of metadata in a separate buffer (ms=8, mset=0), as
    passthrough users of end-to-end protection send. Empty when disks is."""
    if not disks:
        return []
    plain, meta = disks
    cmd = ["-device", "nvme-subsys,id=iou-subsys,nqn=iou-multipath"]
    # One serial number for both: it belongs to the subsystem (QEMU refuses two).
    for addr in SUBSYSTEM_ADDRS:
        cmd += ["-device", f"nvme,serial=iou-shared,subsys=iou-subsys,addr={addr}"]
    for nsid, (disk, extra) in enumerate(((plain, ""), (meta, ",ms=8,mset=0")), start=1):
        cmd += ["-drive", f"file={disk},if=none,id=iou-ns{nsid},format=raw,cache=unsafe",
                "-device", f"nvme-ns,drive=iou-ns{nsid},nsid={nsid},shared=on{extra}"]
    return cmd


# QEMU processes of the guests running now: an interrupt kills them all, whichever thread
# started them.
RUNNING: set[subprocess.Popen] = set()


def kill_qemu(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
