// SPDX-License-Identifier: GPL-2.0
// One empty program per attach point that iouscope's deep tier wants. probe-check loads and
// attaches them one at a time inside a guest, so the capability report says, per kernel, which
// of them that kernel accepts. Bodies stay empty: only whether the verifier and the attach
// succeed is of interest, and an empty body needs no vmlinux.h from the guest kernel.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";  // fentry/kprobe programs need a GPL-compatible licence

#define PROBE(sec, fn) \
    SEC(sec) int fn(void *ctx) { return 0; }

PROBE("tp_btf/io_uring_create", tp_btf_io_uring_create)
PROBE("fentry/io_sq_thread", fentry_io_sq_thread)
PROBE("fentry/io_submit_sqes", fentry_io_submit_sqes)
PROBE("fentry/io_do_iopoll", fentry_io_do_iopoll)
PROBE("fentry/nvme_ns_chr_uring_cmd_iopoll", fentry_nvme_ns_chr_uring_cmd_iopoll)
PROBE("fexit/nvme_uring_cmd_end_io", fexit_nvme_uring_cmd_end_io)
PROBE("kprobe/io_sq_thread", kprobe_io_sq_thread)
PROBE("kprobe/io_do_iopoll", kprobe_io_do_iopoll)
