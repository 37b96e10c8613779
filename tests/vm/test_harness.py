"""Unit tests of the VM harness: matrix parsing, package selection, initramfs pieces and the
command line. No network, no QEMU, no root:
    python3 -m unittest discover -s tests/vm -p 'test_*.py'
The smoke run that boots every kernel is separate (docs/VM.md)."""

import contextlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boot  # noqa: E402
import cli  # noqa: E402
import common  # noqa: E402
import harness  # noqa: E402
import initramfs  # noqa: E402
import kbuild  # noqa: E402
import matrix  # noqa: E402
import packages  # noqa: E402
import qemu  # noqa: E402
import results  # noqa: E402
import store  # noqa: E402

RUN = HERE / "run"

MINIMAL = """
[[kernel]]
name = "k1"
suite = "bookworm"
series = "6.1"
"""


def matrix_of(text: str):
    return matrix.parse_matrix(textwrap.dedent(text), "test.toml")


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

    def test_source_selection_takes_the_source_package(self):
        k = matrix_of(MINIMAL + 'source = "linux-source-6.12"\npatches = "kernels/seeds"\n')[0]
        stanza = ("Package: linux-source-6.12\nVersion: 6.12.118-1\nArchitecture: all\n"
                  "Size: 153476148\n")
        sel = packages.resolve_source(k, lambda pkg: stanza if pkg == "linux-source-6.12" else "")
        self.assertEqual(sel.image, "linux-source-6.12")
        self.assertEqual(sel.packages[0]["file"], "linux-source-6.12_6.12.118-1_all.deb")
        with self.assertRaisesRegex(common.HarnessError, "linux-source-6.12 is not in"):
            packages.resolve_source(k, lambda pkg: "")

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


def fake_archive(packages: dict[str, str]):
    """apt-cache show --no-all-versions, from a dict of package -> stanza text."""
    return lambda name: packages.get(name, "")


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

    def test_apt_state_stays_inside_its_own_directory(self):
        root = Path("/nonexistent/apt/k1")
        opts = packages.Apt(self.kernel, root, common.Log()).options()
        values = dict(o.split("=", 1) for o in opts[1::2])
        for key in ("Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State::Lists",
                    "Dir::State::status", "Dir::Cache", "Dir::Etc::PreferencesParts"):
            self.assertTrue(values[key].startswith(str(root)), key)


def elf_with_modinfo(entries: list[bytes]) -> bytes:
    """A minimal ELF64 relocatable with a .modinfo and a .shstrtab section."""
    modinfo = b"\0".join(entries) + b"\0"
    shstrtab = b"\0.modinfo\0.shstrtab\0"
    data = modinfo + shstrtab
    shoff = 64 + len(data)
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 2)
    null = b"\0" * 64
    sec_modinfo = struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, 64, len(modinfo), 0, 0, 1, 0)
    sec_strtab = struct.pack("<IIQQQQIIQQ", 10, 3, 0, 0, 64 + len(modinfo), len(shstrtab), 0, 0, 1, 0)
    return header + data + null + sec_modinfo + sec_strtab


class Modules(unittest.TestCase):
    def test_modinfo_depends(self):
        elf = elf_with_modinfo([b"license=GPL", b"depends=nvme-core,crc64", b"name=nvme"])
        self.assertEqual(initramfs.modinfo_depends(elf), ["nvme_core", "crc64"])
        self.assertEqual(initramfs.modinfo_depends(elf_with_modinfo([b"depends="])), [])
        with self.assertRaises(ValueError):
            initramfs.modinfo_depends(b"not an elf")

    def test_module_names(self):
        self.assertEqual(initramfs.module_name("kernel/drivers/nvme/host/nvme-core.ko.xz"), "nvme_core")
        self.assertEqual(initramfs.module_name("null_blk.ko"), "null_blk")

    def test_plan_follows_dependencies_and_reports_builtin_and_missing(self):
        index = {"nvme": "a/nvme.ko", "nvme_core": "a/nvme-core.ko.xz", "crc": "b/crc.ko",
                 "9p": "c/9p.ko", "unused": "d/unused.ko"}
        deps = {"nvme": ["nvme_core"], "nvme_core": ["crc"], "crc": [], "9p": []}
        plan = initramfs.plan_modules(["virtio_pci", "9p", "nvme", "nvme-core", "null_blk"], index,
                                    {"virtio_pci"}, lambda n: deps[n])
        self.assertEqual(plan.status, {"virtio_pci": "builtin", "9p": "module", "nvme": "module",
                                       "nvme-core": "module", "null_blk": "missing"})
        self.assertEqual(set(plan.files), {"9p", "nvme", "nvme_core", "crc"})


class Initramfs(unittest.TestCase):
    def test_cpio_round_trip(self):
        c = initramfs.Cpio()
        c.file("a/b/file", b"hello", 0o755)
        c.file("odd", b"123")  # sizes not multiples of 4 must be padded
        c.chardev("dev/console", 5, 1)
        got = initramfs.read_cpio(c.finish())
        self.assertEqual(got["a/b/file"], (0o100755, b"hello"))
        self.assertEqual(got["odd"][1], b"123")
        self.assertEqual(got["a"][0] & 0o170000, 0o040000)
        self.assertEqual(got["dev/console"][0], 0o020600)
        self.assertEqual(list(got).index("a"), 0, "parents come before their children")

    def test_cpio_is_readable_by_cpio_tool(self):
        if not shutil.which("cpio"):
            self.skipTest("cpio not installed")
        c = initramfs.Cpio()
        c.file("dir/x", b"data")
        r = subprocess.run(["cpio", "-it", "--quiet"], input=c.finish(), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [b"dir", b"dir/x"])

    def test_static_elf_detection(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"#!/bin/sh\n")
            f.flush()
            self.assertFalse(initramfs.is_static_elf(Path(f.name)))
        self.assertFalse(initramfs.is_static_elf(Path(sys.executable).resolve()))


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

    def test_qemu_command_uses_tcg_and_the_fixed_nvme_addresses(self):
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [Path("/d0"), Path("/d1")], "2G", 2)
        joined = " ".join(cmd)
        self.assertIn("-accel tcg", joined)
        self.assertNotIn("kvm", joined)
        self.assertIn("readonly=on", joined)
        self.assertIn("addr=0x10", joined)
        self.assertIn("addr=0x11", joined)
        self.assertIn("-no-reboot", cmd)
        self.assertNotIn("taskset", cmd)

    def test_nvme_subsystem_is_two_controllers_sharing_a_plain_and_a_metadata_namespace(self):
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        plain = qemu.qemu_command("qemu", p, Path("/job"), [Path("/d0"), Path("/d1")], "2G", 2)
        self.assertNotIn("nvme-subsys", " ".join(plain))
        self.assertFalse(cli.parse_args(["--kernel", "sid", "--", "true"]).nvme_subsystem)
        self.assertTrue(cli.parse_args(["--kernel", "sid", "--nvme-subsystem", "--",
                                            "true"]).nvme_subsystem)
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [Path("/d0"), Path("/d1")], "2G", 2,
                                   subsystem_disks=[Path("/s0"), Path("/s1")])
        devices = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-device"]
        subsys = [d for d in devices if d.startswith("nvme-subsys,")]
        self.assertEqual(len(subsys), 1)
        subsys_id = re.search(r"id=([^,]+)", subsys[0]).group(1)
        ctrls = [d for d in devices if d.startswith("nvme,") and f"subsys={subsys_id}" in d]
        self.assertEqual(len(ctrls), 2)
        # One serial for the subsystem (QEMU refuses two), at the addresses guest/init binds.
        self.assertEqual({re.search(r"serial=([^,]+)", c).group(1) for c in ctrls}, {"iou-shared"})
        self.assertEqual([re.search(r"addr=([^,]+)", c).group(1) for c in ctrls],
                         list(qemu.SUBSYSTEM_ADDRS))
        namespaces = [d for d in devices if d.startswith("nvme-ns,")]
        self.assertEqual(len(namespaces), 2)
        self.assertTrue(all("shared=on" in n for n in namespaces))
        self.assertNotIn("ms=", namespaces[0])
        self.assertIn("ms=8,mset=0", namespaces[1])

    def test_single_threaded_tcg_runs_pinned_to_one_host_cpu(self):
        # Unpinned, bookworm's QEMU lets the host reorder the NVMe doorbell handshake
        # (docs/VM.md, "Lost NVMe doorbells"): the pin is the fix, so it must be there.
        cpu = qemu.qemu_host_cpu("single", {})
        self.assertIn(cpu, os.sched_getaffinity(0))
        self.assertIsNone(qemu.qemu_host_cpu("multi", {}))
        self.assertIsNone(qemu.qemu_host_cpu("single", {"IOUSCOPE_VM_PIN": "0"}))
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2, "single", cpu)
        self.assertEqual(cmd[:4], ["taskset", "--cpu-list", str(cpu), "qemu"])

    def test_guests_side_by_side_get_a_host_cpu_each(self):
        # --jobs 2: two pinned guests must not share a CPU, or both run at half speed.
        allowed = sorted(os.sched_getaffinity(0))
        cpus = [qemu.qemu_host_cpu("single", {}, slot) for slot in range(len(allowed))]
        self.assertEqual(sorted(cpus), allowed)
        self.assertEqual(cpus[0], qemu.qemu_host_cpu("single", {}))

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

    def kernel_cmdline(self, cmd):
        return cmd[cmd.index("-append") + 1]

    def test_qemu_command_appends_extra_kernel_words_after_its_own(self):
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        plain = self.kernel_cmdline(qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2))
        self.assertEqual(plain.split()[:3], ["console=ttyS0,115200", "rdinit=/init", "panic=-1"])
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2,
                                   extra_append="nohz_full=1 isolcpus=1")
        self.assertEqual(self.kernel_cmdline(cmd), plain + " nohz_full=1 isolcpus=1")
        self.assertEqual(self.kernel_cmdline(
            qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2, extra_append="  ")), plain)

    def test_append_options_keep_their_order(self):
        args = cli.parse_args(["--kernel", "sid", "--append", "nohz_full=1 isolcpus=1",
                                   "--append", "a", "--append", "", "--append", " b=2 ",
                                   "--", "true"])
        self.assertEqual(args.kernel_append, "nohz_full=1 isolcpus=1 a b=2")
        self.assertEqual(cli.parse_args(["--kernel", "sid", "--", "true"]).kernel_append, "")
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        line = self.kernel_cmdline(qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2,
                                                        extra_append=args.kernel_append))
        self.assertTrue(line.endswith("loglevel=6 nohz_full=1 isolcpus=1 a b=2"), line)

    def test_kernel_param_names_split_like_the_kernel(self):
        self.assertEqual(qemu.kernel_param_names(' a=1  b\tquiet "c=x y" d="p q=r" '),
                         ["a", "b", "quiet", "c", "d"])
        self.assertEqual(qemu.kernel_param_names(""), [])

    def test_check_kernel_append(self):
        for ok in ("nohz_full=1 isolcpus=1", "", "earlycon=uart8250,io,0x3f8",
                   'dyndbg="file x.c console=1 +p"', "consoleblank=0", "panic_on_warn=1",
                   "init=/bin/sh"):
            self.assertIsNone(qemu.check_kernel_append(ok), ok)
        for bad, fragment in (("a\nb", "newline"), ("a\0b", "NUL"),
                              ("quiet console=tty0", "may not set console="),
                              ("rdinit=/bin/sh", "may not set rdinit="),
                              ("panic=0", "may not set panic="),
                              ('"panic=10"', "may not set panic="),
                              ("rdinit", "may not set rdinit=")):
            problem = qemu.check_kernel_append(bad)
            self.assertIsNotNone(problem, bad)
            self.assertIn(fragment, problem)
            self.assertIn(repr(bad), problem)

    def test_parse_args_rejects_bad_append_values(self):
        for bad, fragment in (("a\0b", "NUL byte"), ("x\ny", "newline"),
                              ("console=ttyS1", "may not set console= because")):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
                cli.parse_args(["--kernel", "sid", "--append", "quiet", "--append", bad,
                                    "--", "true"])
            self.assertEqual(cm.exception.code, common.EXIT_USAGE)
            self.assertIn(fragment, err.getvalue())


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

    def test_parse_args_strips_the_separator(self):
        args = cli.parse_args(["--kernel", "sid", "--env", "A=b=c", "--", "ls", "--", "-l"])
        self.assertEqual(args.command, ["ls", "--", "-l"])
        self.assertEqual(args.env, {"A": "b=c"})


if __name__ == "__main__":
    unittest.main()
