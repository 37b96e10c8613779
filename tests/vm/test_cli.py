"""Unit tests of cli.py: parse_args, --jobs, --batch, --append, the separator."""

import contextlib
import io
import os
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cli  # noqa: E402
import common  # noqa: E402
import packages  # noqa: E402
import qemu  # noqa: E402
import store  # noqa: E402
from fixtures import MINIMAL, kernel_cmdline, matrix_of  # noqa: E402


class Options(unittest.TestCase):
    def test_parse_args_checks_jobs(self):
        self.assertEqual(cli.parse_args(["--kernel", "all", "--", "true"]).jobs, 1)
        ncpu = len(os.sched_getaffinity(0))
        self.assertEqual(cli.parse_args(["--kernel", "all", "--jobs", str(ncpu), "--",
                                         "true"]).jobs, ncpu)
        for bad in ("0", str(ncpu + 1)):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                cli.parse_args(["--kernel", "all", "--jobs", bad, "--", "true"])
            self.assertEqual(e.exception.code, common.EXIT_USAGE)
        if ncpu > 1:
            with mock.patch.dict(os.environ, {"IOUSCOPE_VM_TCG_THREAD": "multi"}), \
                    self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                cli.parse_args(["--kernel", "all", "--jobs", "2", "--", "true"])

    def test_parse_args_takes_a_batch_of_labelled_runs(self):
        with tempfile.TemporaryDirectory() as d:
            batch = Path(d) / "runs"
            batch.write_text("# two runs\n"
                             "--kernel all --label vm --expect-status 42 -- tests/vm/guest-suite smoke\n"
                             "\n"
                             "--kernel sid --label nvme --nvme-subsystem -- 'a b' c\n")
            args = cli.parse_args(["--batch", str(batch)])
            self.assertEqual([r.label for r in args.runs], ["vm", "nvme"])
            self.assertEqual(args.runs[0].expect_status, 42)
            self.assertTrue(args.runs[1].nvme_subsystem)
            self.assertEqual(args.runs[1].command, ["a b", "c"])

            def refused(text, *outer):
                batch.write_text(text)
                err = io.StringIO()
                with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
                    cli.parse_args([*outer, "--batch", str(batch)])
                self.assertEqual(e.exception.code, common.EXIT_USAGE)
                return err.getvalue()

            ok = "--kernel sid --label a -- true\n"
            self.assertIn("needs a --label", refused("--kernel sid -- true\n"))
            self.assertIn("two runs are labelled 'a'", refused(ok + ok))
            self.assertIn("--jobs is the pool's", refused("--kernel sid --label a --jobs 2 -- true\n"))
            self.assertIn("no run in it", refused("# nothing\n"))
            self.assertIn("--label 'a/b'", refused("--kernel sid --label a/b -- true\n"))
            self.assertIn("in --batch", refused("--kernel nope --label a --bogus -- true\n"))
            self.assertIn("not --kernel", refused(ok, "--kernel", "sid"))
            self.assertIn("not --append", refused(ok, "--append", "quiet"))
            # A pool-wide word after the run's -- is its command's, not the pool's.
            batch.write_text("--kernel sid --label a -- echo --jobs\n")
            self.assertEqual(cli.parse_args(["--batch", str(batch)]).runs[0].command,
                             ["echo", "--jobs"])

    def test_append_options_keep_their_order(self):
        args = cli.parse_args(["--kernel", "sid", "--append", "nohz_full=1 isolcpus=1",
                               "--append", "a", "--append", "", "--append", " b=2 ",
                               "--", "true"])
        self.assertEqual(args.kernel_append, "nohz_full=1 isolcpus=1 a b=2")
        self.assertEqual(cli.parse_args(["--kernel", "sid", "--", "true"]).kernel_append, "")
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        line = kernel_cmdline(qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2,
                                                extra_append=args.kernel_append))
        self.assertTrue(line.endswith("loglevel=6 nohz_full=1 isolcpus=1 a b=2"), line)

    def test_parse_args_rejects_bad_append_values(self):
        for bad, fragment in (("a\0b", "NUL byte"), ("x\ny", "newline"),
                              ("console=ttyS1", "may not set console= because")):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
                cli.parse_args(["--kernel", "sid", "--append", "quiet", "--append", bad,
                                "--", "true"])
            self.assertEqual(cm.exception.code, common.EXIT_USAGE)
            self.assertIn(fragment, err.getvalue())

    def test_parse_args_strips_the_separator(self):
        args = cli.parse_args(["--kernel", "sid", "--env", "A=b=c", "--", "ls", "--", "-l"])
        self.assertEqual(args.command, ["ls", "--", "-l"])
        self.assertEqual(args.env, {"A": "b=c"})


if __name__ == "__main__":
    unittest.main()
