"""Unit tests of tests/run, the test command's tier runner: what it counts, selects and digests.
Run by its own tier (tests/run --tier runner)."""

import importlib.machinery
import importlib.util
import sys
import tempfile
import unittest
import unittest.mock
from pathlib import Path

HERE = Path(__file__).resolve().parent
_loader = importlib.machinery.SourceFileLoader("tests_run", str(HERE.parent / "run"))
_spec = importlib.util.spec_from_loader("tests_run", _loader)
run = importlib.util.module_from_spec(_spec)
sys.modules["tests_run"] = run  # dataclasses look their module up there
_loader.exec_module(run)


def count(lines):
    per: dict[str, run.Counts] = {}
    for line in lines:
        m = run.LINE.match(line)
        per.setdefault(m.group("kernel") or "", run.Counts()).add_line(m.group("text"))
    return per


class CountsTest(unittest.TestCase):
    def test_gtest_summaries_of_two_kernels_side_by_side_stay_apart(self):
        per = count([
            "[sid] [==========] 20 tests from 4 test suites ran. (100 ms total)",
            "[bookworm] [==========] 7 tests from 1 test suite ran. (1 ms total)",
            "[sid] [  PASSED  ] 18 tests.",
            "[bookworm] [  PASSED  ] 6 tests.",
            "[sid] [  SKIPPED ] 1 test, listed below:",
            "[sid] [  SKIPPED ] Live.Something",
            "[sid] [  FAILED  ] 1 test, listed below:",
            "[sid] [  FAILED  ] Live.Other",
            "[bookworm] [  FAILED  ] 1 test, listed below:",
        ])
        sid, bookworm = per["sid"], per["bookworm"]
        self.assertEqual((sid.run, sid.passed, sid.skipped, sid.failed), (20, 18, 1, 1))
        self.assertEqual((bookworm.run, bookworm.passed, bookworm.failed), (7, 6, 1))
        self.assertNotIn("", per)

    def test_ctest_verbose_prefix_and_smoke_checks_count(self):
        per = count(["4: [==========] 3 tests from 1 test suite ran. (5 ms total)",
                     "4: [  PASSED  ] 3 tests.", "smoke: ok    /dev/nvme0n1 is a block device",
                     "smoke: FAIL  nvme1n1 io_poll=0 (is 1)", "smoke: note  nothing"])
        c = per[""]
        self.assertEqual((c.run, c.passed, c.failed), (5, 4, 1))

    def test_checker_totals_count_only_from_their_own_summary_lines(self):
        per = count(["dashboards: 270 passed, 0 failed, 22 skipped",
                     "tests/deploy/run: 130 passed, 1 failed, 0 skipped",
                     "some test said: 5 passed, 5 failed"])
        c = per[""]
        self.assertEqual((c.run, c.passed, c.failed, c.skipped), (423, 400, 1, 22))


class SelectTest(unittest.TestCase):
    def test_a_tier_brings_what_it_needs_in_table_order(self):
        names = [t.name for t in run.select(run.tiers(), "vm,unit", False)]
        self.assertEqual(names, ["build", "unit", "vm-prepare", "vm"])

    def test_check_is_the_inner_loop(self):
        names = [t.name for t in run.select(run.tiers(), None, True)]
        self.assertEqual(names, ["build", "format", "structure", "runner", "unit"])

    def test_no_selection_runs_every_tier(self):
        self.assertEqual(len(run.select(run.tiers(), None, False)), len(run.tiers()))

    def test_an_unknown_tier_is_a_clear_error(self):
        with self.assertRaises(SystemExit) as e:
            run.select(run.tiers(), "unit,lvie", False)
        self.assertIn("no tier 'lvie'", str(e.exception.code))

    def test_every_tier_needs_only_tiers_listed_before_it(self):
        seen = set()
        for t in run.tiers():
            self.assertLessEqual(set(t.needs), seen, t.name)
            seen.add(t.name)

    def test_a_tier_alongside_others_needs_none_of_its_batch_after_it(self):
        for batch in run.batches(run.tiers()):
            before = set()
            for t in batch:
                later = {x.name for x in batch} - before - {t.name}
                self.assertFalse(set(t.needs) & later, t.name)
                before.add(t.name)

    def test_only_neighbours_that_may_run_alongside_share_a_batch(self):
        t = lambda name, alongside: run.Tier(name, "", [], alongside=alongside)  # noqa: E731
        got = run.batches([t("a", True), t("b", False), t("c", True), t("d", True), t("e", False)])
        self.assertEqual([[x.name for x in b] for b in got], [["a"], ["b"], ["c", "d"], ["e"]])


class BatchTest(unittest.TestCase):
    def test_tiers_alongside_run_at_once_and_each_keeps_its_own_log(self):
        with tempfile.TemporaryDirectory() as d, open(Path(d) / "run.log", "w") as run_log:
            logs = Path(d)
            # Each waits for the other's file: one after the other, both would time out.
            wait = ("import pathlib, sys, time\n"
                    "pathlib.Path(sys.argv[1]).touch()\n"
                    "t = time.time()\n"
                    "while not pathlib.Path(sys.argv[2]).exists():\n"
                    "    if time.time() - t > 10: sys.exit(1)\n"
                    "    time.sleep(0.01)\n"
                    "print(sys.argv[1], 'done')\n")
            a, b = str(logs / "a.flag"), str(logs / "b.flag")
            batch = [run.Tier("one", "", [[sys.executable, "-c", wait, a, b]], alongside=True),
                     run.Tier("two", "", [[sys.executable, "-c", wait, b, a]], alongside=True)]
            with unittest.mock.patch.object(run, "vm_results", lambda n: logs / f"{n}.vm.json"), \
                    unittest.mock.patch("sys.stdout"), unittest.mock.patch("sys.stderr"):
                rows = run.run_batch(batch, logs, run_log)
            self.assertEqual([r[0].result for r in rows], ["passed", "passed"])
            self.assertEqual((logs / "one.log").read_text(), f"{a} done\n")
            self.assertEqual((logs / "two.log").read_text(), f"{b} done\n")


    def run_pair(self, first_status: int):
        """Tier "two" needs "one" of its batch; one exits FIRST_STATUS after a while and leaves
        a file, which two requires: started with one, two would fail."""
        with tempfile.TemporaryDirectory() as d, open(Path(d) / "run.log", "w") as run_log:
            logs = Path(d)
            flag = str(logs / "one.flag")
            first = (f"import pathlib, sys, time\ntime.sleep(0.3)\npathlib.Path({flag!r}).touch()\n"
                     f"sys.exit({first_status})\n")
            second = f"import pathlib, sys\nsys.exit(0 if pathlib.Path({flag!r}).exists() else 1)\n"
            batch = [run.Tier("one", "", [[sys.executable, "-c", first]], alongside=True),
                     run.Tier("two", "", [[sys.executable, "-c", second]], needs=("one",),
                              alongside=True)]
            with unittest.mock.patch.object(run, "vm_results", lambda n: logs / f"{n}.vm.json"), \
                    unittest.mock.patch("sys.stdout"), unittest.mock.patch("sys.stderr"):
                return run.run_batch(batch, logs, run_log)

    def test_a_tier_that_needs_one_of_its_batch_starts_when_it_ends(self):
        rows = self.run_pair(0)
        self.assertEqual([r[0].result for r in rows], ["passed", "passed"])

    def test_a_tier_whose_need_in_its_batch_failed_is_not_run(self):
        rows = self.run_pair(1)
        self.assertEqual([r[0].result for r in rows], ["failed", "not run"])
        self.assertEqual(rows[1][0].note, "needs one, which failed")

    def test_a_batch_whose_tiers_were_all_not_run_runs_nothing(self):
        # The build failed: unit, alone in its batch, is not run, and the runner goes on to the
        # next batch (it raised IndexError on the empty one).
        with tempfile.TemporaryDirectory() as d, open(Path(d) / "run.log", "w") as run_log:
            self.assertEqual(run.run_batch([], Path(d), run_log), [])


class PoolTest(unittest.TestCase):
    def test_pooled_vm_tiers_share_a_batch_apart_from_the_others(self):
        t = lambda name, pool=False, alongside=False: run.Tier(  # noqa: E731
            name, "", [], alongside=alongside, pool=["--kernel", "k", "--", "x"] if pool else None)
        got = run.batches([t("a", alongside=True), t("v", pool=True), t("n", pool=True), t("z"),
                           t("w", pool=True)])
        self.assertEqual([[x.name for x in b] for b in got], [["a"], ["v", "n"], ["z"], ["w"]])
        # The table's own: vm and vm-nvme in one pool; vm-nohz (one guest at a time) apart.
        pools = [[x.name for x in b] for b in run.batches(run.tiers()) if b[0].pool]
        self.assertEqual(pools, [["vm", "vm-nvme", "vm-package"]])

    def test_a_pool_splits_its_lines_counts_and_results_by_tier(self):
        # A stand-in for tests/vm/run --batch: it reads the batch file, prints each guest's lines
        # with its [TIER/kernel] prefix and writes each run's --results-json.
        fake = ("import json, shlex, sys\n"
                "lines = open(sys.argv[sys.argv.index('--batch') + 1]).read().splitlines()\n"
                "print('[vm] longest first')\n"
                "for line in lines:\n"
                "    w = shlex.split(line)\n"
                "    label = w[w.index('--label') + 1]\n"
                "    out = w[w.index('--results-json') + 1]\n"
                "    ks = w[w.index('--kernel') + 1].split(',')\n"
                "    res = []\n"
                "    for k in ks:\n"
                "        bad = (label, k) == ('two', 'k2')\n"
                "        print(f'[{label}/{k}] [==========] 3 tests from 1 test suite ran.')\n"
                "        print(f'[{label}/{k}] [  PASSED  ] {2 if bad else 3} tests.')\n"
                "        if bad: print(f'[{label}/{k}] [  FAILED  ] 1 test, listed below:')\n"
                "        res.append({'kernel': k, 'result': 'fail' if bad else 'pass',\n"
                "                    'seconds_total': 5.0})\n"
                "    json.dump(res, open(out, 'w'))\n"
                "sys.exit(1)\n")
        with tempfile.TemporaryDirectory() as d, open(Path(d) / "run.log", "w") as run_log:
            logs = Path(d)
            results = lambda n: logs / f"{n}.vm.json"  # noqa: E731
            tier = lambda name, ks: run.Tier(  # noqa: E731
                name, "", [], vm=(ks, []),
                pool=["--kernel", ks, "--results-json", str(results(name)), "--", "cmd", "a b"])
            batch = [tier("one", "k1,k2"), tier("two", "k1,k2")]
            with unittest.mock.patch.object(run, "vm_results", results), \
                    unittest.mock.patch.object(run, "vm_run",
                                               lambda *a: [sys.executable, "-c", fake, *a]), \
                    unittest.mock.patch("sys.stdout"), unittest.mock.patch("sys.stderr"):
                rows = run.run_batch(batch, logs, run_log)
            written = (logs / "vm-pool.batch").read_text().splitlines()
            self.assertEqual(written[0], f"--kernel k1,k2 --results-json {results('one')} "
                                         f"--label one -- cmd 'a b'")
            one, two = rows
            self.assertEqual([(r.kernel, r.result, r.tests, r.passed) for r in one],
                             [("", "passed", 6, 6), ("k1", "passed", 3, 3), ("k2", "passed", 3, 3)])
            self.assertEqual([(r.kernel, r.result, r.failed) for r in two],
                             [("", "failed", 1), ("k1", "passed", 0), ("k2", "failed", 1)])
            log_one = (logs / "one.log").read_text()
            self.assertIn("[vm] longest first", log_one)  # a line of no guest goes to both
            self.assertIn("[one/k2]", log_one)
            self.assertNotIn("[two/", log_one)


class DigestTest(unittest.TestCase):
    def test_a_failure_keeps_its_own_kernels_lines(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "vm.log").write_text("\n".join([
                "[sid] live_test.cpp:10: Failure",
                "[bookworm] [ RUN      ] Live.Unrelated",
                "[sid] Expected: 1 == 2",
                "[sid] [  FAILED  ] Live.A (5 ms)",
                "[sid] after the failed line",
            ]) + "\n")
            out = run.failure_digest(Path(d), ["vm"]).splitlines()
        self.assertEqual(out, ["==> tier vm", "[sid] live_test.cpp:10: Failure",
                               "[sid] Expected: 1 == 2", "[sid] [  FAILED  ] Live.A (5 ms)"])


if __name__ == "__main__":
    unittest.main()
