/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When io_uring_create announced each ring, by io_ring_ctx address. A closed ring's address is
 * soon reused by the next ring, and the birth time tells the two apart: the iterator copies it
 * into the ring's record (born_ns), and the request tier keys every ring by (address, birth).
 * Defined in iouscope.bpf.c, which owns and writes it, and in iouscope_req.bpf.c, which is
 * handed the owner's map before it loads (bpf_map__reuse_fd). Userspace deletes the entries of
 * rings that are gone.
 */
#ifndef IOUSCOPE_RING_BIRTHS_BPF_H
#define IOUSCOPE_RING_BIRTHS_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u64);
	__type(value, __u64);
} ring_births SEC(".maps");

#endif /* IOUSCOPE_RING_BIRTHS_BPF_H */
