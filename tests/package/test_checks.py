"""Each check of tests/package/checks.py on inputs that pass, and broken so that it must fail."""
import unittest

import checks

GOOD_PATHS = [p if not p.startswith("usr/share/doc") or p.endswith("copyright") else p + ".gz"
              for p in checks.REQUIRED]
HELP = """Options:
  -h,--help                 Print this help message and exit
  --web.listen-address TEXT=127.0.0.1:10464
  --rings.plain-interval TEXT=5s
"""
MAN = "OPTIONS\n  -h, --help\n  --web.listen-address TEXT\n  --rings.plain-interval TEXT\n"
POSTINST = """deb-systemd-helper unmask 'iouscoped.service' >/dev/null || true
deb-systemd-invoke start 'iouscoped.service' >/dev/null || true
"""


class Checks(unittest.TestCase):
    def test_contents(self):
        self.assertEqual(checks.contents(GOOD_PATHS), [])
        self.assertIn("missing usr/sbin/iouscoped",
                      checks.contents([p for p in GOOD_PATHS if p != "usr/sbin/iouscoped"]))
        merged = [("usr/" + p if p.startswith("lib/") else p) for p in GOOD_PATHS]
        self.assertEqual(checks.contents(merged), [])  # trixie: the unit under /usr/lib
        self.assertTrue(checks.contents(GOOD_PATHS + ["usr/local/bin/iouscoped"]))
        self.assertTrue(checks.contents(GOOD_PATHS + ["usr/bin/iouscope-load"]))
        self.assertTrue(checks.contents(GOOD_PATHS + ["usr/bin/iouscope_live_tests"]))

    def test_depends(self):
        good = "libbpf1 (>= 1:0.6.0), libc6 (>= 2.34), zlib1g (>= 1:1.2.0), libfoo1 | libfoo2"
        self.assertEqual(checks.depends(good), [])
        self.assertTrue(checks.depends(good + ", clang"))
        self.assertTrue(checks.depends(good + ", libx | bpftool"))

    def test_versions(self):
        self.assertEqual(checks.versions("0.1.0", "0.1.0", "0.1.0", "0.1.0"), [])
        self.assertEqual(len(checks.versions("0.1.0", "0.1.1", "0.1.0", "0.1.0")), 1)
        self.assertEqual(len(checks.versions("0.1.0", "0.1.0", "0.1.0", None)), 1)
        self.assertEqual(checks.cmake_version("project(iouscope VERSION 0.2.3 LANGUAGES C)"),
                         "0.2.3")
        self.assertEqual(checks.changelog_version("iouscope (0.1.0) unstable; urgency=low"),
                         "0.1.0")
        self.assertEqual(checks.program_version("iouscoped 0.1.0\ncommit abc"), "0.1.0")

    def test_man_has_every_flag_of_help(self):
        self.assertEqual(checks.long_flags(HELP), ["--help", "--rings.plain-interval",
                                                   "--web.listen-address"])
        self.assertEqual(checks.man_has_flags(HELP, MAN), [])
        # man's rendering: hyphens as U+2010 and bold by overstrike still count.
        bold = "".join(c + "\b" + c for c in "--help")
        rendered = bold + " \u2010\u2010web.listen\u2010address --rings.plain-interval"
        self.assertEqual(checks.man_has_flags(HELP, rendered), [])
        self.assertEqual(checks.man_has_flags(HELP, MAN.replace("--rings.plain-interval", "")),
                         ["--rings.plain-interval is in --help but not in the man page"])

    def test_man_synopsis(self):
        page = ("NAME\n       iouscope - x\n\nSYNOPSIS\n       iouscope top [OPTIONS]\n"
                "       iouscope advise [OPTIONS]\n\nDESCRIPTION\n       x\n")
        lines = ["iouscope top [OPTIONS]", "iouscope advise [OPTIONS]"]
        self.assertEqual(checks.man_synopsis(page, lines), [])
        # Both usage lines run together into DESCRIPTION, as a help text help2man misreads.
        run_together = page.replace("SYNOPSIS\n", "").replace("\n       iouscope advise",
                                                                " iouscope advise")
        self.assertEqual(checks.man_synopsis(run_together, lines),
                         ["the man page has no SYNOPSIS"])
        self.assertEqual(checks.man_synopsis(page.replace("advise", "adv"), lines),
                         ["SYNOPSIS lacks the line 'iouscope advise [OPTIONS]'"])

    def test_unit(self):
        self.assertEqual(checks.unit("ExecStart=/usr/sbin/iouscoped $IOUSCOPED_ARGS\n"), [])
        self.assertTrue(checks.unit("ExecStart=/usr/local/bin/iouscoped $IOUSCOPED_ARGS\n"))

    def test_maintainer_scripts(self):
        self.assertEqual(checks.maintainer_scripts(POSTINST, "/etc/default/iouscoped\n"), [])
        debhelper = POSTINST.splitlines()[0] + (
            "\n\t\t\t_dh_action=start\n\t\tdeb-systemd-invoke $_dh_action 'iouscoped.service'\n")
        self.assertEqual(checks.maintainer_scripts(debhelper, "/etc/default/iouscoped\n"), [])
        self.assertTrue(checks.maintainer_scripts(debhelper.replace("=start", "=stop"),
                                                  "/etc/default/iouscoped\n"))
        self.assertTrue(checks.maintainer_scripts("", "/etc/default/iouscoped\n"))
        self.assertTrue(checks.maintainer_scripts(POSTINST.splitlines()[0], "/etc/default/iouscoped"))
        self.assertTrue(checks.maintainer_scripts(POSTINST, ""))


if __name__ == "__main__":
    unittest.main()
