/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The work gaps of SQ threads: the map, the duty cycle's cutoff and the one function that notes
 * an SQE. Defined in iouscope_gaps.bpf.c, whose programs note work, and in iouscope.bpf.c, whose
 * sched_switch ends a thread's spin at its sleep and which owns the map.
 */
#ifndef IOUSCOPE_WORK_GAPS_BPF_H
#define IOUSCOPE_WORK_GAPS_BPF_H

#include "common.bpf.h"

/* Set by the loader in every object that has it: 0 when every gap is recorded. */
const volatile __u64 gap_cutoff_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct iou_work_gaps);
} work_gaps SEC(".maps");

/* Whether a thread's last SQE is one of this window's, so the spin from it to a sleep now is
 * known; with every gap recorded it always is. */
static __always_inline bool last_work_in_window(__u64 last, __u64 now)
{
	if (!gap_cutoff_ns)
		return true;
	__u64 end = gap_end_ns;

	return last >= gap_start_ns && now < end;
}

/*
 * Records one SQE of the current SQ thread. Only that thread writes its entry (sched_switch
 * writes other fields, in the same thread's context), so plain increments suffice: this runs per
 * SQE and a locked add costs as much as the rest.
 */
static __always_inline void note_work(__u32 tid, __u64 born, bool sampled)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 start = 0;
	static const struct iou_work_gaps zero = {};

	if (sampled) {
		__u64 end = gap_end_ns; /* the end first: see gap_start_ns */

		start = gap_start_ns;
		if (!iou_gap_in_window(now, born, start, end))
			return;
	}
	struct iou_work_gaps *g = thread_entry(&work_gaps, tid, born, &zero, &stats.deep_dropped);

	if (!g)
		return;
	__u64 gap;
	if (sampled) {
		gap = iou_gap_sampled(now, &g->last_work_ns, start, gap_cutoff_ns);
	} else {
		__u64 last = g->last_work_ns;

		g->last_work_ns = now;
		gap = last && now > last ? now - last : 0;
	}
	if (!gap)
		return;
	__u64 b = iou_gap_bucket(gap);
	/*
	 * Clamped here, on the register used as the index: clang otherwise bounds a zero-extended
	 * copy and indexes with the original, which verifiers before 6.8 or so reject.
	 */
	asm volatile("" : "+r"(b));
	if (b >= IOU_GAP_BUCKETS)
		b = IOU_GAP_BUCKETS - 1;
	g->count[b] += 1;
	g->sum_ns[b] += gap;
}

#endif /* IOUSCOPE_WORK_GAPS_BPF_H */
