"""The kernel matrix: tests/vm/kernels.toml parsed and checked into Kernel entries, and the
--kernel choice among them. docs/VM.md, "Adding a kernel", describes the file."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from common import HERE, UsageError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class MatrixError(UsageError):
    pass


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
    defaults = parse_defaults(doc.get("defaults", {}), source)

    entries = doc.get("kernel")
    if not isinstance(entries, list) or not entries:
        raise MatrixError(f"{source}: no [[kernel]] entries")
    kernels: list[Kernel] = []
    for i, entry in enumerate(entries, 1):
        kernels.append(parse_entry(entry, i, source, defaults, kernels))
    return kernels


def parse_defaults(given, source: str) -> dict:
    """The built-in defaults with the file's [defaults] table over them."""
    defaults = dict(BUILTIN_DEFAULTS)
    if not isinstance(given, dict):
        raise MatrixError(f"{source}: [defaults] must be a table")
    for key, value in given.items():
        if key not in DEFAULT_KEYS:
            raise MatrixError(f"{source}: [defaults]: unknown key '{key}'")
        _check_type(f"{source}: [defaults]", key, value, DEFAULT_KEYS[key])
        defaults[key] = value
    return defaults


def parse_entry(entry, i: int, source: str, defaults: dict, kernels: list[Kernel]) -> Kernel:
    """The i-th [[kernel]] entry over the defaults; kernels holds the entries before it."""
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
    _check_merged(where, merged)
    modules = list(merged["modules"]) + list(entry.get("extra_modules", []))
    if bool(entry.get("source")) != bool(entry.get("patches")):
        raise MatrixError(f"{where}: 'source' and 'patches' go together")
    if entry.get("patches") and not (HERE / entry["patches"] / "config").is_file():
        raise MatrixError(f"{where}: 'patches' names no directory with a config fragment "
                          f"({HERE / entry['patches']})")
    return Kernel(
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
    )


def _check_merged(where: str, merged: dict) -> None:
    """The values an entry has once merged over the defaults."""
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
