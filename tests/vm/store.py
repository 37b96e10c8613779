"""The kernel cache (/var/cache/iouscope-vm, or IOUSCOPE_VM_CACHE): per matrix entry, select the
packages, download them, extract or build the kernel and build its initramfs, under a lock that
serialises concurrent runs; also the capability probes compiled on the host. Layout in
KernelStore's docstring and docs/VM.md, "Cache"."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kbuild
from common import GUEST_DIR, HarnessError, Log
from initramfs import build_initramfs
from matrix import Kernel
from packages import Apt, Selection, resolve_selection, resolve_source, upstream_of


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
        initramfs = build_initramfs(kernel, sel, release, tree, moddir, vdir, self.log)
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
