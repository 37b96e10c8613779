"""Unit tests of kbuild.py: the config fragment and the build key."""

import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kbuild  # noqa: E402


class SourceBuild(unittest.TestCase):
    def test_a_dropped_option_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            frag = Path(d) / "config"
            frag.write_text("# comment\n\nCONFIG_IO_URING=y\nCONFIG_NR_CPUS=8\nCONFIG_BLK_DEV_NVME=m\n")
            wanted = kbuild.requested_config(frag)
        self.assertEqual(wanted, {"CONFIG_IO_URING": "y", "CONFIG_NR_CPUS": "8",
                                  "CONFIG_BLK_DEV_NVME": "m"})
        final = "CONFIG_IO_URING=y\nCONFIG_NR_CPUS=8\n# CONFIG_BLK_DEV_NVME is not set\n"
        self.assertEqual(kbuild.missing_config(wanted, final),
                         ["CONFIG_BLK_DEV_NVME=m (got not set)"])
        self.assertEqual(kbuild.missing_config(wanted, final.replace("# CONFIG_BLK_DEV_NVME is not set",
                                                                     "CONFIG_BLK_DEV_NVME=m")), [])

    def test_a_line_that_is_not_an_option_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            frag = Path(d) / "config"
            frag.write_text("CONFIG_IO_URING=y\nIO_URING=y\n")
            with self.assertRaisesRegex(kbuild.BuildError, "config:2: not a CONFIG_X=value"):
                kbuild.requested_config(frag)

    def test_the_key_follows_the_patches_and_the_source(self):
        with tempfile.TemporaryDirectory() as d:
            pd = Path(d)
            (pd / "config").write_text("CONFIG_IO_URING=y\n")
            (pd / "0001-a.patch").write_text("one\n")
            k1 = kbuild.build_key("linux-source-6.12_1_all.deb", pd)
            self.assertEqual(k1, kbuild.build_key("linux-source-6.12_1_all.deb", pd))
            self.assertNotEqual(k1, kbuild.build_key("linux-source-6.12_2_all.deb", pd))
            (pd / "0001-a.patch").write_text("two\n")
            k2 = kbuild.build_key("linux-source-6.12_1_all.deb", pd)
            self.assertNotEqual(k1, k2)
            (pd / "config").write_text("CONFIG_IO_URING=y\nCONFIG_BPF=y\n")
            self.assertNotEqual(k2, kbuild.build_key("linux-source-6.12_1_all.deb", pd))


if __name__ == "__main__":
    unittest.main()
