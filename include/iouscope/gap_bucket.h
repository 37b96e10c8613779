/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The work-gap histogram's bucket for a gap of v ns, compiled into the BPF program (which fills
 * struct iou_work_gaps) and into the daemon (which reads the buckets back and replays gaps in
 * tests), so the two cannot disagree. Four buckets per power of two from 64 ns: bucket 0 holds
 * gaps below 64 ns, bucket 1 + 4 * (log2(v) - 6) + the next two bits below the top one the rest.
 * Not clamped: callers clamp to IOU_GAP_BUCKETS - 1 (the BPF one on the register it indexes
 * with, for the verifier).
 */
#ifndef IOUSCOPE_GAP_BUCKET_H
#define IOUSCOPE_GAP_BUCKET_H

#include "iouscope/records.h"

#ifdef __cplusplus
#define IOU_GAP_INLINE inline
#else
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define IOU_GAP_INLINE static __always_inline
#endif

/* A branchy log2: BPF has no count-leading-zeros instruction. */
IOU_GAP_INLINE __u64 iou_gap_bucket(__u64 v)
{
	if (v < 64)
		return 0;
	__u64 m = 0;
	__u64 x = v;
	if (x >= (1ULL << 32)) { x >>= 32; m += 32; }
	if (x >= (1ULL << 16)) { x >>= 16; m += 16; }
	if (x >= (1ULL << 8)) { x >>= 8; m += 8; }
	if (x >= (1ULL << 4)) { x >>= 4; m += 4; }
	if (x >= (1ULL << 2)) { x >>= 2; m += 2; }
	if (x >= (1ULL << 1)) { m += 1; }
	return (m - 6) * 4 + ((v >> (m - 2)) & 3) + 1;
}

#endif /* IOUSCOPE_GAP_BUCKET_H */
