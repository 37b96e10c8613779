/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every BPF object of iouscope has: the license, the globals the objects share, and the
 * map helpers. One object per tier (iouscope.bpf.c, iouscope_deep.bpf.c, iouscope_nvme.bpf.c,
 * iouscope_gaps.bpf.c; the first says why these); kernel differences are in core_fixes.bpf.h.
 */
#ifndef IOUSCOPE_COMMON_BPF_H
#define IOUSCOPE_COMMON_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "iouscope/records.h"
#include "iouscope/gap_sampling.h"
#include "core_fixes.bpf.h"

#define EEXIST 17
#define TASK_RUNNING 0

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * The globals every tier writes or reads, in a data section of their own (an internal map named
 * IOU_SHARED_SECTION). Every object defines the same ones in the same order, here, so the
 * section has one layout; the loader loads the default tier's object first and hands its map to
 * the others (bpf_map__reuse_fd), so all of them count into one `stats` and see one window.
 */
#define IOU_SHARED_SECTION ".data.shared"
#define IOU_SHARED SEC(IOU_SHARED_SECTION)

struct iou_stats stats IOU_SHARED = {};

/*
 * Duty-cycled work gaps (include/iouscope/gap_sampling.h): 0 when every gap is recorded. The
 * daemon opens a window by attaching the per-SQE program, then writing gap_start_ns and, last,
 * gap_end_ns; a program reads the end first, so it never pairs a new end with an old start.
 */
volatile __u64 gap_start_ns IOU_SHARED = 0;
volatile __u64 gap_end_ns IOU_SHARED = 0;

/*
 * The value for key, inserted from init if absent. A failed insert is counted in *dropped and
 * gives NULL, whatever the reason (-E2BIG for a full map, -ENOMEM), except -EEXIST: BPF_NOEXIST
 * makes a racing insert harmless, the loser looks up the winner's entry. Inlined like every
 * helper here, so each call site hands the verifier its own map.
 */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *init,
					    __u64 *dropped)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	/* An int: 6.1 returns the helper's int zero-extended, so -EEXIST fails a long compare. */
	int err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		__sync_fetch_and_add(dropped, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/*
 * The entry of SQ thread tid in a map whose values begin with their owner's start_time
 * (records.h). An entry left by an exited thread whose tid was reused is reset before the new
 * thread counts anything into it, so no count ever passes from one thread to the next.
 */
static __always_inline void *thread_entry(void *map, __u32 tid, __u64 start, const void *zero,
					  __u64 *dropped)
{
	__u64 *owner = lookup_or_init(map, &tid, zero, dropped);

	if (!owner || *owner == start)
		return owner;
	if (*owner) {
		bpf_map_update_elem(map, &tid, zero, BPF_EXIST);
		owner = bpf_map_lookup_elem(map, &tid);
		if (!owner)
			return NULL;
	}
	*owner = start;
	return owner;
}

/* The entry of thread tid if it belongs to that thread, without creating one. */
static __always_inline void *thread_entry_if_owned(void *map, __u32 tid, __u64 start)
{
	__u64 *owner = bpf_map_lookup_elem(map, &tid);

	return owner && *owner == start ? owner : NULL;
}

static __always_inline __u64 current_start_ns(void)
{
	/* Not bpf_get_current_task_btf(): that helper arrived in 5.11. */
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), start_time);
}

static __always_inline bool current_is_sq_thread(void)
{
	return is_sq_thread((struct task_struct *)bpf_get_current_task());
}

/*
 * floor(log2(v)), 0 for 0 and 1, capped at the last latency bucket: six compares rather than a
 * loop of up to 33 steps, for it runs for every wakeup and, in the request tier, every
 * completion.
 */
static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r < IOU_LAT_BUCKETS - 1 ? r : IOU_LAT_BUCKETS - 1;
}

#endif /* IOUSCOPE_COMMON_BPF_H */
