"""A guest's initramfs: busybox, guest/init, the requested kernel modules with everything they
depend on (read from each module's .modinfo, decompressed on the host), depmod's files and the
kernel's config, packed by a cpio (newc) writer of its own so that device nodes need neither
root nor the cpio tool (docs/VM.md, "How it works", step 4)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import lzma
import os
import re
import shlex
import shutil
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from common import GUEST_DIR, HarnessError, Log, file_sha256, find_tool, human_size
from matrix import Kernel
from packages import Selection

# Bump when the initramfs layout changes in a way the hashed inputs do not capture.
INITRAMFS_FORMAT = 4


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


# ---------------------------------------------------------------------------------------------
# Kernel modules: ELF .modinfo, closure, decompression
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
# The initramfs of one kernel
# ---------------------------------------------------------------------------------------------

def build_initramfs(kernel: Kernel, sel: Selection, release: str, tree: Path, moddir: Path,
                    vdir: Path, log: Log) -> Path:
    """The initramfs of an extracted (or built) kernel in vdir, built unless one with the same
    inputs is there already; the newest three are kept."""
    busybox = static_busybox()
    init = (GUEST_DIR / "init").read_bytes()
    out = vdir / f"initramfs-{initramfs_key(kernel, sel, release, init, busybox)}.cpio.gz"
    if out.exists():
        os.utime(out)  # recently used ones survive the pruning below
        return out

    t0 = time.monotonic()
    log(f"building the initramfs for {release}")
    depmod = find_tool("depmod", "kmod")
    plan, blobs = module_files(kernel, moddir, log)
    stage = Path(tempfile.mkdtemp(prefix=".stage-", dir=vdir))
    try:
        kmods = stage_modules(stage, release, moddir, plan, blobs, depmod)
        cpio = Cpio()
        add_base(cpio, kernel, sel, release, tree, moddir, plan, busybox, init, log)
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
    log(f"  initramfs {human_size(len(data))} built in {time.monotonic() - t0:.1f} s")
    return out


def static_busybox() -> Path:
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise HarnessError("/bin/busybox not found: install it with 'apt-get install busybox-static'")
    if not is_static_elf(busybox):
        raise HarnessError("/bin/busybox is dynamically linked and cannot run from an initramfs: "
                           "install busybox-static ('apt-get install busybox-static')")
    return busybox


def initramfs_key(kernel: Kernel, sel: Selection, release: str, init: bytes,
                  busybox: Path) -> str:
    """A short hash of everything that decides the initramfs; it names the file."""
    key = hashlib.sha256()
    for part in (str(INITRAMFS_FORMAT), release, "\n".join(kernel.modules),
                 *(p["file"] for p in sel.packages)):
        key.update(part.encode() + b"\0")
    key.update(init)
    key.update(file_sha256(busybox).encode())
    return key.hexdigest()[:16]


def module_files(kernel: Kernel, moddir: Path, log: Log) -> tuple[ModulePlan, dict[str, bytes]]:
    """The plan for the kernel's modules, and the decompressed modules read while following
    their dependencies."""
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
            log(f"  module {req}: {'built in' if st == 'builtin' else 'not in this kernel'}")
    log(f"  {len(plan.files)} module files (with dependencies): {', '.join(sorted(plan.files))}")
    return plan, blobs


def stage_modules(stage: Path, release: str, moddir: Path, plan: ModulePlan,
                  blobs: dict[str, bytes], depmod: str) -> Path:
    """The planned modules, decompressed, under stage/lib/modules/RELEASE with depmod's files."""
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
    return kmods


def add_base(cpio: Cpio, kernel: Kernel, sel: Selection, release: str, tree: Path,
             moddir: Path, plan: ModulePlan, busybox: Path, init: bytes, log: Log) -> None:
    """Everything of the initramfs but the modules: directories, device nodes, the kernel's
    config, busybox, init and the files that tell init about its kernel."""
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
        log(f"  WARNING: no kernel config for {release} in the packages; BPF objects "
            f"with __kconfig externs will not load in this guest")
    cpio.file("bin/busybox", busybox.read_bytes(), 0o755)
    cpio.file("init", init, 0o755)
    cpio.file("etc/iouscope-vm/kernel", (
        f"KERNEL_NAME={shlex.quote(kernel.name)}\n"
        f"DEB_VERSION={shlex.quote(sel.version)}\n"
        f"KERNEL_RELEASE={shlex.quote(release)}\n").encode())
    cpio.file("etc/iouscope-vm/modules", "".join(
        f"{m} {s}\n" for m, s in plan.status.items()).encode())
