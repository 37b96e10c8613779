"""Unit tests of packages.py: deb822 metadata, the packages of a kernel, apt's own state."""

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402
import packages  # noqa: E402
from fixtures import MINIMAL, matrix_of  # noqa: E402


def fake_archive(stanzas: dict[str, str]):
    """apt-cache show --no-all-versions, from a dict of package -> stanza text."""
    return lambda name: stanzas.get(name, "")


BOOKWORM = {
    "linux-image-amd64": "Package: linux-image-amd64\nVersion: 6.1.192-3\n"
                         "Depends: linux-image-6.1.0-57-amd64 (= 6.1.192-3)\n",
    "linux-image-6.1.0-57-amd64": "Package: linux-image-6.1.0-57-amd64\nVersion: 6.1.192-3\n"
                                  "Architecture: amd64\nSize: 70000000\n"
                                  "Depends: kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2)"
                                  " | linux-initramfs-tool\n",
}
SID = {
    "linux-image-amd64": "Package: linux-image-amd64\nVersion: 7.2.13-1\n"
                         "Depends: linux-base-amd64 (= 7.2.13-1), linux-image-7.2.13+deb14-amd64 (= 7.2.13-1)\n",
    "linux-image-7.2.13+deb14-amd64":
        "Package: linux-image-7.2.13+deb14-amd64\nVersion: 7.2.13-1\nArchitecture: amd64\n"
        "Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, "
        "linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), "
        "linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)\n",
    "linux-base-7.2.13+deb14-amd64": "Package: linux-base-7.2.13+deb14-amd64\nVersion: 7.2.13-1\n"
                                     "Architecture: amd64\nSize: 1\n",
    "linux-binary-7.2.13+deb14-amd64": "Package: linux-binary-7.2.13+deb14-amd64\nVersion: 7.2.13-1\n"
                                       "Architecture: amd64\nSize: 2\n",
    "linux-modules-7.2.13+deb14-amd64": "Package: linux-modules-7.2.13+deb14-amd64\nVersion: 7.2.13-1\n"
                                        "Architecture: amd64\nSize: 3\n",
}


class PackageSelection(unittest.TestCase):
    def setUp(self):
        self.kernel = matrix_of(MINIMAL)[0]

    def test_stanzas_and_depends(self):
        (s,) = packages.parse_stanzas("Package: a\nDescription: x\n more\n\n")
        self.assertEqual(s["Description"], "x\nmore")
        self.assertEqual(packages.depends_names("a (>= 1) | b:any, c"), ["a", "b", "c"])

    def test_versions_and_file_names(self):
        self.assertEqual(packages.upstream_of("1:6.1.192-3"), "6.1.192")
        self.assertEqual(packages.upstream_of("7.2.13"), "7.2.13")
        self.assertEqual(packages.deb_filename("p", "1:2-3", "amd64"), "p_1%3a2-3_amd64.deb")

    def test_a_plain_image_is_one_package(self):
        sel = packages.resolve_selection(self.kernel, fake_archive(BOOKWORM))
        self.assertEqual(sel.image, "linux-image-6.1.0-57-amd64")
        self.assertEqual(sel.version, "6.1.192-3")
        self.assertEqual([p["name"] for p in sel.packages], ["linux-image-6.1.0-57-amd64"])
        self.assertEqual(sel.packages[0]["file"], "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb")
        self.assertEqual(packages.Selection.from_json(sel.to_json()), sel)

    def test_a_split_image_brings_its_parts(self):
        sel = packages.resolve_selection(self.kernel, fake_archive(SID))
        self.assertEqual([p["name"] for p in sel.packages],
                         ["linux-image-7.2.13+deb14-amd64", "linux-base-7.2.13+deb14-amd64",
                          "linux-binary-7.2.13+deb14-amd64", "linux-modules-7.2.13+deb14-amd64"])

    def test_missing_metadata_is_a_clear_error(self):
        with self.assertRaisesRegex(common.HarnessError, "linux-image-amd64 is not in bookworm"):
            packages.resolve_selection(self.kernel, fake_archive({}))
        broken = dict(BOOKWORM)
        broken["linux-image-amd64"] = "Package: linux-image-amd64\nVersion: 1\nDepends: foo\n"
        with self.assertRaisesRegex(common.HarnessError, "depends on no package matching"):
            packages.resolve_selection(self.kernel, fake_archive(broken))
        part_missing = dict(SID)
        del part_missing["linux-binary-7.2.13+deb14-amd64"]
        with self.assertRaisesRegex(common.HarnessError, "linux-binary-7.2.13.*not available"):
            packages.resolve_selection(self.kernel, fake_archive(part_missing))

    def test_source_selection_takes_the_source_package(self):
        k = matrix_of(MINIMAL + 'source = "linux-source-6.12"\npatches = "kernels/seeds"\n')[0]
        stanza = ("Package: linux-source-6.12\nVersion: 6.12.118-1\nArchitecture: all\n"
                  "Size: 153476148\n")
        sel = packages.resolve_source(k, lambda pkg: stanza if pkg == "linux-source-6.12" else "")
        self.assertEqual(sel.image, "linux-source-6.12")
        self.assertEqual(sel.packages[0]["file"], "linux-source-6.12_6.12.118-1_all.deb")
        with self.assertRaisesRegex(common.HarnessError, "linux-source-6.12 is not in"):
            packages.resolve_source(k, lambda pkg: "")

    def test_apt_state_stays_inside_its_own_directory(self):
        root = Path("/nonexistent/apt/k1")
        opts = packages.Apt(self.kernel, root, common.Log()).options()
        values = dict(o.split("=", 1) for o in opts[1::2])
        for key in ("Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State::Lists",
                    "Dir::State::status", "Dir::Cache", "Dir::Etc::PreferencesParts"):
            self.assertTrue(values[key].startswith(str(root)), key)


if __name__ == "__main__":
    unittest.main()
