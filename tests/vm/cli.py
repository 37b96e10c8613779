"""tests/vm/run's command line: the --help text, the options and their checks, and the runs of
--batch FILE, each parsed as a command line of its own."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

import pool
from common import (CHECKOUT, DEFAULT_CACHE, DEFAULT_LOGS, DEFAULT_MATRIX, EXIT_HARNESS,
                    EXIT_TIMEOUT, EXIT_USAGE, STATUS_SKIP)
from qemu import check_kernel_append


HELP_DESCRIPTION = """\
Boots Debian kernels under QEMU (TCG, no KVM needed) and runs COMMAND inside them.

COMMAND runs as root in the checkout directory ({checkout}) inside the guest. The guest's root
is the host's root file system, shared read-only over 9p and chrooted into, so the checkout and
an already built build/ directory are visible at the same paths (also when the checkout lies
below /tmp). /tmp, /var/tmp, /run and /dev/shm are empty tmpfs, /boot a tmpfs holding the
guest kernel's config-RELEASE, everything else is read-only; HOME is /root. proc, sysfs,
devtmpfs, bpffs, tracefs, debugfs and cgroup2 are the guest's own. Loopback is up; there is no
other network device. COMMAND's stdout and stderr (one pipe) are streamed to stdout, each line
starting with "[kernel] " when several kernels run; the harness's own messages, prefixed with
the kernel's name, go to stderr.

Every guest has:
  /dev/nvme0n1, /dev/ng0n1   emulated NVMe whose driver has poll_queues=1 (queue/io_poll = 1);
                             ng0n1 is the passthrough char device (kernels 5.13 and later)
  /dev/nvme1n1, /dev/ng1n1   a second NVMe controller probed without poll queues (io_poll = 0)
  /dev/nullb0                null_blk, blk-mq, 2 submit queues of which 1 polled
  $IOUSCOPE_VM_MODULES     a root holding the guest kernel's lib/modules, for
                             modprobe -d "$IOUSCOPE_VM_MODULES" (/run/iouscope-vm-modules)
With --nvme-subsystem also, bound after the two above (controllers nvme2 and nvme3), both with
poll queues: two controllers of one NVMe subsystem sharing namespace 1 (plain) and namespace 2
(8 bytes of metadata per block in a separate buffer); with multipath (Debian's default) each
namespace is one head disk and char device (/dev/nvme<S>n1, /dev/ng<S>n1; S is the subsystem's
instance, 3 on 6.1) over a hidden path disk per controller (nvme<S>c2n1, nvme<S>c3n1).
Before COMMAND starts the guest reports its kernel's capabilities (BTF, module BTF of nvme,
which fentry/fexit/kprobe/tp_btf programs load and attach, each block device's io_poll).

Kernel packages come from the Debian archive through apt with a private sources list and
state directory per matrix entry (the host's apt configuration is only read), newest version
of each suite, and are cached with the extracted trees and initramfs images, so a second run
downloads nothing. Package lists are refreshed when older than refresh_hours (kernels.toml)."""

HELP_EPILOG = """\
exit status:
  one kernel     COMMAND's exit status; {timeout} if the guest timed out; {harness} if the harness
                 failed (download, missing qemu, guest crashed or gave no status); {usage} for a
                 usage error (bad option, unknown kernel, invalid matrix file)
  several/all    0 when every kernel passed or skipped, 1 when any failed; {usage}/{harness} as above
  A kernel passes when COMMAND exits with --expect-status (default 0), is skipped when it
  exits {skip} (automake's convention), and fails otherwise.

environment:
  IOUSCOPE_VM_CACHE   cache directory (default {cache})
  IOUSCOPE_VM_QEMU    the QEMU binary (default qemu-system-x86_64 from PATH)
  IOUSCOPE_VM_TCG_THREAD
                        single or multi: overrides tcg_thread of the matrix
  IOUSCOPE_VM_LOGS    logs, one directory per run (the newest 10 are kept, "latest" links
                        to the newest), in it per kernel: console.log, dmesg, capabilities,
                        qemu.cmdline, qemu.stderr, command, status (default {logs})
  Inside the guest COMMAND sees IOUSCOPE_VM=1, IOUSCOPE_VM_KERNEL=<name>, IOUSCOPE_VM_MODULES,
  IOUSCOPE_VM_DEB_VERSION=<Debian version> and whatever --env sets; nothing else of the
  caller's environment.

files:
  {matrix}   the kernel matrix (--matrix to use another)
  tests/vm/guest/init     the guest's PID 1
  docs/VM.md              design, cache layout, adding a kernel, measured timings

examples:
  tests/vm/run --list
  tests/vm/run --kernel bookworm -- uname -r
  tests/vm/run --kernel all -- tests/vm/guest-tests
  tests/vm/run --kernel all --expect-status 42 -- tests/vm/smoke --exit-with 42
  tests/vm/run --kernel sid --prepare-only"""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> Parser:
    fmt = {"checkout": CHECKOUT, "timeout": EXIT_TIMEOUT, "harness": EXIT_HARNESS,
           "usage": EXIT_USAGE, "skip": STATUS_SKIP, "cache": DEFAULT_CACHE, "logs": DEFAULT_LOGS,
           "matrix": DEFAULT_MATRIX.relative_to(CHECKOUT)}
    p = Parser(prog="tests/vm/run",
               usage="tests/vm/run --kernel NAME[,NAME...]|all [OPTIONS] -- COMMAND [ARG...]\n"
                     "       tests/vm/run --kernel NAME|all --prepare-only\n"
                     "       tests/vm/run --list",
               description=HELP_DESCRIPTION.format(**fmt), epilog=HELP_EPILOG.format(**fmt),
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel", metavar="NAME", help="a matrix entry, a comma-separated list of "
                   "them, or 'all' (one after another, then a summary table)")
    p.add_argument("--list", action="store_true", help="list the matrix (and cached versions) and exit")
    p.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX, metavar="FILE",
                   help="matrix file (default: %(default)s)")
    p.add_argument("--timeout", type=int, metavar="SECONDS",
                   help="per-kernel limit from boot to power-off, overriding the matrix (default "
                        "there: 1800); a guest still running then is killed and fails")
    p.add_argument("--boot-timeout", type=int, metavar="SECONDS",
                   help="limit for booting until COMMAND starts, overriding the matrix")
    p.add_argument("--expect-status", type=int, default=0, metavar="N",
                   help="the exit status that counts as a pass (default 0)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set an environment variable for COMMAND (repeatable)")
    p.add_argument("--memory", metavar="SIZE", help="guest memory, e.g. 2G (default from the matrix)")
    p.add_argument("--cpus", type=int, metavar="N", help="guest vCPUs (default from the matrix)")
    p.add_argument("--append", action="append", default=[], metavar="ARGS", dest="kernel_append",
                   help="add ARGS to the guest kernel's command line, after the harness's own "
                        "words (repeatable; the words keep their order), e.g. "
                        "--append \"nohz_full=1 isolcpus=1\"; console=, rdinit= and panic= "
                        "are the harness's and are refused")
    p.add_argument("--nvme-subsystem", action="store_true",
                   help="also give the guest an NVMe subsystem of two controllers sharing two "
                        "namespaces, one with 8 bytes of separate metadata per block: Linux "
                        "reaches them through multipath (see 'Every guest has' below)")
    p.add_argument("--root-image", action="append", default=[], metavar="[KERNEL=]FILE",
                   help="boot FILE (a raw ext4 image of a Debian root with systemd, as "
                        "tests/package/root-image makes) as the guest's root, with systemd as "
                        "PID 1, instead of a chroot of the host root; the image is never "
                        "written (QEMU's snapshot=on) and the host root is at "
                        "/mnt/iouscope-vm/host, COMMAND's directory the checkout there. "
                        "KERNEL=FILE gives one kernel its own root (repeatable: a suite's "
                        "kernel with that suite's root); a kernel of --kernel without one is "
                        "refused")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="boot up to N kernels at once (default 1), each pinned to a host CPU of "
                        "its own; needs single-threaded TCG and at most one guest per host CPU")
    p.add_argument("--results-json", type=Path, metavar="FILE",
                   help="also write each kernel's result (status, seconds per phase, reason) "
                        "to FILE as JSON")
    p.add_argument("--label", metavar="NAME",
                   help="name this run: its guests' lines read [NAME/kernel] and their logs go "
                        "to LOGS/NAME/kernel (for the runs of --batch, which each need one)")
    p.add_argument("--batch", type=Path, metavar="FILE",
                   help="run several runs in one pool of --jobs guests, longest guest first: "
                        "FILE holds one run per line, the arguments of a tests/vm/run of its "
                        "own (shell-quoted, with --kernel, --label and -- COMMAND; '#' starts a "
                        "comment line), without the pool's options (--jobs, --offline, "
                        "--refresh, -v, --matrix). Exits 0 when every guest of every run passed "
                        "or skipped, 1 otherwise; each run writes its own --results-json and "
                        "summary")
    p.add_argument("--prepare-only", action="store_true",
                   help="download and build what the kernels need, boot nothing")
    p.add_argument("--refresh", action="store_true",
                   help="refresh the package lists now, even if they are recent")
    p.add_argument("--offline", action="store_true",
                   help="use only what is cached; never contact the archive")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show the kernel's boot messages")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]",
                   help=argparse.SUPPRESS)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    cmd = args.command
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    args.command = cmd
    if args.list:
        if args.kernel or cmd or args.prepare_only or args.batch:
            p.error("--list takes no --kernel, --prepare-only, --batch or COMMAND")
        return args
    if args.label is not None and not pool.LABEL.fullmatch(args.label):
        p.error(f"--label {args.label!r}: letters, digits, '_', '.' and '-' only")
    if args.batch:
        per_run = [opt for opt, v in (
            ("--kernel", args.kernel), ("COMMAND", cmd), ("--prepare-only", args.prepare_only),
            ("--label", args.label), ("--results-json", args.results_json),
            ("--timeout", args.timeout), ("--boot-timeout", args.boot_timeout),
            ("--expect-status", args.expect_status), ("--env", args.env),
            ("--memory", args.memory), ("--cpus", args.cpus), ("--append", args.kernel_append),
            ("--nvme-subsystem", args.nvme_subsystem), ("--root-image", args.root_image)) if v]
        if per_run:
            p.error(f"--batch takes each run's options from its FILE, not {', '.join(per_run)}")
        args.runs = batch_runs(p, args)
    elif not args.kernel:
        p.error("--kernel is required (a name from --list, a comma-separated list, or 'all')")
    elif args.prepare_only and cmd:
        p.error("--prepare-only takes no COMMAND")
    elif not args.prepare_only and not cmd:
        p.error("no COMMAND given; put it after '--', e.g. tests/vm/run --kernel all -- uname -r")
    if args.refresh and args.offline:
        p.error("--refresh and --offline contradict each other")
    args.root_image = root_images(p, args.root_image)
    for opt in ("timeout", "boot_timeout", "cpus", "jobs"):
        v = getattr(args, opt)
        if v is not None and v <= 0:
            p.error(f"--{opt.replace('_', '-')} must be positive")
    if args.jobs > 1:
        if os.environ.get("IOUSCOPE_VM_TCG_THREAD", "single") != "single":
            p.error("--jobs above 1 needs single-threaded TCG: a multi-threaded guest uses "
                    "every host CPU (unset IOUSCOPE_VM_TCG_THREAD)")
        if os.environ.get("IOUSCOPE_VM_PIN", "1") == "0":
            p.error("--jobs above 1 pins each guest to a host CPU of its own; not with IOUSCOPE_VM_PIN=0")
        ncpu = len(os.sched_getaffinity(0))
        if args.jobs > ncpu:
            p.error(f"--jobs {args.jobs}: this process may use {ncpu} host CPU(s), one per guest")
    if args.memory and not re.fullmatch(r"[0-9]+[MG]", args.memory):
        p.error("--memory must look like 2G or 2048M")
    for value in args.kernel_append:
        problem = check_kernel_append(value)
        if problem:
            p.error(problem)
    args.kernel_append = " ".join(v.strip() for v in args.kernel_append if v.strip())
    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            p.error(f"--env wants NAME=VALUE, got {item!r}")
        env[name] = value
    args.env = env
    return args


def root_images(p: Parser, values: list[str]) -> dict[str, Path]:
    """--root-image's values as {kernel: image}, "" standing for every kernel; each image
    resolved, as QEMU opens it from its own directory."""
    images: dict[str, Path] = {}
    for value in values:
        kernel, sep, file = value.rpartition("=")
        if sep and not re.fullmatch(r"[\w.-]+", kernel):
            p.error(f"--root-image {value!r}: KERNEL=FILE wants a kernel's name before '='")
        if kernel in images:
            p.error(f"--root-image: {kernel or 'a root for every kernel'} given twice")
        if not Path(file).is_file():
            p.error(f"--root-image {file}: no such image (tests/package/root-image makes one)")
        images[kernel] = Path(file).resolve()
    return images


def root_image_for(args: argparse.Namespace, kernel: str) -> Path | None:
    """The root --root-image gives KERNEL's guest, or None for the host root's chroot."""
    images = getattr(args, "root_image", None) or {}
    return images.get(kernel, images.get(""))


def batch_runs(p: Parser, args: argparse.Namespace) -> list[argparse.Namespace]:
    """The runs of --batch FILE, each parsed as a tests/vm/run command line of its own."""
    try:
        lines = pool.batch_lines(args.batch.read_text())
    except OSError as e:
        p.error(f"--batch {args.batch}: {e.strerror}")
    except ValueError as e:
        p.error(f"--batch {args.batch}: {e}")
    runs, labels = [], set()
    for words in lines:
        try:
            run = parse_args(words)
        except SystemExit:
            print(f"tests/vm/run: in --batch {args.batch}: {shlex.join(words)}", file=sys.stderr)
            raise
        if not run.label:
            p.error(f"--batch {args.batch}: each run needs a --label: {shlex.join(words)}")
        if run.label in labels:
            p.error(f"--batch {args.batch}: two runs are labelled {run.label!r}")
        labels.add(run.label)
        runs.append(run)
    return runs
