"""Unit tests of matrix.py: the matrix file, its defaults and errors, --kernel."""

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import kbuild  # noqa: E402
import matrix  # noqa: E402
from fixtures import MINIMAL, matrix_of  # noqa: E402


class MatrixFile(unittest.TestCase):
    def test_the_projects_matrix_covers_the_four_suites_and_the_seeds(self):
        kernels = matrix.load_matrix(common.DEFAULT_MATRIX)
        self.assertEqual([k.name for k in kernels],
                         ["bullseye", "bookworm", "trixie", "sid", "seeds"])
        self.assertEqual([k.series for k in kernels], ["5.10", "6.1", "6.12", "7", "6.12"])
        self.assertEqual([k.source for k in kernels], ["", "", "", "", "linux-source-6.12"])
        seeds = kernels[-1]
        self.assertTrue((seeds.patch_dir / "config").is_file())
        self.assertEqual([p.name[:5] for p in kbuild.patch_files(seeds.patch_dir)],
                         ["0001-", "0002-", "0003-"])
        sid = kernels[-2]
        self.assertEqual(sid.archives, ("sid",))
        self.assertTrue(sid.split_pattern)
        for k in kernels:
            self.assertIn("nvme", k.modules)
            self.assertIn("null_blk", k.modules)
            self.assertEqual((k.memory, k.cpus), ("2G", 2))

    def test_source_and_patches_go_together_and_name_a_fragment(self):
        with self.assertRaisesRegex(matrix.MatrixError, "'source' and 'patches' go together"):
            matrix_of(MINIMAL + 'source = "linux-source-6.12"\n')
        with self.assertRaisesRegex(matrix.MatrixError, "no directory with a config fragment"):
            matrix_of(MINIMAL + 'source = "linux-source-6.12"\npatches = "no/such/dir"\n')
        k = matrix_of(MINIMAL + 'source = "linux-source-6.12"\npatches = "kernels/seeds"\n')[0]
        self.assertEqual((k.source, k.patches), ("linux-source-6.12", "kernels/seeds"))

    def test_minimal_entry_takes_the_builtin_defaults(self):
        (k,) = matrix_of(MINIMAL)
        self.assertEqual(k.archives, ("bookworm",))
        self.assertEqual(k.metapackage, "linux-image-amd64")
        self.assertEqual(k.modules, tuple(matrix.BUILTIN_DEFAULTS["modules"]))
        self.assertEqual(k.timeout, matrix.BUILTIN_DEFAULTS["timeout"])

    def test_defaults_table_and_per_kernel_overrides(self):
        (k,) = matrix_of("""
            [defaults]
            timeout = 60
            modules = ["a", "b"]
            [[kernel]]
            name = "k1"
            suite = "s"
            series = "1"
            timeout = 90
            extra_modules = ["c", "a"]
            """)
        self.assertEqual(k.timeout, 90)
        self.assertEqual(k.modules, ("a", "b", "c"))

    def test_security_archives_come_from_the_security_mirror(self):
        (k,) = matrix_of("""
            [[kernel]]
            name = "k"
            suite = "bookworm"
            series = "6.1"
            archives = ["bookworm", "bookworm-security"]
            """)
        lines = k.sources_list().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn("http://deb.debian.org/debian bookworm main", lines[0])
        self.assertIn("http://deb.debian.org/debian-security bookworm-security main", lines[1])
        self.assertIn("signed-by=/usr/share/keyrings/debian-archive-keyring.gpg", lines[0])

    def assertMatrixError(self, text, *fragments):
        with self.assertRaises(matrix.MatrixError) as cm:
            matrix_of(text)
        for f in fragments:
            self.assertIn(f, str(cm.exception))

    def test_errors_name_the_place_and_the_problem(self):
        self.assertMatrixError("[[kernel]\n", "not valid TOML")
        self.assertMatrixError("", "no [[kernel]] entries")
        self.assertMatrixError("colour = 1\n" + MINIMAL, "unknown top-level key", "colour")
        self.assertMatrixError("[defaults]\ntimeout_s = 1\n" + MINIMAL, "[defaults]", "timeout_s")
        self.assertMatrixError(MINIMAL + 'sute = "x"\n', "kernel 'k1'", "unknown key 'sute'")
        self.assertMatrixError('[[kernel]]\nname = "k"\nseries = "1"\n', "kernel 'k'", "missing 'suite'")
        self.assertMatrixError('[[kernel]]\nsuite = "s"\nseries = "1"\n', "kernel #1", "missing 'name'")
        self.assertMatrixError(MINIMAL + MINIMAL, "duplicate name")
        self.assertMatrixError(MINIMAL.replace('"k1"', '"all"'), "not 'all'")
        self.assertMatrixError(MINIMAL.replace('"k1"', '"K 1"'), "lower-case")
        self.assertMatrixError(MINIMAL + 'timeout = "10"\n', "'timeout' must be a int")
        self.assertMatrixError(MINIMAL + "timeout = true\n", "'timeout' must be a number")
        self.assertMatrixError(MINIMAL + "timeout = 0\n", "'timeout' must be positive")
        self.assertMatrixError(MINIMAL + 'memory = "2 GiB"\n', "'memory'")
        self.assertMatrixError(MINIMAL + "modules = [1]\n", "list of non-empty strings")
        self.assertMatrixError(MINIMAL + "image_pattern = '('\n", "'image_pattern' is not a regular")
        self.assertMatrixError(MINIMAL + 'tcg_thread = "many"\n', "'tcg_thread'")

    def test_series_matches_whole_version_components(self):
        k = matrix_of(MINIMAL)[0]
        self.assertTrue(k.matches_series("6.1.192"))
        self.assertTrue(k.matches_series("6.1"))
        self.assertFalse(k.matches_series("6.12.118"))
        seven = matrix_of(MINIMAL.replace('"6.1"', '"7"'))[0]
        self.assertTrue(seven.matches_series("7.2.13"))
        self.assertFalse(seven.matches_series("70.1"))

    def test_select_kernels(self):
        kernels = matrix.load_matrix(common.DEFAULT_MATRIX)
        self.assertEqual(len(matrix.select_kernels(kernels, "all")), 5)
        self.assertEqual([k.name for k in matrix.select_kernels(kernels, "sid,bullseye,sid")],
                         ["sid", "bullseye"])
        with self.assertRaises(common.UsageError) as cm:
            matrix.select_kernels(kernels, "bookworm,nosuch")
        self.assertIn("unknown kernel 'nosuch'", str(cm.exception))
        self.assertIn("bullseye, bookworm, trixie, sid", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
