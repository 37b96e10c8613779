"""Unit tests of harness.py, and of tests/vm/run as a caller sees it: log directories,
usage errors and exit statuses, --list and --help. No network, no QEMU, no root:
    python3 -m unittest discover -s tests/vm -p 'test_*.py'
Each step's module has its own test_<module>.py beside this one; the smoke run that boots
every kernel is separate (docs/VM.md)."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import harness  # noqa: E402

RUN = HERE / "run"


class LogDirectories(unittest.TestCase):
    def test_each_run_gets_its_own_directory_and_old_ones_go(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            made = []
            for i in range(harness.KEEP_LOG_RUNS + 2):
                run = root / f"20260101-0000{i:02d}-1"
                run.mkdir()
                made.append(run)
            newest = harness.new_log_dir(root)
            self.assertEqual((root / "latest").resolve(), newest.resolve())
            left = sorted(p.name for p in root.iterdir() if p.name != "latest")
            self.assertEqual(len(left), harness.KEEP_LOG_RUNS)
            self.assertIn(newest.name, left)
            self.assertNotIn(made[0].name, left)


class CommandLine(unittest.TestCase):
    """Through the real entry point, so the exit statuses are the ones a caller sees."""

    def run_cli(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([str(RUN), *args], capture_output=True, text=True, env=e, timeout=60)

    def assertUsage(self, r, fragment):
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(fragment, r.stderr)

    def test_usage_errors(self):
        self.assertUsage(self.run_cli(), "--kernel is required")
        self.assertUsage(self.run_cli("--kernel", "bookworm"), "no COMMAND given")
        self.assertUsage(self.run_cli("--kernel", "bookworm", "--"), "no COMMAND given")
        self.assertUsage(self.run_cli("--list", "--kernel", "sid"), "--list takes no")
        self.assertUsage(self.run_cli("--kernel", "sid", "--prepare-only", "--", "true"),
                         "--prepare-only takes no COMMAND")
        self.assertUsage(self.run_cli("--kernel", "sid", "--refresh", "--offline", "--", "true"),
                         "contradict")
        self.assertUsage(self.run_cli("--kernel", "sid", "--env", "1X=2", "--", "true"), "NAME=VALUE")
        self.assertUsage(self.run_cli("--kernel", "sid", "--timeout", "0", "--", "true"),
                         "--timeout must be positive")
        self.assertUsage(self.run_cli("--kernel", "sid", "--memory", "lots", "--", "true"), "--memory")
        self.assertUsage(self.run_cli("--bogus"), "unrecognized arguments")
        for bad, fragment in (("a\nb", "contains a newline"),
                              ("quiet console=tty0", "may not set console="),
                              ("rdinit=/sbin/init", "may not set rdinit="),
                              ("panic=0", "may not set panic=")):
            self.assertUsage(self.run_cli("--kernel", "sid", "--append", bad, "--", "true"),
                             fragment)

    def test_a_kernel_without_its_root_image_is_refused(self):
        r = self.run_cli("--kernel", "bookworm,trixie", "--root-image", f"trixie={__file__}",
                         "--", "true")
        self.assertUsage(r, "--root-image gives no root to kernel bookworm")

    def test_unknown_kernel(self):
        r = self.run_cli("--kernel", "nosuch", "--", "true")
        self.assertUsage(r, "unknown kernel 'nosuch'; the matrix has: bullseye, bookworm, trixie, sid")

    def test_bad_matrix_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write("[[kernel]]\nname = 'x'\n")
            f.flush()
            self.assertUsage(self.run_cli("--matrix", f.name, "--list"), "missing 'suite'")
        self.assertUsage(self.run_cli("--matrix", "/nonexistent.toml", "--list"),
                         "cannot read the matrix file")

    def test_missing_qemu(self):
        r = self.run_cli("--kernel", "sid", "--", "true",
                         env={"IOUSCOPE_VM_QEMU": "/nonexistent/qemu-system-x86_64"})
        self.assertEqual(r.returncode, common.EXIT_HARNESS, r.stderr)
        self.assertIn("/nonexistent/qemu-system-x86_64 not found", r.stderr)

    def test_unwritable_cache(self):
        r = self.run_cli("--kernel", "sid", "--prepare-only",
                         env={"IOUSCOPE_VM_CACHE": "/proc/iouscope-vm-cache"})
        self.assertEqual(r.returncode, common.EXIT_HARNESS, r.stderr)
        self.assertIn("not writable", r.stderr)
        self.assertIn("IOUSCOPE_VM_CACHE", r.stderr)

    def test_offline_with_an_empty_cache(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_cli("--kernel", "bookworm", "--prepare-only", "--offline",
                             env={"IOUSCOPE_VM_CACHE": d})
        self.assertEqual(r.returncode, 1, r.stderr)  # the kernel fails, the summary says why
        self.assertIn("nothing cached and --offline given", r.stdout + r.stderr)

    def test_unreachable_archive(self):
        # Port 9 on loopback: refused at once, and no traffic leaves the machine.
        text = textwrap.dedent("""
            [defaults]
            mirror = "http://127.0.0.1:9/debian"
            security_mirror = "http://127.0.0.1:9/debian-security"
            [[kernel]]
            name = "k"
            suite = "bookworm"
            series = "6.1"
            """)
        with tempfile.TemporaryDirectory() as d:
            m = Path(d) / "m.toml"
            m.write_text(text)
            r = self.run_cli("--matrix", str(m), "--kernel", "k", "--prepare-only",
                             env={"IOUSCOPE_VM_CACHE": str(Path(d) / "cache")})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("cannot update the package lists of bookworm", r.stdout)
        self.assertRegex(r.stdout, r"k +- +- +FAIL")

    def test_list(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_cli("--list", env={"IOUSCOPE_VM_CACHE": d})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split()[:3], ["NAME", "SUITE", "SERIES"])
        self.assertEqual([l.split()[0] for l in lines[1:]],
                         ["bullseye", "bookworm", "trixie", "sid", "seeds"])
        self.assertIn("7.x", lines[4])

    def test_help_reads_like_a_manual(self):
        r = self.run_cli("--help")
        self.assertEqual(r.returncode, 0)
        for section in ("usage:", "exit status:", "environment:", "files:", "examples:",
                        "IOUSCOPE_VM_CACHE", "/dev/ng0n1", "--expect-status", "77"):
            self.assertIn(section, r.stdout)
        self.assertIn("--append ARGS", r.stdout)
        self.assertIn('--append "nohz_full=1 isolcpus=1"', " ".join(r.stdout.split()))


if __name__ == "__main__":
    unittest.main()
