/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Duty-cycled work gaps. Where the only source of work gaps is the per-SQE tracepoint
 * (io_uring_submit_req, io_uring_submit_sqe), its program is attached for an on-window of W
 * seconds out of every period and detached the rest of the time, when it costs nothing. Compiled
 * into the BPF program and into the daemon's tests, so the estimator the advisor relies on is the
 * code the kernel runs.
 *
 * The estimator. A window [start, end) records, for every SQE that arrives at least `cutoff`
 * after its start, the gap back to the thread's previous SQE, or back to the window's start when
 * that SQE came before it (a gap known only to be at least that long). For an idle setting
 * T <= cutoff the advisor needs only min(gap, T) and whether gap > T, and both are exact for
 * every recorded SQE: a gap cut at the start is at least cutoff >= T long. Every SQE of the
 * timeline lands in the recorded part [start + cutoff, end) of some window with the same
 * probability, so the recorded counts and sums, scaled by time over recorded time, are unbiased
 * for the whole timeline, long gaps (longer than the window) included. Weighting each complete
 * gap g by W / (W - g) would be too, but only for gaps shorter than the window, and only with
 * each gap's exact length, which the buckets no longer have.
 */
#ifndef IOUSCOPE_GAP_SAMPLING_H
#define IOUSCOPE_GAP_SAMPLING_H

#include "iouscope/gap_bucket.h"

/* Whether an SQE at now of a thread that started at born is recorded: inside the window, and by
 * a thread that was there when it opened (a thread's first SQE after its birth ends no gap). */
IOU_GAP_INLINE int iou_gap_in_window(__u64 now, __u64 born, __u64 start, __u64 end)
{
	return start <= now && now < end && born <= start;
}

/* The gap an SQE at now ends, 0 for none to record; *last (the thread's previous SQE) becomes
 * now. A previous SQE before start belongs to an earlier window: the gap is cut at start. */
IOU_GAP_INLINE __u64 iou_gap_sampled(__u64 now, __u64 *last, __u64 start, __u64 cutoff)
{
	__u64 prev = *last > start ? *last : start;

	*last = now;
	if (now - start < cutoff || now <= prev)
		return 0;
	return now - prev;
}

#endif /* IOUSCOPE_GAP_SAMPLING_H */
