"""Check results: one line per check, a closing count line, the exit status."""

import sys


class Results:
    def __init__(self, verbose=True, out=sys.stdout):
        self.verbose = verbose
        self.out = out
        self.passed = []
        self.failed = []
        self.skipped = []
        self.section_name = ""

    def section(self, name):
        self.section_name = name
        print(f"\n== {name}", file=self.out, flush=True)

    def _line(self, word, name, detail):
        text = f"{word:4} {name}"
        if detail:
            text += f": {detail}"
        print(text, file=self.out, flush=True)

    def ok(self, name, detail=""):
        self.passed.append((self.section_name, name, detail))
        if self.verbose:
            self._line("PASS", name, detail)

    def fail(self, name, detail=""):
        self.failed.append((self.section_name, name, detail))
        self._line("FAIL", name, detail)

    def skip(self, name, reason, detail=""):
        """reason is what the summary counts skips by; detail only goes on the line."""
        self.skipped.append((self.section_name, name, reason))
        self._line("SKIP", name, reason + (f" ({detail})" if detail else ""))

    def check(self, cond, name, detail_ok="", detail_fail=""):
        if cond:
            self.ok(name, detail_ok)
        else:
            self.fail(name, detail_fail)
        return cond

    def counts_by_section(self):
        out = {}
        for kind, items in (("passed", self.passed), ("failed", self.failed), ("skipped", self.skipped)):
            for section, _n, _d in items:
                out.setdefault(section, {"passed": 0, "failed": 0, "skipped": 0})[kind] += 1
        return out

    def summary(self, title):
        print("\n== summary", file=self.out)
        for section, c in self.counts_by_section().items():
            print(f"  {section}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped",
                  file=self.out)
        if self.skipped:
            reasons = {}
            for _s, _n, reason in self.skipped:
                reasons[reason] = reasons.get(reason, 0) + 1
            print("  skip reasons:", file=self.out)
            for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
                print(f"    {count:3} x {reason}", file=self.out)
        if self.failed:
            print("  failures:", file=self.out)
            for section, name, detail in self.failed:
                print(f"    [{section}] {name}: {detail}", file=self.out)
        print(f"{title}: {len(self.passed)} passed, {len(self.failed)} failed, "
              f"{len(self.skipped)} skipped", file=self.out, flush=True)
        return 1 if self.failed else 0
