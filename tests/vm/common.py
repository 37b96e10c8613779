"""What every step of the VM harness shares: the checkout's and the cache's paths, the exit
statuses of tests/vm/run, the harness's errors, its log lines and a few file helpers.

Standard library only, like the rest of tests/vm: it runs with Debian's /usr/bin/python3 on a
fresh machine."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent.parent
DEFAULT_MATRIX = HERE / "kernels.toml"
GUEST_DIR = HERE / "guest"
DEFAULT_CACHE = Path("/var/cache/iouscope-vm")
DEFAULT_LOGS = Path(tempfile.gettempdir()) / "iouscope-vm-logs"

# Exit statuses of tests/vm/run besides the command's own (same meaning as in timeout(1) and
# env(1): 124 timed out, 125 the harness itself failed; 77 is automake's "skipped").
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
EXIT_HARNESS = 125
STATUS_SKIP = 77


class HarnessError(Exception):
    """A failure to report in one sentence, without a traceback."""


class UsageError(HarnessError):
    """The caller asked for something that cannot be (exit status 2)."""


class Log:
    """Harness messages go to stderr with the kernel's name; the command's output to stdout."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.prefix = "vm"

    def __call__(self, msg: str) -> None:
        print(f"[{self.prefix}] {msg}", file=sys.stderr, flush=True)

    def for_kernel(self, name: str) -> "Log":
        other = Log(self.verbose)
        other.prefix = name
        return other


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_tool(name: str, package: str) -> str:
    if "/" in name:
        if os.access(name, os.X_OK) and Path(name).is_file():
            return name
        raise HarnessError(f"{name} not found or not executable")
    # root's PATH usually has the sbin directories, a user's may not; depmod lives there.
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if not path:
        raise HarnessError(f"{name} not found: install it with 'apt-get install {package}'")
    return path
