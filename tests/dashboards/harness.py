"""Processes and Prometheus for the dashboard tests: iouscoped, iouscope-load and Debian's
prometheus, started on free loopback ports and always stopped again; cgroups to run loads in,
and a file served over HTTP for Prometheus to scrape as another target.

Only the Python 3 standard library is used. Every child gets PR_SET_PDEATHSIG, so even a
SIGKILLed test leaves nothing running; on a normal exit, an exception, SIGINT, SIGTERM or
SIGHUP, Harness.close() stops them (SIGTERM, then SIGKILL after a grace period), then stops the
HTTP servers and removes the cgroups it made.
"""

import ctypes
import errno
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("IOUSCOPE_BUILD", os.path.join(REPO, "build"))
DAEMON = os.path.join(BUILD, "iouscoped")
LOAD = os.path.join(BUILD, "iouscope-load")
PROMETHEUS = os.environ.get("PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("PROMTOOL", "/usr/bin/promtool")
RULES_DIR = os.path.join(REPO, "dashboards", "prometheus")
GRAFANA_DIR = os.path.join(REPO, "dashboards", "grafana")
JOB = "iouscope"  # the job name the alert rules expect

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _preexec(cgroup):
    """Runs in the child between fork and exec. Joining the cgroup here, before exec, means
    every thread the program creates, its SQ threads included, is born in it."""
    def run():
        _die_with_parent()
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return run


def cgroup2_mount(mountinfo="/proc/self/mountinfo"):
    """Where the cgroup v2 hierarchy is mounted (on a hybrid host not /sys/fs/cgroup), or None."""
    try:
        with open(mountinfo) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        # ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and len(fields) >= 5 and right.split()[:1] == ["cgroup2"]:
            # mountinfo escapes space, tab, newline and backslash as octal
            return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
    return None


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def rule_files():
    return sorted(os.path.join(RULES_DIR, f) for f in os.listdir(RULES_DIR)
                  if f.endswith(".rules.yml"))


def preconditions():
    """Why the live part cannot run on this host, or None. (A missing build or prometheus is a
    failure, not a reason to skip: the callers check those.)"""
    if os.geteuid() != 0:
        return "needs root (BPF): run it as root or through scripts/dev"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    return None


class Proc:
    def __init__(self, name, argv, workdir, stdout_pipe=False, cgroup=None):
        self.name = name
        self.argv = argv
        self.log_path = os.path.join(workdir, name + ".log")
        self._log = open(self.log_path, "wb")
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_pipe else self._log, stderr=self._log,
            preexec_fn=_preexec(cgroup), close_fds=True)
        self.pid = self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def stop(self, grace=8.0):
        """SIGTERM, wait, SIGKILL: only this process, by its pid."""
        if self.popen.poll() is None:
            try:
                self.popen.send_signal(signal.SIGTERM)
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
            except ProcessLookupError:
                pass
        if self.popen.stdout:
            self.popen.stdout.close()
        self._log.close()
        return self.popen.returncode

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(data[-lines:])
        except OSError:
            return ""


class _FileHandler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_args):
        pass  # a line per scrape would bury the test's output


class Harness:
    """Owns a work directory, the processes started in it, HTTP servers and cgroups."""

    def __init__(self, keep=False, prefix="iouscope-dash-"):
        self.workdir = tempfile.mkdtemp(prefix=prefix)
        self.keep = keep
        self.procs = []
        self.servers = []
        self.cgroups = []  # directories this harness created, parents before children
        self._old_handlers = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame):
        raise SystemExit(128 + signum)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self, name, argv, stdout_pipe=False, cgroup=None):
        p = Proc(name, argv, self.workdir, stdout_pipe, cgroup)
        self.procs.append(p)
        return p

    def close(self):
        for p in reversed(self.procs):
            p.stop()
        self.procs = []
        for server, thread in self.servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self.servers = []
        self.remove_cgroups()
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers = {}
        if not self.keep:
            subprocess.run(["rm", "-rf", "--one-file-system", self.workdir], check=False)

    # -- cgroups -------------------------------------------------------------------------------
    def make_cgroup(self, mount, path):
        """Creates mount + path and whichever of its parents are missing; returns the directory.
        close() removes what this made."""
        parts = [x for x in path.split("/") if x]
        cur = mount
        for part in parts:
            cur = os.path.join(cur, part)
            try:
                os.mkdir(cur)
            except FileExistsError:
                continue
            self.cgroups.append(cur)
        return cur

    def remove_cgroups(self, wait=5.0):
        """Leaves first. A cgroup can be removed only once empty, and an exited process leaves
        it a moment after its parent reaped it, so EBUSY is retried for a while."""
        deadline = time.time() + wait
        for d in reversed(self.cgroups):
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or time.time() > deadline:
                        print(f"harness: cannot remove cgroup {d}: {e}", flush=True)
                        break
                    time.sleep(0.05)
        self.cgroups = []

    # -- a file as a scrape target ------------------------------------------------------------
    def serve_metrics(self, path):
        """Serves the file at http://127.0.0.1:PORT/metrics from a thread until close();
        returns "127.0.0.1:PORT"."""
        with open(path, "rb") as f:
            handler = type("Handler", (_FileHandler,), {"body": f.read()})
        server = http.server.HTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                  name="serve " + os.path.basename(path), daemon=True)
        thread.start()
        self.servers.append((server, thread))
        return f"127.0.0.1:{server.server_address[1]}"

    # -- iouscoped --------------------------------------------------------------------------
    def start_daemon(self, interval="250ms", extra=()):
        port = free_port()
        p = self.start("iouscoped", [DAEMON, f"--web.listen-address=127.0.0.1:{port}",
                                       f"--sample.interval={interval}", *extra])
        p.address = f"127.0.0.1:{port}"
        deadline = time.time() + 15
        while time.time() < deadline:
            if not p.alive():
                raise RuntimeError("iouscoped exited:\n" + p.log_tail())
            try:
                http_get(f"http://{p.address}/metrics", timeout=1)
                return p
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        raise RuntimeError("iouscoped did not serve /metrics within 15 s:\n" + p.log_tail())

    # -- iouscope-load ----------------------------------------------------------------------
    def start_load(self, args, name="iouscope-load", cgroup=None):
        """Starts the load generator with --json, in the cgroup directory if one is given, and
        waits until it has started submitting. Returns (proc, rings) where rings are the setup
        records (index, pid, fd, mode, sq_thread)."""
        p = self.start(name, [LOAD, "--json"] + args, stdout_pipe=True, cgroup=cgroup)
        rings = []
        deadline = time.time() + 15
        while time.time() < deadline:
            line = p.popen.stdout.readline()
            if not line:
                raise RuntimeError(f"{name} exited before starting:\n" + p.log_tail())
            rec = json.loads(line)
            if rec.get("phase") == "setup":
                rings.append(rec)
            elif rec.get("started"):
                return p, rings
        raise RuntimeError("iouscope-load did not start within 15 s")

    # -- prometheus ---------------------------------------------------------------------------
    def start_prometheus(self, target, scrape="1s", rules=None, more_jobs=()):
        """Scrapes target as job iouscope and each (job, target) of more_jobs."""
        port = free_port()
        cfg = os.path.join(self.workdir, "prometheus.yml")
        rules = rule_files() if rules is None else rules
        with open(cfg, "w") as f:
            f.write("# generated by tests/dashboards\n")
            f.write("global:\n")
            f.write(f"  scrape_interval: {scrape}\n  scrape_timeout: {scrape}\n")
            f.write(f"  evaluation_interval: {scrape}\n")
            f.write("rule_files:\n")
            for r in rules:
                f.write(f"  - {json.dumps(r)}\n")
            f.write("scrape_configs:\n")
            for job, t in [(JOB, target)] + list(more_jobs):
                f.write(f"  - job_name: {json.dumps(job)}\n    static_configs:\n")
                f.write(f"      - targets: [{json.dumps(t)}]\n")
        check = subprocess.run([PROMTOOL, "check", "config", cfg], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError("promtool check config failed:\n" + check.stdout + check.stderr)
        p = self.start("prometheus", [
            PROMETHEUS, f"--config.file={cfg}",
            f"--storage.tsdb.path={os.path.join(self.workdir, 'tsdb')}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
            "--storage.tsdb.retention.time=1d"])
        api = PromAPI(f"http://127.0.0.1:{port}")
        deadline = time.time() + 30
        while time.time() < deadline:
            if not p.alive():
                raise RuntimeError("prometheus exited:\n" + p.log_tail())
            try:
                http_get(api.base + "/-/ready", timeout=1)
                p.api = api
                p.config = cfg
                return p
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        raise RuntimeError("prometheus not ready within 30 s:\n" + p.log_tail())


class PromError(Exception):
    pass


class PromAPI:
    def __init__(self, base):
        self.base = base

    def _get(self, path, params):
        url = self.base + path + "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            body = http_get(url, timeout=10)
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
        try:
            doc = json.loads(body)
        except ValueError:
            raise PromError(f"{path}: not JSON: {body[:200]}")
        if doc.get("status") != "success":
            raise PromError(f"{doc.get('errorType', 'error')}: {doc.get('error', body[:200])}")
        return doc["data"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params)

    def query_range(self, expr, start, end, step):
        return self._get("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}",
                                                 "end": f"{end:.3f}", "step": step})

    def label_values(self, label, match, start, end):
        return self._get(f"/api/v1/label/{urllib.parse.quote(label)}/values",
                         {"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})

    def rules(self):
        return self._get("/api/v1/rules", {})["groups"]

    def scalar(self, expr, default=0.0):
        r = self.query(expr)
        if r["resultType"] == "vector" and r["result"]:
            return float(r["result"][0]["value"][1])
        if r["resultType"] == "scalar":
            return float(r["result"][1])
        return default


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def parse_samples(text):
    """[(name, {label: value}, value)] of a text exposition (no timestamps, no exemplars)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample: {line!r}")
        labels = {}
        for k, v in _LABEL.findall(m.group(2) or ""):
            labels[k] = re.sub(r"\\(.)", lambda x: {"n": "\n"}.get(x.group(1), x.group(1)), v)
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def parse_exposition(text):
    """Families of a text exposition: {family: {"type": t, "labels": set, "series": n}}, with
    histogram families also listed under their _bucket/_sum/_count sample names."""
    fams = {}
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            types[name] = typ.strip()
            fams.setdefault(name, {"type": typ.strip(), "labels": set(), "series": 0})
            continue
        if not line or line.startswith("#"):
            continue
        name_end = len(line)
        for i, ch in enumerate(line):
            if ch in "{ ":
                name_end = i
                break
        name = line[:name_end]
        labels = set()
        if name_end < len(line) and line[name_end] == "{":
            i = name_end + 1
            while i < len(line) and line[i] != "}":
                eq = line.index("=", i)
                labels.add(line[i:eq].strip().lstrip(","))
                j = eq + 2  # skip ="
                while line[j] != '"':
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                if i < len(line) and line[i] == ",":
                    i += 1
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)] if name.endswith(suffix) else None
            if base and types.get(base) in ("histogram", "summary"):
                family = base
                break
        f = fams.setdefault(family, {"type": types.get(family, "untyped"), "labels": set(),
                                     "series": 0})
        f["labels"] |= labels - {"le", "quantile"}
        f["series"] += 1
    return fams
