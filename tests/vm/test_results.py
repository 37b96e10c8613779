"""Unit tests of results.py: pass, fail or skip, exit statuses, the summary table."""

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import results  # noqa: E402


class Results(unittest.TestCase):
    def test_classify(self):
        self.assertEqual(results.classify(0, 0), "pass")
        self.assertEqual(results.classify(42, 42), "pass")
        self.assertEqual(results.classify(0, 42), "fail")
        self.assertEqual(results.classify(77, 0), "skip")
        self.assertEqual(results.classify(77, 77), "pass")
        self.assertEqual(results.classify(None, 0), "fail")

    def test_exit_codes_of_a_single_kernel(self):
        self.assertEqual(results.RunResult("k", status=3).exit_code(), 3)
        self.assertEqual(results.RunResult("k", reason="timed out after 5 s").exit_code(), 124)
        self.assertEqual(results.RunResult("k", reason="download failed").exit_code(), 125)

    def test_summary_table(self):
        runs = [results.RunResult("bookworm", "6.1.192-3", "6.1.0-57-amd64", "pass", 0,
                                  seconds_boot=12.4, seconds_total=100),
                results.RunResult("sid", result="fail", reason="timed out after 5 s",
                                  log_dir="/tmp/l/sid")]
        text = results.summary_table(runs)
        header, first, second, reason = text.splitlines()
        self.assertEqual(header.split()[:4], ["KERNEL", "VERSION", "RELEASE", "RESULT"])
        self.assertEqual(first.split()[:5], ["bookworm", "6.1.192-3", "6.1.0-57-amd64", "PASS", "0"])
        self.assertEqual(second.split()[:5], ["sid", "-", "-", "FAIL", "-"])
        self.assertIn("sid: timed out after 5 s (logs: /tmp/l/sid)", reason)


if __name__ == "__main__":
    unittest.main()
