"""iouscope's kernel-matrix harness: boots Debian kernels under QEMU (TCG) and runs a command.

tests/vm/run is the command-line entry point; this module holds everything so that the unit tests
(tests/vm/test_harness.py) can import it. docs/VM.md describes the design. Standard library only:
it runs with Debian's /usr/bin/python3 on a fresh machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import select
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import deque
from pathlib import Path
from typing import Callable, Iterable

import kbuild
import pool

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

# Bump when the initramfs layout changes in a way the hashed inputs do not capture.
INITRAMFS_FORMAT = 4

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class HarnessError(Exception):
    """A failure to report in one sentence, without a traceback."""


class UsageError(HarnessError):
    """The caller asked for something that cannot be (exit status 2)."""


class MatrixError(UsageError):
    pass


# ---------------------------------------------------------------------------------------------
# The matrix file
# ---------------------------------------------------------------------------------------------

KERNEL_KEYS = {
    "name": str, "suite": str, "series": str, "archives": list, "description": str,
    "metapackage": str, "image_pattern": str, "split_pattern": str, "modules": list,
    "extra_modules": list, "timeout": int, "boot_timeout": int, "memory": str, "cpus": int,
    "tcg_thread": str, "source": str, "patches": str,
}
DEFAULT_KEYS = {
    "mirror": str, "security_mirror": str, "components": list, "keyring": str, "arch": str,
    "metapackage": str, "image_pattern": str, "split_pattern": str, "modules": list,
    "timeout": int, "boot_timeout": int, "memory": str, "cpus": int, "refresh_hours": (int, float),
    "tcg_thread": str,
}
BUILTIN_DEFAULTS = {
    "mirror": "http://deb.debian.org/debian",
    "security_mirror": "http://deb.debian.org/debian-security",
    "components": ["main"],
    "keyring": "/usr/share/keyrings/debian-archive-keyring.gpg",
    "arch": "amd64",
    "metapackage": "linux-image-amd64",
    "image_pattern": r"^linux-image-[0-9]",
    "split_pattern": r"^linux-(base|binary|modules)-[0-9]",
    "modules": ["virtio_pci", "9pnet_virtio", "9p", "nvme", "null_blk"],
    "timeout": 1800,
    "boot_timeout": 300,
    "memory": "2G",
    "cpus": 2,
    "refresh_hours": 24,
    "tcg_thread": "single",
}


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    suite: str
    series: str
    archives: tuple[str, ...]
    description: str
    mirror: str
    security_mirror: str
    components: tuple[str, ...]
    keyring: str
    arch: str
    metapackage: str
    image_pattern: str
    split_pattern: str
    modules: tuple[str, ...]
    timeout: int
    boot_timeout: int
    memory: str
    cpus: int
    refresh_hours: float
    tcg_thread: str
    # Built from this source package (e.g. linux-source-6.12) with the patches and config
    # fragment in the `patches` directory (relative to tests/vm), instead of a Debian image.
    source: str = ""
    patches: str = ""

    @property
    def patch_dir(self) -> Path:
        return HERE / self.patches

    def sources_list(self) -> str:
        """One deb line per archive: "<suite>-security" comes from the security mirror."""
        lines = []
        for archive in self.archives:
            mirror = self.security_mirror if archive.endswith("-security") else self.mirror
            lines.append(f"deb [arch={self.arch} signed-by={self.keyring}] {mirror} {archive} "
                         + " ".join(self.components))
        return "\n".join(lines) + "\n"

    def matches_series(self, upstream_version: str) -> bool:
        return upstream_version == self.series or upstream_version.startswith(self.series + ".")


def _check_type(where: str, key: str, value, expected) -> None:
    if isinstance(value, bool) and expected in (int, (int, float)):
        raise MatrixError(f"{where}: '{key}' must be a number, not {value!r}")
    if not isinstance(value, expected):
        names = (expected.__name__ if isinstance(expected, type)
                 else " or ".join(t.__name__ for t in expected))
        raise MatrixError(f"{where}: '{key}' must be a {names}, not {type(value).__name__}")
    if expected is list and not all(isinstance(v, str) and v for v in value):
        raise MatrixError(f"{where}: '{key}' must be a list of non-empty strings")


def parse_matrix(text: str, source: str = "kernels.toml") -> list[Kernel]:
    """Parses and validates the matrix file; every mistake is a MatrixError naming the place."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"{source}: not valid TOML: {e}") from None
    unknown = set(doc) - {"defaults", "kernel"}
    if unknown:
        raise MatrixError(f"{source}: unknown top-level key(s): {', '.join(sorted(unknown))}")
    defaults = dict(BUILTIN_DEFAULTS)
    given = doc.get("defaults", {})
    if not isinstance(given, dict):
        raise MatrixError(f"{source}: [defaults] must be a table")
    for key, value in given.items():
        if key not in DEFAULT_KEYS:
            raise MatrixError(f"{source}: [defaults]: unknown key '{key}'")
        _check_type(f"{source}: [defaults]", key, value, DEFAULT_KEYS[key])
        defaults[key] = value

    entries = doc.get("kernel")
    if not isinstance(entries, list) or not entries:
        raise MatrixError(f"{source}: no [[kernel]] entries")
    kernels: list[Kernel] = []
    for i, entry in enumerate(entries, 1):
        where = f"{source}: kernel #{i}"
        if not isinstance(entry, dict):
            raise MatrixError(f"{where}: must be a table")
        if isinstance(entry.get("name"), str):
            where = f"{source}: kernel '{entry['name']}'"
        for key, value in entry.items():
            if key not in KERNEL_KEYS:
                raise MatrixError(f"{where}: unknown key '{key}'")
            _check_type(where, key, value, KERNEL_KEYS[key])
        for key in ("name", "suite", "series"):
            if key not in entry:
                raise MatrixError(f"{where}: missing '{key}'")
        name = entry["name"]
        if not NAME_RE.match(name) or name == "all":
            raise MatrixError(f"{where}: name must be lower-case letters, digits, '.', '_' or "
                              f"'-', and not 'all'")
        if any(k.name == name for k in kernels):
            raise MatrixError(f"{where}: duplicate name")
        merged = {**defaults, **entry}
        for key in ("image_pattern", "split_pattern"):
            try:
                re.compile(merged[key])
            except re.error as e:
                raise MatrixError(f"{where}: '{key}' is not a regular expression: {e}") from None
        for key in ("timeout", "boot_timeout", "cpus"):
            if merged[key] <= 0:
                raise MatrixError(f"{where}: '{key}' must be positive")
        if not re.fullmatch(r"[0-9]+[MG]", merged["memory"]):
            raise MatrixError(f"{where}: 'memory' must look like 2G or 2048M")
        if merged["tcg_thread"] not in ("single", "multi"):
            raise MatrixError(f"{where}: 'tcg_thread' must be \"single\" or \"multi\"")
        modules = list(merged["modules"]) + list(entry.get("extra_modules", []))
        if bool(entry.get("source")) != bool(entry.get("patches")):
            raise MatrixError(f"{where}: 'source' and 'patches' go together")
        if entry.get("patches") and not (HERE / entry["patches"] / "config").is_file():
            raise MatrixError(f"{where}: 'patches' names no directory with a config fragment "
                              f"({HERE / entry['patches']})")
        kernels.append(Kernel(
            name=name,
            suite=entry["suite"],
            series=entry["series"],
            archives=tuple(entry.get("archives", [entry["suite"]])),
            description=entry.get("description", ""),
            mirror=merged["mirror"],
            security_mirror=merged["security_mirror"],
            components=tuple(merged["components"]),
            keyring=merged["keyring"],
            arch=merged["arch"],
            metapackage=merged["metapackage"],
            image_pattern=merged["image_pattern"],
            split_pattern=merged["split_pattern"],
            modules=tuple(dict.fromkeys(modules)),
            timeout=merged["timeout"],
            boot_timeout=merged["boot_timeout"],
            memory=merged["memory"],
            cpus=merged["cpus"],
            refresh_hours=float(merged["refresh_hours"]),
            tcg_thread=merged["tcg_thread"],
            source=entry.get("source", ""),
            patches=entry.get("patches", ""),
        ))
    return kernels


def load_matrix(path: Path) -> list[Kernel]:
    try:
        text = path.read_text()
    except OSError as e:
        raise MatrixError(f"cannot read the matrix file {path}: {e.strerror}") from None
    return parse_matrix(text, str(path))


def select_kernels(kernels: list[Kernel], spec: str) -> list[Kernel]:
    """'all', one name, or a comma-separated list of names, in matrix order for 'all'."""
    if spec == "all":
        return list(kernels)
    by_name = {k.name: k for k in kernels}
    chosen = []
    for name in (s.strip() for s in spec.split(",")):
        if name not in by_name:
            known = ", ".join(by_name)
            raise UsageError(f"unknown kernel '{name}'; the matrix has: {known} (see --list)")
        if by_name[name] not in chosen:
            chosen.append(by_name[name])
    return chosen


# ---------------------------------------------------------------------------------------------
# Debian package metadata
# ---------------------------------------------------------------------------------------------

def parse_stanzas(text: str) -> list[dict[str, str]]:
    """Parses deb822 stanzas (apt-cache show output); continuation lines are joined."""
    stanzas, current, key = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif line[0] in " \t" and key:
            current[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def depends_names(depends: str) -> list[str]:
    """Package names in a Depends field, alternatives included, versions and arch dropped."""
    names = []
    for clause in depends.split(","):
        for alt in clause.split("|"):
            name = alt.strip().split(" ", 1)[0].split("(", 1)[0].split(":", 1)[0].strip()
            if name:
                names.append(name)
    return names


def upstream_of(debian_version: str) -> str:
    """'1:6.1.192-3' -> '6.1.192'."""
    v = debian_version.split(":", 1)[-1]
    return v.rsplit("-", 1)[0] if "-" in v else v


def deb_filename(package: str, version: str, arch: str) -> str:
    # apt-get download escapes the epoch colon this way.
    return f"{package}_{version.replace(':', '%3a')}_{arch}.deb"


@dataclasses.dataclass
class Selection:
    """Which packages make up a kernel, as resolved from the suite's metadata."""
    image: str
    version: str
    packages: list[dict[str, str]]  # name, version, arch, size, file

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict) -> "Selection":
        return Selection(d["image"], d["version"], d["packages"])


def package_entry(s: dict[str, str], default_arch: str) -> dict[str, str]:
    arch = s.get("Architecture", default_arch)
    return {"name": s["Package"], "version": s["Version"], "arch": arch,
            "size": s.get("Size", "0"), "file": deb_filename(s["Package"], s["Version"], arch)}


def resolve_source(kernel: Kernel, show: Callable[[str], str]) -> Selection:
    """The newest version of a source-built entry's linux-source package."""
    stanzas = parse_stanzas(show(kernel.source))
    if not stanzas:
        raise HarnessError(f"{kernel.name}: {kernel.source} is not in {', '.join(kernel.archives)}")
    return Selection(image=kernel.source, version=stanzas[0]["Version"],
                     packages=[package_entry(stanzas[0], kernel.arch)])


def resolve_selection(kernel: Kernel, show: Callable[[str], str]) -> Selection:
    """Follows the metapackage to the newest versioned image; `show(pkg)` returns apt-cache show
    --no-all-versions output. A split image (sid 7.x: linux-image-VER only depends on
    linux-binary-VER, linux-modules-VER and linux-base-VER) brings the parts named by
    split_pattern along."""
    meta = parse_stanzas(show(kernel.metapackage))
    if not meta:
        raise HarnessError(f"{kernel.name}: {kernel.metapackage} is not in {', '.join(kernel.archives)}")
    image_re = re.compile(kernel.image_pattern)
    images = [n for n in depends_names(meta[0].get("Depends", "")) if image_re.search(n)]
    if not images:
        raise HarnessError(f"{kernel.name}: {kernel.metapackage} {meta[0].get('Version', '?')} depends "
                           f"on no package matching image_pattern {kernel.image_pattern!r}")
    image = images[0]
    stanzas = parse_stanzas(show(image))
    if not stanzas:
        raise HarnessError(f"{kernel.name}: {image} (named by {kernel.metapackage}) is not available")
    img = stanzas[0]
    wanted = [img]
    split_re = re.compile(kernel.split_pattern)
    for part in depends_names(img.get("Depends", "")):
        if split_re.search(part):
            got = parse_stanzas(show(part))
            if not got:
                raise HarnessError(f"{kernel.name}: {part} (needed by {image}) is not available")
            wanted.append(got[0])
    packages = [package_entry(s, kernel.arch) for s in wanted]
    return Selection(image=image, version=img["Version"], packages=packages)


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------

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


def is_static_elf(path: Path) -> bool:
    """True for an ELF executable without a program interpreter (PT_INTERP)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        endian = "<" if head[5] == 1 else ">"
        phoff, = struct.unpack_from(endian + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(endian + "HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        p_type, = struct.unpack_from(endian + "I", table, i * phentsize)
        if p_type == 3:  # PT_INTERP
            return False
    return True


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


def qemu_binary() -> str:
    return find_tool(os.environ.get("IOUSCOPE_VM_QEMU") or "qemu-system-x86_64",
                     "qemu-system-x86")


class CacheLock:
    """Serialises downloads and builds of concurrent runs that share one cache directory."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = -1

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[vm] waiting for {self.path}: another kernel is being prepared (by this run "
                  "or another)", file=sys.stderr, flush=True)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


# ---------------------------------------------------------------------------------------------
# modules: ELF .modinfo, closure, decompression
# ---------------------------------------------------------------------------------------------

def module_name(filename: str) -> str:
    base = filename.split("/")[-1]
    return base[: base.index(".ko")].replace("-", "_") if ".ko" in base else base


def read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        # No zstd in Python's standard library; busybox's modprobe cannot decompress either.
        zstd = find_tool("zstd", "zstd")
        return subprocess.run([zstd, "-dcq", str(path)], check=True, capture_output=True).stdout
    return data


def modinfo_depends(elf: bytes) -> list[str]:
    """The 'depends=' entry of a module's .modinfo section (ELF64 little-endian)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)

    def section(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", elf, shoff + i * shentsize)
        return name, offset, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        end = elf.index(b"\0", stroff + name)
        if elf[stroff + name:end] == b".modinfo":
            for entry in elf[offset:offset + size].split(b"\0"):
                if entry.startswith(b"depends="):
                    value = entry[len(b"depends="):].decode()
                    return [d.replace("-", "_") for d in value.split(",") if d]
            return []
    return []


@dataclasses.dataclass
class ModulePlan:
    status: dict[str, str]       # requested module -> module | builtin | missing
    files: dict[str, str]        # module name -> path relative to the modules dir (closure)


def plan_modules(requested: Iterable[str], index: dict[str, str], builtin: set[str],
                 depends: Callable[[str], list[str]]) -> ModulePlan:
    """Which files the initramfs needs: every requested module that exists as a file, with its
    dependencies, transitively. index maps module name -> relative path; depends(name) lists a
    module's dependencies."""
    status: dict[str, str] = {}
    files: dict[str, str] = {}
    todo = []
    for req in requested:
        name = req.replace("-", "_")
        if name in index:
            status[req] = "module"
            todo.append(name)
        elif name in builtin:
            status[req] = "builtin"
        else:
            status[req] = "missing"
    while todo:
        name = todo.pop()
        if name in files or name not in index:
            continue
        files[name] = index[name]
        todo.extend(d for d in depends(name) if d not in files)
    return ModulePlan(status, files)


# ---------------------------------------------------------------------------------------------
# cpio (newc) writer, so the initramfs needs neither root (mknod) nor the cpio tool
# ---------------------------------------------------------------------------------------------

class Cpio:
    def __init__(self):
        self.out = io.BytesIO()
        self.ino = 1
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)):
        name_b = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 2 if stat.S_ISDIR(mode) else 1, 0, len(data), 0, 0,
                  rdev[0], rdev[1], len(name_b), 0]
        self.ino += 1
        header = b"070701" + b"".join(b"%08x" % f for f in fields)
        self.out.write(header + name_b)
        self.out.write(b"\0" * (-(len(header) + len(name_b)) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def mkdir(self, path: str) -> None:
        path = path.strip("/")
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub and sub not in self.dirs:
                self.dirs.add(sub)
                self._entry(sub, stat.S_IFDIR | 0o755)

    def file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        path = path.strip("/")
        if "/" in path:
            self.mkdir(path.rsplit("/", 1)[0])
        self._entry(path, stat.S_IFREG | mode, data)

    def chardev(self, path: str, major: int, minor: int, mode: int = 0o600) -> None:
        self.mkdir(path.strip("/").rsplit("/", 1)[0])
        self._entry(path.strip("/"), stat.S_IFCHR | mode, rdev=(major, minor))

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self.out.getvalue()


def read_cpio(data: bytes) -> dict[str, tuple[int, bytes]]:
    """name -> (mode, data); the inverse of Cpio, for tests and for --inspect-style checks."""
    out, pos = {}, 0
    while True:
        if data[pos:pos + 6] != b"070701":
            raise ValueError(f"bad cpio magic at {pos}")
        fields = [int(data[pos + 6 + 8 * i: pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name = data[pos + 110: pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        body = data[pos:pos + size]
        pos += size + (-size % 4)
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, body)


# ---------------------------------------------------------------------------------------------
# Preparing a kernel: apt, extraction, initramfs, probe tools
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Prepared:
    kernel: Kernel
    selection: Selection
    release: str            # uname -r of the guest
    vmlinuz: Path
    initramfs: Path
    seconds_download: float = 0.0
    seconds_build: float = 0.0
    downloaded_bytes: int = 0


class Apt:
    """apt-get/apt-cache with a private sources list and state for one matrix entry. The host's
    apt.conf.d (e.g. its proxy) still applies; its sources, lists, preferences and package
    status do not, and nothing of the host's apt state is written."""

    def __init__(self, kernel: Kernel, root: Path, log: Log):
        self.kernel = kernel
        self.root = root
        self.log = log

    def setup(self) -> None:
        for sub in ("lists/partial", "cache/archives/partial", "empty", "state"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        sources = self.root / "sources.list"
        text = self.kernel.sources_list()
        if not sources.exists() or sources.read_text() != text:
            sources.write_text(text)
            self.stamp.unlink(missing_ok=True)  # new archives: the lists must be fetched again
        (self.root / "status").touch()

    @property
    def stamp(self) -> Path:
        return self.root / "updated"

    def options(self) -> list[str]:
        r = self.root
        opts = {
            "Dir::Etc::SourceList": r / "sources.list",
            "Dir::Etc::SourceParts": r / "empty",
            "Dir::Etc::Preferences": r / "empty/preferences",
            "Dir::Etc::PreferencesParts": r / "empty",
            "Dir::State": r / "state",
            "Dir::State::Lists": r / "lists",
            "Dir::State::status": r / "status",
            "Dir::Cache": r / "cache",
            "Dir::Cache::pkgcache": r / "cache/pkgcache.bin",
            # The binary cache makes apt-cache fast; the source cache would only double the
            # disk space (about 50 MB per suite).
            "Dir::Cache::srcpkgcache": "",
            "Acquire::Languages": "none",
            # Keeps the package lists compressed on disk (a few times smaller).
            "Acquire::GzipIndexes": "true",
            "APT::Architecture": self.kernel.arch,
            "APT::Architectures": self.kernel.arch,
            "APT::Default-Release": "",
            # Files land in root-owned directories; apt's _apt sandbox user could not write them.
            "APT::Sandbox::User": "root",
        }
        out = []
        for k, v in opts.items():
            out += ["-o", f"{k}={v}"]
        return out

    def is_fresh(self) -> bool:
        if not self.stamp.exists():
            return False
        return time.time() - self.stamp.stat().st_mtime < self.kernel.refresh_hours * 3600

    def update(self) -> None:
        archives = ", ".join(self.kernel.archives)
        self.log(f"updating package lists ({archives})")
        t0 = time.monotonic()
        r = subprocess.run(["apt-get", "-q", *self.options(), "update"], capture_output=True,
                           text=True)
        problems = [l for l in (r.stdout + r.stderr).splitlines()
                    if l.startswith(("E:", "W:", "Err:"))]
        if r.returncode != 0 or any(l.startswith(("E:", "Err:")) for l in problems):
            detail = "; ".join(problems[-4:]) or f"apt-get exited with {r.returncode}"
            raise HarnessError(f"cannot update the package lists of {archives}: {detail}")
        self.stamp.touch()
        self.log(f"package lists updated in {time.monotonic() - t0:.1f} s")

    def show(self, package: str) -> str:
        r = subprocess.run(["apt-cache", *self.options(), "show", "--no-all-versions", package],
                           capture_output=True, text=True)
        return r.stdout if r.returncode == 0 else ""

    def download(self, packages: list[dict[str, str]], dest: Path) -> int:
        """Downloads into dest through a scratch directory so a killed run leaves no partial
        .deb behind under its final name. Returns the bytes fetched."""
        todo = [p for p in packages if not (dest / p["file"]).exists()]
        if not todo:
            return 0
        total = sum(int(p["size"]) for p in todo)
        names = ", ".join(f"{p['name']} {p['version']}" for p in todo)
        self.log(f"downloading {names} ({human_size(total)})")
        scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=dest))
        t0 = time.monotonic()
        running: list[subprocess.Popen] = []
        try:
            rfd, wfd = os.pipe()
            cmd = ["apt-get", "-q", *self.options(), "-o", f"APT::Status-Fd={wfd}", "download",
                   *[f"{p['name']}={p['version']}" for p in todo]]
            proc = subprocess.Popen(cmd, cwd=scratch, pass_fds=(wfd,), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            os.close(wfd)
            running.append(proc)
            output = []
            reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
            reader.start()
            # apt reports "dlstatus:<n>:<percent>:<text>" lines on the status fd; print one line
            # per 10 % so that a log without a terminal still shows progress.
            shown = -10.0
            with os.fdopen(rfd) as status:
                for line in status:
                    parts = line.split(":", 3)
                    if parts[0] == "dlstatus" and len(parts) > 2:
                        try:
                            pct = float(parts[2])
                        except ValueError:
                            continue
                        if pct >= shown + 10:
                            shown = pct - pct % 10
                            self.log(f"  {pct:5.1f} % of {human_size(total)}, "
                                     f"{time.monotonic() - t0:.0f} s")
            rc = proc.wait()
            reader.join()
            if rc != 0:
                tail = "; ".join(l.strip() for l in output if l.startswith(("E:", "W:", "Err")))
                raise HarnessError(f"download of {names} failed: {tail or f'apt-get exited {rc}'}")
            for p in todo:
                got = scratch / p["file"]
                if not got.exists():
                    raise HarnessError(f"apt-get download did not produce {p['file']}")
                os.replace(got, dest / p["file"])
        finally:
            for proc in running:  # interrupted: do not leave apt-get writing behind us
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            shutil.rmtree(scratch, ignore_errors=True)
        secs = time.monotonic() - t0
        self.log(f"downloaded {human_size(total)} in {secs:.1f} s")
        return total


def find_kernel_files(tree: Path) -> tuple[str, Path, Path]:
    """(release, vmlinuz, modules dir) of an extracted image: /boot/vmlinuz-R and /lib/modules/R
    up to trixie; /usr/lib/modules/R/vmlinuz in sid's split packages."""
    for moddir_root in (tree / "lib/modules", tree / "usr/lib/modules"):
        if not moddir_root.is_dir():
            continue
        for moddir in sorted(moddir_root.iterdir()):
            if not (moddir / "kernel").is_dir():
                continue
            release = moddir.name
            for cand in (tree / "boot" / f"vmlinuz-{release}", moddir / "vmlinuz",
                         tree / "usr/lib/linux" / f"vmlinuz-{release}"):
                if cand.is_file():
                    return release, cand, moddir
            found = sorted(tree.rglob("vmlinuz*"))
            if found:
                return release, found[0], moddir
            raise HarnessError(f"no vmlinuz for {release} in the extracted packages ({tree})")
    raise HarnessError(f"no lib/modules/<release>/kernel in the extracted packages ({tree})")


def build_probe_tools(cache: Path, log: Log) -> tuple[dict[str, str], str]:
    """Compiles the capability probes on the host (compilers are slow under TCG). Returns the
    config entries for the guest, or an empty dict and the reason they are missing; the report
    then says so and the run carries on."""
    src_bpf, src_c = GUEST_DIR / "probes.bpf.c", GUEST_DIR / "probe-check.c"
    clang, cc = shutil.which("clang"), shutil.which("cc")
    if not clang or not cc:
        return {}, "clang or cc not installed"
    h = hashlib.sha256(src_bpf.read_bytes() + src_c.read_bytes())
    h.update(subprocess.run([clang, "--version"], capture_output=True).stdout)
    out = cache / "tools" / h.hexdigest()[:16]
    obj, exe = out / "probes.bpf.o", out / "probe-check"
    if not (obj.exists() and exe.exists()):
        tmp = Path(tempfile.mkdtemp(prefix=".tools-", dir=cache))
        try:
            multiarch = subprocess.run([cc, "-print-multiarch"], capture_output=True,
                                       text=True).stdout.strip()
            steps = [
                [clang, "-O2", "-g", "-target", "bpf", f"-I/usr/include/{multiarch}", "-c",
                 str(src_bpf), "-o", str(tmp / obj.name)],
                [cc, "-O2", "-Wall", "-o", str(tmp / exe.name), str(src_c), "-lbpf"],
            ]
            for cmd, src in zip(steps, (src_bpf, src_c)):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    first = (r.stderr.strip().splitlines() or ["?"])[0]
                    return {}, f"compiling {src.name} failed: {first}"
            if out.exists():
                shutil.rmtree(out)
            out.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, out)
            out.chmod(0o755)
            log(f"built the capability probes in {out}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"PROBE_CHECK": str(exe), "PROBE_OBJECT": str(obj)}, ""


class KernelStore:
    """The cache directory (docs/VM.md, "Cache"):
      apt/<kernel>/                private sources.list, package lists and apt state
      debs/<kernel>/               the downloaded .deb files of the selected version
      kernels/<kernel>/<version>/  selection.json, tree/ (dpkg-deb -x), initramfs-<hash>.cpio.gz
      tools/<hash>/                probe-check and probes.bpf.o, built from tests/vm/guest
      runs/                        per-run scratch: job share and NVMe backing files
    """

    def __init__(self, root: Path, log: Log, offline: bool = False, refresh: bool = False):
        self.root = root
        self.log = log
        self.offline = offline
        self.refresh = refresh

    def ensure_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / ".writable"
            probe.touch()
            probe.unlink()
        except OSError as e:
            raise HarnessError(f"cache directory {self.root} is not writable ({e.strerror}); run "
                               f"as root or set IOUSCOPE_VM_CACHE to a writable directory") from None

    def lock(self) -> CacheLock:
        return CacheLock(self.root / ".lock")

    def _selection_path(self, kernel: Kernel) -> Path:
        return self.root / "kernels" / kernel.name / "current.json"

    def cached_selection(self, kernel: Kernel) -> Selection | None:
        try:
            return Selection.from_json(json.loads(self._selection_path(kernel).read_text()))
        except (OSError, ValueError, KeyError):
            return None

    def resolve(self, kernel: Kernel) -> Selection:
        apt = Apt(kernel, self.root / "apt" / kernel.name, self.log)
        apt.setup()
        cached = self.cached_selection(kernel)
        if self.offline:
            if cached:
                return cached
            raise HarnessError(f"{kernel.name}: nothing cached and --offline given")
        if self.refresh or not apt.is_fresh():
            try:
                apt.update()
            except HarnessError as e:
                if cached is None:
                    raise
                self.log(f"WARNING: {e}; using the cached {cached.image} {cached.version}")
                return cached
        return (resolve_source if kernel.source else resolve_selection)(kernel, apt.show)

    def prepare(self, kernel: Kernel, log: Log | None = None) -> Prepared:
        """Downloads and builds what the kernel needs, under the cache lock; messages go to log
        (the kernel's own, so that guests side by side keep their names) or the store's."""
        with self.lock():
            saved, self.log = self.log, log or self.log
            try:
                return self._prepare(kernel)
            finally:
                self.log = saved

    def _prepare(self, kernel: Kernel) -> Prepared:
        t0 = time.monotonic()
        sel = self.resolve(kernel)
        upstream = upstream_of(sel.version)
        self.log(f"selected {sel.image} {sel.version}"
                 + ("" if len(sel.packages) == 1 else
                    f" (split: {', '.join(p['name'] for p in sel.packages[1:])})"))
        if not kernel.matches_series(upstream):
            self.log(f"WARNING: {kernel.suite} now offers {upstream}, not {kernel.series}.x as "
                     f"the matrix says; update 'series' in the matrix file")

        debs = self.root / "debs" / kernel.name
        debs.mkdir(parents=True, exist_ok=True)
        apt = Apt(kernel, self.root / "apt" / kernel.name, self.log)
        missing = [p for p in sel.packages if not (debs / p["file"]).exists()]
        if missing and self.offline:
            raise HarnessError(f"{kernel.name}: {missing[0]['file']} is not cached and --offline given")
        fetched = apt.download(sel.packages, debs) if missing else 0
        t_download = time.monotonic() - t0

        t1 = time.monotonic()
        if kernel.source:
            vdir, tree = self._build(kernel, sel, debs)
        else:
            vdir, tree = self._extracted(sel, debs, kernel)
        release, vmlinuz, moddir = find_kernel_files(tree)
        initramfs = self._initramfs(kernel, sel, release, tree, moddir, vdir)
        self._selection_path(kernel).write_text(json.dumps(sel.to_json(), indent=1))
        self._prune(kernel, sel, debs, vdir)
        return Prepared(kernel, sel, release, vmlinuz, initramfs, seconds_download=t_download,
                        seconds_build=time.monotonic() - t1, downloaded_bytes=fetched)

    def _extracted(self, sel: Selection, debs: Path, kernel: Kernel) -> tuple[Path, Path]:
        vdir = self.root / "kernels" / kernel.name / sel.version.replace(":", "_")
        stamp = vdir / "extracted"
        files = "".join(p["file"] + "\n" for p in sel.packages)
        if not stamp.exists() or stamp.read_text() != files:
            self._extract(sel, debs, vdir)
            stamp.write_text(files)
        return vdir, vdir / "tree"

    def _build(self, kernel: Kernel, sel: Selection, debs: Path) -> tuple[Path, Path]:
        """A source-built entry: one directory per build key (tests/vm/kbuild.py)."""
        deb = debs / sel.packages[0]["file"]
        key = kbuild.build_key(deb.name, kernel.patch_dir)
        vdir = self.root / "kernels" / kernel.name / key
        if self.offline and not ((vdir / "built").exists() and (vdir / "tree").is_dir()):
            raise HarnessError(f"{kernel.name}: build {key} is not cached and --offline given")
        self.log(f"build {key}: {sel.packages[0]['name']} {sel.version} with "
                 f"{', '.join(p.name for p in kbuild.patch_files(kernel.patch_dir))}")
        try:
            return vdir, kbuild.build_tree(deb, kernel.patch_dir, vdir, self.log)
        except kbuild.BuildError as e:
            raise HarnessError(f"{kernel.name}: {e}") from None

    def _extract(self, sel: Selection, debs: Path, vdir: Path) -> None:
        vdir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tree-", dir=vdir))
        try:
            for p in sel.packages:
                t = time.monotonic()
                self.log(f"extracting {p['file']}")
                r = subprocess.run(["dpkg-deb", "-x", str(debs / p["file"]), str(tmp)],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise HarnessError(f"dpkg-deb -x {p['file']} failed: {r.stderr.strip()}")
                self.log(f"  extracted in {time.monotonic() - t:.1f} s")
            if (vdir / "tree").exists():
                shutil.rmtree(vdir / "tree")
            os.replace(tmp, vdir / "tree")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _initramfs(self, kernel: Kernel, sel: Selection, release: str, tree: Path, moddir: Path,
                   vdir: Path) -> Path:
        busybox = Path("/bin/busybox")
        if not busybox.exists():
            raise HarnessError("/bin/busybox not found: install it with 'apt-get install busybox-static'")
        if not is_static_elf(busybox):
            raise HarnessError("/bin/busybox is dynamically linked and cannot run from an initramfs: "
                               "install busybox-static ('apt-get install busybox-static')")
        init = (GUEST_DIR / "init").read_bytes()
        key = hashlib.sha256()
        for part in (str(INITRAMFS_FORMAT), release, "\n".join(kernel.modules),
                     *(p["file"] for p in sel.packages)):
            key.update(part.encode() + b"\0")
        key.update(init)
        key.update(file_sha256(busybox).encode())
        out = vdir / f"initramfs-{key.hexdigest()[:16]}.cpio.gz"
        if out.exists():
            os.utime(out)  # recently used ones survive the pruning below
            return out

        t0 = time.monotonic()
        self.log(f"building the initramfs for {release}")
        depmod = find_tool("depmod", "kmod")
        index: dict[str, str] = {}
        for p in (moddir / "kernel").rglob("*.ko*"):
            index.setdefault(module_name(p.name), str(p.relative_to(moddir)))
        builtin = set()
        if (moddir / "modules.builtin").exists():
            builtin = {module_name(l) for l in (moddir / "modules.builtin").read_text().split()}
        blobs: dict[str, bytes] = {}

        def depends(name: str) -> list[str]:
            blobs[name] = read_module(moddir / index[name])
            return modinfo_depends(blobs[name])

        plan = plan_modules(kernel.modules, index, builtin, depends)
        for req, st in plan.status.items():
            if st != "module":
                self.log(f"  module {req}: {'built in' if st == 'builtin' else 'not in this kernel'}")
        self.log(f"  {len(plan.files)} module files (with dependencies): {', '.join(sorted(plan.files))}")

        stage = Path(tempfile.mkdtemp(prefix=".stage-", dir=vdir))
        try:
            kmods = stage / "lib/modules" / release
            for name, rel in plan.files.items():
                dest = kmods / re.sub(r"\.(xz|gz|zst)$", "", rel)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(blobs.get(name) or read_module(moddir / rel))
            for meta in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
                if (moddir / meta).exists():
                    shutil.copy(moddir / meta, kmods / meta)
            r = subprocess.run([depmod, "-b", str(stage), release], capture_output=True, text=True)
            if r.returncode != 0:
                raise HarnessError(f"depmod -b failed for {release}: {r.stderr.strip()}")

            cpio = Cpio()
            for d in ("bin", "dev", "proc", "sys", "host", "tmp", "run", "etc/iouscope-vm"):
                cpio.mkdir(d)
            cpio.chardev("dev/console", 5, 1)
            cpio.chardev("dev/null", 1, 3, 0o666)
            # libbpf resolves __kconfig externs (e.g. CONFIG_HZ) from /boot/config-$(uname -r);
            # Debian kernels have no /proc/config.gz. The guest's init puts it into /boot.
            config = next((c for c in (tree / "boot" / f"config-{release}", moddir / "config")
                           if c.is_file()), None)
            if config:
                cpio.file(f"boot/config-{release}", config.read_bytes())
            else:
                self.log(f"  WARNING: no kernel config for {release} in the packages; BPF objects "
                         f"with __kconfig externs will not load in this guest")
            cpio.file("bin/busybox", busybox.read_bytes(), 0o755)
            cpio.file("init", init, 0o755)
            cpio.file("etc/iouscope-vm/kernel", (
                f"KERNEL_NAME={shlex.quote(kernel.name)}\n"
                f"DEB_VERSION={shlex.quote(sel.version)}\n"
                f"KERNEL_RELEASE={shlex.quote(release)}\n").encode())
            cpio.file("etc/iouscope-vm/modules", "".join(
                f"{m} {s}\n" for m, s in plan.status.items()).encode())
            for p in sorted(kmods.rglob("*")):
                rel = str(p.relative_to(stage))
                if p.is_dir():
                    cpio.mkdir(rel)
                else:
                    cpio.file(rel, p.read_bytes())
            data = gzip.compress(cpio.finish(), compresslevel=6)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, out)
        # Keep a few: a concurrent run with another module list (or an older checkout) may be
        # about to boot the one it just built.
        images = sorted(vdir.glob("initramfs-*.cpio.gz"), key=lambda f: f.stat().st_mtime)
        for old in images[:-3]:
            old.unlink(missing_ok=True)
        self.log(f"  initramfs {human_size(len(data))} built in {time.monotonic() - t0:.1f} s")
        return out

    def _prune(self, kernel: Kernel, sel: Selection, debs: Path, vdir: Path) -> None:
        """Older versions of the same entry are of no further use once a newer one works."""
        keep = {p["file"] for p in sel.packages}
        for f in debs.glob("*.deb"):
            if f.name not in keep:
                self.log(f"removing the superseded {f.name} from the cache")
                f.unlink()
        for d in vdir.parent.iterdir():
            if d.is_dir() and d != vdir and not d.name.startswith("."):
                shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Booting
# ---------------------------------------------------------------------------------------------

MARK = "iouscope-vm: "


@dataclasses.dataclass
class RunResult:
    kernel: str
    version: str = "-"           # Debian package version
    release: str = "-"           # uname -r
    result: str = "fail"         # pass | fail | skip
    status: int | None = None    # the command's exit status, if it ran to the end
    reason: str = ""
    seconds_prepare: float = 0.0
    seconds_kernel: float = 0.0  # QEMU start until the guest's init runs
    seconds_boot: float = 0.0    # QEMU start until COMMAND starts
    seconds_command: float = 0.0
    seconds_total: float = 0.0
    capabilities: list[str] = dataclasses.field(default_factory=list)
    log_dir: str = ""

    def exit_code(self) -> int:
        if self.status is not None:
            return self.status
        return EXIT_TIMEOUT if self.reason.startswith("timed out") else EXIT_HARNESS


def classify(status: int | None, expect: int) -> str:
    if status == expect:
        return "pass"
    if status == STATUS_SKIP:
        return "skip"
    return "fail"


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


def qemu_host_cpu(tcg_thread: str, env: dict[str, str] | None = None, slot: int = 0) -> int | None:
    """The one host CPU a single-threaded TCG guest runs on, or None to leave QEMU unpinned.
    Guests that run side by side (--jobs) take slots 0, 1, ...: the last allowed CPU, the one
    before it, and so on, so each has a CPU of its own.

    Debian bookworm's QEMU 7.2 drops the guest's memory barriers under single-threaded TCG
    (`tcg_gen_mb` emits nothing without CF_PARALLEL; QEMU 8.1 changed that), while its device
    models run in other host threads. The NVMe shadow-doorbell handshake is a store then a load
    on each side (driver: SQ tail, then event index; device: event index, then SQ tail); without
    the guest's barrier the host CPU reorders it, both sides skip the doorbell, and commands sit
    in the submission queue until the driver's 30 s timeout (docs/VM.md, "Lost NVMe doorbells").
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
                 extra_append: str = "", subsystem_disks: list[Path] | None = None) -> list[str]:
    """QEMU's command line for one boot. extra_append (from --append, already checked by
    check_kernel_append) goes on the kernel command line after the harness's own words."""
    append = " ".join([
        "console=ttyS0,115200", "rdinit=/init",
        # A panicking guest reboots at once and -no-reboot turns that into QEMU exiting.
        "panic=-1",
        # Speculation mitigations only cost time under TCG; these guests run trusted tests.
        "mitigations=off",
        "loglevel=6",
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


class Guest:
    """One boot: streams the console, enforces the timeouts, collects the results."""

    def __init__(self, p: Prepared, argv: list[str], env: dict[str, str], cache: Path,
                 logs: Path, log: Log, timeout: int, boot_timeout: int, expect: int,
                 probe_config: dict[str, str], probe_reason: str, memory: str, cpus: int,
                 extra_append: str = "", nvme_subsystem: bool = False, slot: int = 0,
                 prefix_output: str = ""):
        self.p, self.argv, self.env, self.cache, self.logs, self.log = p, argv, env, cache, logs, log
        self.timeout, self.boot_timeout, self.expect = timeout, boot_timeout, expect
        self.probe_config, self.probe_reason = probe_config, probe_reason
        self.memory, self.cpus, self.extra_append = memory, cpus, extra_append
        self.nvme_subsystem = nvme_subsystem
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
        env = {"IOUSCOPE_VM": "1", "IOUSCOPE_VM_KERNEL": self.p.kernel.name,
               "IOUSCOPE_VM_MODULES": "/run/iouscope-vm-modules",
               "IOUSCOPE_VM_DEB_VERSION": self.p.selection.version, **self.env}
        (job / "job.sh").write_text(job_script(self.argv, CHECKOUT, env))
        # Paths the guest must keep visible even if they lie below a directory it covers with
        # a tmpfs (/tmp, /var/tmp, /run): the checkout and the probe tools.
        keep = [str(CHECKOUT)] + [str(Path(v).parent) for k, v in self.probe_config.items()
                                  if k == "PROBE_CHECK"]
        config = {"KEEP_PATHS": " ".join(keep), **self.probe_config}
        if self.nvme_subsystem:
            config["NVME_SUBSYSTEM"] = " ".join(f"0000:00:{a[2:]}.0" for a in SUBSYSTEM_ADDRS)
        if self.probe_reason:
            config["PROBE_CHECK_REASON"] = self.probe_reason
        (job / "config").write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in config.items()))

        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / "command").write_text(job_script(self.argv, CHECKOUT, env))
        result.log_dir = str(self.logs)

        tcg_thread = os.environ.get("IOUSCOPE_VM_TCG_THREAD") or self.p.kernel.tcg_thread
        if tcg_thread not in ("single", "multi"):
            raise UsageError(f"IOUSCOPE_VM_TCG_THREAD must be single or multi, not {tcg_thread!r}")
        host_cpu = qemu_host_cpu(tcg_thread, slot=self.slot)
        if host_cpu is not None:
            self.log(f"QEMU pinned to host CPU {host_cpu} (single-threaded TCG; docs/VM.md, "
                     "\"Lost NVMe doorbells\")")
        if self.extra_append:
            self.log(f"kernel command line: appended {self.extra_append} (--append)")
        cmd = qemu_command(qemu, self.p, job, disks, self.memory, self.cpus, tcg_thread, host_cpu,
                           extra_append=self.extra_append, subsystem_disks=subsystem_disks)
        (self.logs / "qemu.cmdline").write_text(shlex.join(cmd) + "\n")
        console = open(self.logs / "console.log", "w", errors="replace")
        qerr = open(self.logs / "qemu.stderr", "wb")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=qerr, start_new_session=True)
        RUNNING.add(proc)
        phase = "boot"  # boot -> command -> shutdown
        t_ready = t_cmd_end = None
        deadline_boot = t0 + self.boot_timeout
        deadline = t0 + self.timeout
        buf = b""
        timed_out = ""
        try:
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

        end = time.monotonic()
        result.seconds_boot = (t_ready or end) - t0
        if t_ready:
            result.seconds_command = (t_cmd_end or end) - t_ready
        for name in ("dmesg", "capabilities", "status"):
            if (job / name).exists():
                shutil.copy(job / name, self.logs / name)

        if timed_out:
            result.reason = timed_out
            self._report_tail(result.reason)
            return
        status_file = job / "status"
        if not status_file.exists():
            qerr_text = (self.logs / "qemu.stderr").read_text(errors="replace").strip()
            if proc.returncode != 0:
                result.reason = f"qemu exited with status {proc.returncode}" + (
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


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

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
            ("--nvme-subsystem", args.nvme_subsystem)) if v]
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


def summary_table(results: list[RunResult]) -> str:
    rows = [("KERNEL", "VERSION", "RELEASE", "RESULT", "STATUS", "PREPARE s", "BOOT s",
             "COMMAND s", "TOTAL s")]
    for r in results:
        rows.append((r.kernel, r.version, r.release, r.result.upper(),
                     "-" if r.status is None else str(r.status), f"{r.seconds_prepare:.0f}",
                     f"{r.seconds_boot:.0f}", f"{r.seconds_command:.0f}", f"{r.seconds_total:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    for r in results:
        if r.reason:
            lines.append(f"  {r.kernel}: {r.reason}" + (f" (logs: {r.log_dir})" if r.log_dir else ""))
    return "\n".join(lines)


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
