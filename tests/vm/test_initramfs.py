"""Unit tests of initramfs.py: module dependencies, the cpio writer, static ELF."""

import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import initramfs  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
