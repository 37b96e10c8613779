"""What a guest came to: its result (pass, fail or skip, its status, seconds per phase, the
reason), as --results-json writes it, and the summary table of several."""

from __future__ import annotations

import dataclasses

from common import EXIT_HARNESS, EXIT_TIMEOUT, STATUS_SKIP


@dataclasses.dataclass
class RunResult:
    kernel: str
    version: str = "-"           # Debian package version
    release: str = "-"           # uname -r
    result: str = "fail"         # pass | fail | skip
    status: int | None = None    # the command's exit status, if it ran to the end
    reason: str = ""
    seconds_prepare: float = 0.0
    seconds_kernel: float = 0.0  # QEMU start until the guest's init runs
    seconds_boot: float = 0.0    # QEMU start until COMMAND starts
    seconds_command: float = 0.0
    seconds_total: float = 0.0
    capabilities: list[str] = dataclasses.field(default_factory=list)
    log_dir: str = ""

    def exit_code(self) -> int:
        if self.status is not None:
            return self.status
        return EXIT_TIMEOUT if self.reason.startswith("timed out") else EXIT_HARNESS


def classify(status: int | None, expect: int) -> str:
    if status == expect:
        return "pass"
    if status == STATUS_SKIP:
        return "skip"
    return "fail"


def summary_table(results: list[RunResult]) -> str:
    rows = [("KERNEL", "VERSION", "RELEASE", "RESULT", "STATUS", "PREPARE s", "BOOT s",
             "COMMAND s", "TOTAL s")]
    for r in results:
        rows.append((r.kernel, r.version, r.release, r.result.upper(),
                     "-" if r.status is None else str(r.status), f"{r.seconds_prepare:.0f}",
                     f"{r.seconds_boot:.0f}", f"{r.seconds_command:.0f}", f"{r.seconds_total:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    for r in results:
        if r.reason:
            lines.append(f"  {r.kernel}: {r.reason}" + (f" (logs: {r.log_dir})" if r.log_dir else ""))
    return "\n".join(lines)
