/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The deep tier's maps that the default tier also touches: io_uring_create resets the per-ring
 * ones (forget_ring_work), the iterator reads ring_work, and sched_switch moves the per-thread
 * ones past the time a thread spent switched out. Defined in iouscope.bpf.c, which owns them,
 * and in iouscope_deep.bpf.c, which writes them and is handed the owner's maps before it loads.
 */
#ifndef IOUSCOPE_DEEP_MAPS_BPF_H
#define IOUSCOPE_DEEP_MAPS_BPF_H

#include "common.bpf.h"

/* Per ring: io_submit_sqes's work and the loop passes' turns. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u64);
	__type(value, struct iou_ring_work);
} ring_work SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, struct iou_iopoll_key);
	__type(value, struct iou_iopoll_stats);
} iopoll_stats SEC(".maps");

/* Per SQ thread: see iou_fexit_sq_tw. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct iou_sq_passes);
} sq_passes SEC(".maps");

/* In-flight entry state between an entry and its exit probe (io_submit_sqes, io_do_iopoll). */
struct call_state {
	__u64 ts; /* the call's start, moved later by the time the thread spent switched out */
	__u64 ctx;
	__u64 nr_events_ptr; /* io_do_iopoll's unsigned int *nr_events, old prototype only */
	__u64 off_cpu_ns;    /* when the thread was switched out inside the call; 0 if it is not */
	__u32 nr_before;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_state);
} submit_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_state);
} iopoll_calls SEC(".maps");

#endif /* IOUSCOPE_DEEP_MAPS_BPF_H */
