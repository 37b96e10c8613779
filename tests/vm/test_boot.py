"""Unit tests of boot.py: the script a guest runs COMMAND with."""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boot  # noqa: E402
import common  # noqa: E402


class Running(unittest.TestCase):
    def test_job_script_preserves_arguments_and_environment(self):
        argv = ["sh", "-c", 'printf "%s|" "$@"; echo "$X"', "arg0", "two words", "it's", "$HOME", ""]
        with tempfile.TemporaryDirectory() as d:
            script = boot.job_script(argv, Path(d), {"X": "a b'c"})
            r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={})
        self.assertEqual(r.stdout, "two words|it's|$HOME||a b'c\n")

    def test_job_script_cd_failure_is_a_harness_failure(self):
        r = subprocess.run(["sh", "-c", boot.job_script(["true"], Path("/nonexistent/x"), {})],
                           capture_output=True)
        self.assertEqual(r.returncode, common.EXIT_HARNESS)


if __name__ == "__main__":
    unittest.main()
