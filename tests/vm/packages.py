"""Debian's kernel packages: which ones make up a matrix entry's kernel (deb822 metadata from
apt-cache), and apt-get/apt-cache pointed at a private state directory per entry to list and
download them (docs/VM.md, "How it works", steps 1 and 2)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from common import HarnessError, Log, human_size
from matrix import Kernel


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
