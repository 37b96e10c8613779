"""Builds a matrix kernel from a Debian linux-source package with the project's patches.

The `seeds` entry of kernels.toml is such a kernel: trixie's linux-source-6.12 with the seeds'
io_uring patches (tests/vm/kernels/seeds/NNNN-*.patch) and a small configuration fragment
(tests/vm/kernels/seeds/config). The result has the layout of an extracted image package
(boot/vmlinuz-R, boot/config-R, lib/modules/R/...), so the harness builds its initramfs and
boots it exactly as it does Debian's own images.

A build is keyed by what decides its output: the source package, the patches, the fragment,
the compiler and pahole, and BUILD_FORMAT (this file's procedure). The key names the cache
directory, so a machine builds each combination once. docs/VM.md, "The seeds kernel", has the
measured build times.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

# Bump when the procedure below changes what it produces.
BUILD_FORMAT = 1
# Progress is logged this often while make runs, so that a log without a terminal shows it.
PROGRESS_SECONDS = 60
CONFIG_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")


class BuildError(Exception):
    """A step of the build failed; the message names the step and the log to read."""


def patch_files(patch_dir: Path) -> list[Path]:
    """The patches of an entry, applied in name order (NNNN- prefixes)."""
    return sorted(patch_dir.glob("*.patch"))


def tool_version(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        return "missing"
    return (r.stdout or r.stderr).splitlines()[0].strip() if (r.stdout or r.stderr) else "?"


def build_key(source_deb: str, patch_dir: Path) -> str:
    """A short hash of everything that decides the built kernel."""
    h = hashlib.sha256()
    h.update(f"format {BUILD_FORMAT}\0source {source_deb}\0".encode())
    for p in [*patch_files(patch_dir), patch_dir / "config"]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for tool in (["gcc", "--version"], ["pahole", "--version"]):
        h.update(tool_version(tool).encode() + b"\0")
    return h.hexdigest()[:16]


def requested_config(fragment: Path) -> dict[str, str]:
    """CONFIG_X=value lines of a fragment; comments and blank lines are skipped."""
    wanted = {}
    for n, line in enumerate(fragment.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = CONFIG_LINE.match(line)
        if not m:
            raise BuildError(f"{fragment}:{n}: not a CONFIG_X=value line: {line!r}")
        wanted[m.group(1)] = m.group(2)
    return wanted


def missing_config(wanted: dict[str, str], config_text: str) -> list[str]:
    """What the fragment asked for and the final .config does not have (a forgotten dependency
    makes olddefconfig drop an option silently)."""
    final = {}
    for line in config_text.splitlines():
        m = CONFIG_LINE.match(line)
        if m:
            final[m.group(1)] = m.group(2)
    return [f"{k}={v} (got {final.get(k, 'not set')})" for k, v in wanted.items()
            if final.get(k) != v]


class SourceBuild:
    """One build: extract, patch, configure, compile, install into `tree`."""

    def __init__(self, deb: Path, patch_dir: Path, work: Path, log: Callable[[str], None],
                 jobs: int | None = None):
        self.deb, self.patch_dir, self.work, self.log = deb, patch_dir, work, log
        self.jobs = jobs or os.cpu_count() or 1
        self.make_log = work / "make.log"

    def run(self, tree: Path) -> dict[str, float]:
        """Builds into `tree` (which must not exist yet); returns seconds per step."""
        times: dict[str, float] = {}
        for step, fn in (("extract", self._extract), ("patch", self._patch),
                         ("configure", self._configure), ("compile", self._compile)):
            t = time.monotonic()
            fn()
            times[step] = time.monotonic() - t
            self.log(f"  {step}: {times[step]:.0f} s")
        t = time.monotonic()
        self._install(tree)
        times["install"] = time.monotonic() - t
        return times

    @property
    def src(self) -> Path:
        return self.work / "src"

    def _extract(self) -> None:
        debdir = self.work / "deb"
        r = subprocess.run(["dpkg-deb", "-x", str(self.deb), str(debdir)], capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise BuildError(f"dpkg-deb -x {self.deb.name} failed: {r.stderr.strip()}")
        tarballs = sorted((debdir / "usr/src").glob("linux-source-*.tar.*"))
        if not tarballs:
            raise BuildError(f"{self.deb.name} has no usr/src/linux-source-*.tar.*")
        (self.work / "unpacked").mkdir()
        r = subprocess.run(["tar", "-xf", str(tarballs[0]), "-C", str(self.work / "unpacked")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"tar -xf {tarballs[0].name} failed: {r.stderr.strip()[-2000:]}")
        tops = list((self.work / "unpacked").iterdir())
        if len(tops) != 1:
            raise BuildError(f"{tarballs[0].name} does not hold exactly one top directory")
        os.replace(tops[0], self.src)
        shutil.rmtree(debdir)

    def _patch(self) -> None:
        patches = patch_files(self.patch_dir)
        if not patches:
            raise BuildError(f"no *.patch in {self.patch_dir}")
        for p in patches:
            r = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                                "-i", str(p)], cwd=self.src, capture_output=True, text=True)
            if r.returncode != 0:
                raise BuildError(f"{p.name} does not apply to {self.deb.name}:\n"
                                 f"{(r.stdout + r.stderr).strip()}")
            self.log(f"  applied {p.name}")

    def _make(self, *targets: str, quiet: bool = False) -> None:
        with open(self.make_log, "a") as out:
            r = subprocess.run(["make", f"-j{self.jobs}", *targets], cwd=self.src, stdout=out,
                               stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise BuildError(f"make {' '.join(targets)} failed (exit {r.returncode}); the last "
                             f"lines of {self.make_log}:\n{tail(self.make_log, 25)}")

    def _configure(self) -> None:
        fragment = self.patch_dir / "config"
        wanted = requested_config(fragment)
        self._make("allnoconfig")
        r = subprocess.run(["scripts/kconfig/merge_config.sh", "-m", ".config", str(fragment)],
                           cwd=self.src, capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"merge_config.sh failed: {(r.stdout + r.stderr).strip()[-2000:]}")
        self._make("olddefconfig")
        missing = missing_config(wanted, (self.src / ".config").read_text())
        if missing:
            raise BuildError(f"{fragment} asks for options that the kernel's Kconfig dropped "
                             f"(a dependency is missing from the fragment): {'; '.join(missing)}")

    def _compile(self) -> None:
        """make bzImage modules, with a progress line every PROGRESS_SECONDS."""
        t0 = time.monotonic()
        with open(self.make_log, "a") as out:
            proc = subprocess.Popen(["make", f"-j{self.jobs}", "bzImage", "modules"],
                                    cwd=self.src, stdout=out, stderr=subprocess.STDOUT)
            try:
                while True:
                    try:
                        rc = proc.wait(timeout=PROGRESS_SECONDS)
                        break
                    except subprocess.TimeoutExpired:
                        done = sum(1 for _ in self.src.rglob("*.o"))
                        self.log(f"  compiling: {done} objects after "
                                 f"{time.monotonic() - t0:.0f} s")
            finally:
                if proc.poll() is None:  # interrupted: do not leave make running behind us
                    proc.kill()
                    proc.wait()
        if rc != 0:
            raise BuildError(f"make bzImage modules failed (exit {rc}); the last lines of "
                             f"{self.make_log}:\n{tail(self.make_log, 25)}")

    def _install(self, tree: Path) -> None:
        release = subprocess.run(["make", "-s", "kernelrelease"], cwd=self.src,
                                 capture_output=True, text=True).stdout.strip()
        if not release:
            raise BuildError("make kernelrelease printed nothing")
        (tree / "boot").mkdir(parents=True)
        shutil.copy(self.src / "arch/x86/boot/bzImage", tree / "boot" / f"vmlinuz-{release}")
        shutil.copy(self.src / ".config", tree / "boot" / f"config-{release}")
        # --strip-debug keeps .BTF, which the nvme module's BTF (deep tier) lives in.
        self._make(f"INSTALL_MOD_PATH={tree}", "INSTALL_MOD_STRIP=1", "modules_install")


def tail(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def build_tree(deb: Path, patch_dir: Path, out: Path, log: Callable[[str], None]) -> Path:
    """Builds `out`/tree unless it is there; a failed or killed build leaves nothing under the
    final name. The scratch tree (about 2 GB) is removed either way."""
    tree = out / "tree"
    if (out / "built").exists() and tree.is_dir():
        return tree
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=out))
    t0 = time.monotonic()
    log(f"building {deb.name} with {', '.join(p.name for p in patch_files(patch_dir))} "
        f"(a one-time cold build; the log is {work / 'make.log'})")
    try:
        staged = work / "tree"
        times = SourceBuild(deb, patch_dir, work, log).run(staged)
        if tree.exists():
            shutil.rmtree(tree)
        os.replace(staged, tree)
        shutil.copy(work / "make.log", out / "make.log")
        (out / "built").write_text("".join(f"{k} {v:.1f}\n" for k, v in times.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built in {time.monotonic() - t0:.0f} s")
    return tree
