"""What tests/package/run holds the Debian package to, as functions of what it read: each
returns the list of what is wrong (empty when right), so test_checks.py can break inputs and
see every check fail."""
import re

# Paths the package must ship (CHANGELOG.md, "What the Debian package installs"); each also
# counts compressed (.gz), as dh_compress leaves documentation over 4 KiB, and one under lib/
# also counts under usr/lib/, where trixie's debhelper puts the unit (merged /usr).
REQUIRED = [
    "usr/sbin/iouscoped",
    "usr/bin/iouscope",
    "usr/share/man/man8/iouscoped.8.gz",
    "usr/share/man/man1/iouscope.1.gz",
    "lib/systemd/system/iouscoped.service",
    "etc/default/iouscoped",
    "usr/share/iouscope/grafana/iouscope-overview.json",
    "usr/share/iouscope/grafana/iouscope-sqthread.json",
    "usr/share/iouscope/grafana/iouscope-iopoll.json",
    "usr/share/iouscope/grafana/iouscope-requests.json",
    "usr/share/iouscope/prometheus/iouscope-alerts.rules.yml",
    "usr/share/iouscope/prometheus/iouscope-recording.rules.yml",
    "usr/share/doc/iouscope/copyright",
    "usr/share/doc/iouscope/changelog",
    "usr/share/doc/iouscope/CHANGELOG.md",
    "usr/share/doc/iouscope/FLEET.md",
]
# What a host package must not carry: the test and benchmark programs, the load generator, a
# manual install's prefix, the Prometheus rule tests.
FORBIDDEN = [r"^usr/local/", r"iouscope-load", r"_tests$", r"-bench$", r"/tests/"]
# Run-time dependencies are libraries; these are the non-lib names a C++ program needs.
NON_LIB_ALLOWED = {"zlib1g"}


def shipped_as(path):
    """The names PATH may have in the package."""
    names = [path, path + ".gz"]
    return names + ["usr/" + path] if path.startswith("lib/") else names


def contents(paths):
    """paths: the package's files, without a leading ./ (dpkg-deb -c)."""
    have = set(paths)
    wrong = [f"missing {p}" for p in REQUIRED if not have & set(shipped_as(p))]
    for p in paths:
        for pat in FORBIDDEN:
            if re.search(pat, p):
                wrong.append(f"ships {p} (matches {pat})")
    return wrong


def depends(field):
    """field: the Depends line. Every dependency must be a shared library's package."""
    wrong = []
    for alt in filter(None, (a.strip() for a in field.split(","))):
        for dep in alt.split("|"):
            name = dep.strip().split(" ")[0].split(":")[0]
            if not name.startswith("lib") and name not in NON_LIB_ALLOWED:
                wrong.append(f"depends on {name}, which is not a library")
    return wrong


def versions(cmake, changelog, control, program):
    """The version from CMakeLists.txt's project(), debian/changelog's first entry, the .deb's
    control field and the packaged daemon's --version: one place, four readers."""
    wrong = []
    for name, v in (("debian/changelog", changelog), ("the package", control),
                    ("iouscoped --version", program)):
        if v != cmake:
            wrong.append(f"{name} says {v!r}, CMakeLists.txt {cmake!r}")
    return wrong


def cmake_version(text):
    m = re.search(r"project\(iouscope VERSION ([0-9.]+)", text)
    return m.group(1) if m else None


def changelog_version(text):
    m = re.match(r"iouscope \(([^)]+)\)", text)
    return m.group(1) if m else None


def program_version(text):
    m = re.match(r"iouscoped ([0-9][^\s,]*)", text)
    return m.group(1) if m else None


def long_flags(help_text):
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9.-]*[a-z0-9])", help_text)))


def man_has_flags(help_text, man_text):
    """man_text: the page as man renders it. Every --flag of --help is in it."""
    plain = man_text.replace("\u2010", "-").replace("\u2212", "-")
    plain = re.sub(r".\x08", "", plain)  # overstrike bold and underline
    return [f"{f} is in --help but not in the man page" for f in long_flags(help_text)
            if f not in plain]


def man_synopsis(man_text, lines):
    """man_text: the page as man renders it. It has a SYNOPSIS section, each of LINES a line of
    its own there (help2man makes it from --help's "Usage:" and "or:" lines)."""
    plain = re.sub(r".\x08", "", man_text).replace("\u2010", "-").replace("\u2212", "-")
    m = re.search(r"^SYNOPSIS\n(.*?)^\S", plain, re.M | re.S)
    if not m:
        return ["the man page has no SYNOPSIS"]
    have = [" ".join(l.split()) for l in m.group(1).splitlines()]
    return [f"SYNOPSIS lacks the line {l!r}" for l in lines if l not in have]


def unit(text):
    """The packaged unit: the package's daemon, the package's docs."""
    wrong = []
    if not re.search(r"^ExecStart=/usr/sbin/iouscoped\b", text, re.M):
        wrong.append("ExecStart is not /usr/sbin/iouscoped")
    if "/usr/local/" in text:
        wrong.append("the unit names /usr/local")
    return wrong


def maintainer_scripts(postinst, conffiles):
    wrong = []
    if "deb-systemd-helper" not in postinst or "iouscoped.service" not in postinst:
        wrong.append("postinst does not enable iouscoped.service")
    # debhelper 13 writes `deb-systemd-invoke $_dh_action`, the action start on a first install.
    starts = re.search(r"deb-systemd-invoke (re)?start\b", postinst) or (
        "deb-systemd-invoke $_dh_action" in postinst and "_dh_action=start" in postinst)
    if not starts:
        wrong.append("postinst does not start the service")
    if "/etc/default/iouscoped" not in conffiles.split():
        wrong.append("/etc/default/iouscoped is not a conffile")
    return wrong
