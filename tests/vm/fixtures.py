"""What several of the harness's unit tests (test_*.py) share: a minimal matrix entry, the
kernels a matrix text makes, and the guest kernel's command line in QEMU's."""

import textwrap

import matrix

MINIMAL = """
[[kernel]]
name = "k1"
suite = "bookworm"
series = "6.1"
"""


def matrix_of(text: str):
    return matrix.parse_matrix(textwrap.dedent(text), "test.toml")


def kernel_cmdline(cmd):
    return cmd[cmd.index("-append") + 1]
