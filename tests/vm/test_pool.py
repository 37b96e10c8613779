"""Unit tests of tests/vm/pool.py: the guests of several runs in one pool of slots, longest
first. No QEMU: boot() is a stand-in that records what it was given.
    python3 -m unittest discover -s tests/vm -p 'test_*.py'"""

import argparse
import sys
import tempfile
import threading
import time
import unittest
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pool  # noqa: E402


@dataclass
class Kernel:
    name: str


@dataclass
class Result:
    kernel: str
    result: str = "pass"
    seconds_total: float = 0.0


def run_args(*command: str, label: str | None = None, append: str = "",
             nvme: bool = False) -> argparse.Namespace:
    return argparse.Namespace(command=list(command), label=label, kernel_append=append,
                              nvme_subsystem=nvme)


def jobs_of(runs: list[tuple[argparse.Namespace, list[str]]]) -> list[pool.Job]:
    return [pool.Job(i, args, Kernel(k)) for i, (args, ks) in enumerate(runs) for k in ks]


class Durations(unittest.TestCase):
    def test_guests_start_longest_first_by_the_last_run(self):
        args = run_args("tests/vm/guest-suite", "smoke")
        other = run_args("tests/vm/guest-suite", "smoke", append="nohz_full=1")
        queue = jobs_of([(args, ["k1", "k2", "k3"])])
        names = lambda jobs: [j.kernel.name for j in jobs]  # noqa: E731
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "durations.json"
            first = pool.RunDurations(path)
            self.assertEqual(first.longest_first(queue), queue)  # nothing known: given order
            first.record([(queue[0], Result("k1", "pass", 10)), (queue[1], Result("k2", "fail", 99)),
                          (queue[2], Result("k3", "pass", 30))])
            # k2 failed, so it has no figure: it may be the longest, and starts first.
            self.assertEqual(names(pool.RunDurations(path).longest_first(queue)), ["k2", "k3", "k1"])
            again = pool.RunDurations(path)
            again.record([(queue[1], Result("k2", "pass", 20)), (queue[2], Result("k3", "fail", 1))])
            self.assertEqual(names(pool.RunDurations(path).longest_first(queue)), ["k3", "k2", "k1"])
            # Another command (here, other kernel words) has durations of its own.
            theirs = jobs_of([(other, ["k1", "k2", "k3"])])
            self.assertEqual(pool.RunDurations(path).longest_first(theirs), theirs)
            path.write_text("not json")
            self.assertEqual(pool.RunDurations(path).longest_first(queue), queue)

    def test_the_key_is_the_one_earlier_caches_were_written_under(self):
        # durations.json from before the pool keyed a command the same way: its figures stay.
        import hashlib
        args = run_args("tests/vm/guest-suite", "smoke", append="x", nvme=True)
        self.assertEqual(pool.RunDurations.key(args), hashlib.sha256(
            "\0".join(["tests/vm/guest-suite", "smoke", "x", "True"]).encode()).hexdigest()[:16])


class Batch(unittest.TestCase):
    def test_lines_are_shell_words_without_pool_options(self):
        self.assertEqual(pool.batch_lines("# c\n\n--kernel a --label x -- sh -c 'echo hi'\n"),
                         [["--kernel", "a", "--label", "x", "--", "sh", "-c", "echo hi"]])
        for bad, why in (("--kernel a -- 'open\n", "line 1"), ("--offline --kernel a -- t\n", "--offline"),
                         ("--jobs=2 --kernel a -- t\n", "--jobs"), ("\n# only\n", "no run")):
            with self.assertRaises(ValueError) as e:
                pool.batch_lines(bad)
            self.assertIn(why, str(e.exception))


class RunPool(unittest.TestCase):
    def test_two_runs_share_the_slots_longest_guest_first(self):
        long_run, short_run = run_args("long", label="vm"), run_args("short", label="nvme")
        jobs = jobs_of([(long_run, ["a", "b", "c"]), (short_run, ["a", "b"])])
        with tempfile.TemporaryDirectory() as d:
            durations = pool.RunDurations(Path(d) / "durations.json")
            durations.record([(jobs[0], Result("a", "pass", 5)), (jobs[1], Result("b", "pass", 30)),
                              (jobs[2], Result("c", "pass", 20)), (jobs[3], Result("a", "pass", 10)),
                              (jobs[4], Result("b", "pass", 1))])
            started, busy, lock = [], set(), threading.Lock()
            overlap = []

            def boot(job, slot):
                with lock:
                    started.append(pool.name(job))
                    self.assertNotIn(slot, busy)  # a slot boots one guest at a time
                    busy.add(slot)
                    overlap.append(len(busy))
                time.sleep(0.02)
                with lock:
                    busy.discard(slot)
                return Result(job.kernel.name, "pass", {"vm": 1, "nvme": 2}[job.args.label])

            logged = []
            results = pool.run_pool(jobs, 2, durations, boot, logged.append)
            # Both runs' guests in one order, longest first, the slots never over-booked.
            self.assertEqual(started[:2], ["vm/b", "vm/c"])
            self.assertEqual(sorted(started), sorted(pool.name(j) for j in jobs))
            self.assertLessEqual(max(overlap), 2)
            self.assertEqual(started[2:], ["nvme/a", "vm/a", "nvme/b"])
            # Results come back in the jobs' order, whatever order they ran in.
            self.assertEqual([(r.kernel, r.seconds_total) for r in results],
                             [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2)])
            self.assertIn("vm/b 30 s", logged[0])
            # What they took now is what orders the next pool.
            again = pool.RunDurations(Path(d) / "durations.json")
            self.assertEqual(again.last(jobs[3]), 2)

    def test_a_guest_without_a_label_is_named_by_its_kernel(self):
        self.assertEqual(pool.name(pool.Job(0, run_args("x"), Kernel("sid"))), "sid")
        self.assertEqual(pool.name(pool.Job(0, run_args("x", label="n"), Kernel("sid"))), "n/sid")


if __name__ == "__main__":
    unittest.main()
