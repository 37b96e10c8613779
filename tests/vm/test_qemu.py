"""Unit tests of qemu.py: QEMU's command line, its NVMe devices, host CPU pinning,
--append."""

import os
import re
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cli  # noqa: E402
import packages  # noqa: E402
import qemu  # noqa: E402
import store  # noqa: E402
from fixtures import MINIMAL, kernel_cmdline, matrix_of  # noqa: E402


class QemuCommand(unittest.TestCase):
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

    def test_a_root_image_is_a_never_written_disk_and_quiets_systemd(self):
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        plain = qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2)
        self.assertNotIn("systemd.show_status=0", kernel_cmdline(plain))
        self.assertFalse(any("if=virtio" in w for w in plain))
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2, root_image=Path("/r.img"))
        self.assertIn("file=/r.img,if=virtio,format=raw,snapshot=on", cmd)
        self.assertIn("systemd.show_status=0", kernel_cmdline(cmd))
        with self.assertRaises(SystemExit):  # an image that is not there
            cli.parse_args(["--kernel", "bookworm", "--root-image", "/nonexistent.img", "--",
                            "true"])
        here = Path(__file__).resolve()
        one = cli.parse_args(["--kernel", "bookworm", "--root-image", __file__, "--", "true"])
        self.assertEqual(one.root_image, {"": here})
        self.assertEqual(cli.root_image_for(one, "sid"), here)
        each = cli.parse_args(["--kernel", "bookworm,trixie", "--root-image",
                               f"trixie={__file__}", "--root-image", f"bookworm={__file__}",
                               "--", "true"])
        self.assertEqual(each.root_image, {"trixie": here, "bookworm": here})
        self.assertIsNone(cli.root_image_for(each, "sid"))
        self.assertIsNone(cli.root_image_for(cli.parse_args(["--kernel", "sid", "--", "true"]),
                                             "sid"))
        for bad in ([f"trixie={__file__}", f"trixie={__file__}"],  # twice for one kernel
                    [f"a b={__file__}"], ["trixie=/nonexistent.img"]):
            with self.assertRaises(SystemExit):
                cli.parse_args(["--kernel", "trixie", *[w for v in bad for w in
                                                        ("--root-image", v)], "--", "true"])

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

    def test_qemu_command_appends_extra_kernel_words_after_its_own(self):
        k = matrix_of(MINIMAL)[0]
        p = store.Prepared(k, packages.Selection("i", "1", []), "r", Path("/v"), Path("/i"))
        plain = kernel_cmdline(qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2))
        self.assertEqual(plain.split()[:3], ["console=ttyS0,115200", "rdinit=/init", "panic=-1"])
        cmd = qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2,
                                extra_append="nohz_full=1 isolcpus=1")
        self.assertEqual(kernel_cmdline(cmd), plain + " nohz_full=1 isolcpus=1")
        self.assertEqual(kernel_cmdline(
            qemu.qemu_command("qemu", p, Path("/job"), [], "2G", 2, extra_append="  ")), plain)

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


if __name__ == "__main__":
    unittest.main()
