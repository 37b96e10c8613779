/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * io_uring's ring header and io_ring_ctx as in include/linux/io_uring_types.h around 6.18
 * (approximate offsets; only what iou_iter_rings reads is named). struct io_sq_data is left to
 * each layout.
 *
 * IOU_CTX_SQ_THREAD_IDLE_T: type of io_ring_ctx.sq_thread_idle; a forward port of seeds patch 002
 * (IORING_SETUP_IDLE_NS) would widen it to u64 as the original does.
 */
#ifndef IOU_CORE_IO_URING_6_H
#define IOU_CORE_IO_URING_6_H

#include "v6.h"

#ifndef IOU_CTX_SQ_THREAD_IDLE_T
#define IOU_CTX_SQ_THREAD_IDLE_T unsigned int
#endif

struct io_uring {
	u32 head;
	u32 tail;
};

struct io_rings {
	struct io_uring sq, cq;
	u32 sq_ring_mask, cq_ring_mask;
	u32 sq_ring_entries, cq_ring_entries;
	u32 sq_dropped;
	atomic_t sq_flags;
	u32 cq_flags;
	u32 cq_overflow;
};

struct io_sq_data;

struct io_ring_ctx {
	struct {
		unsigned int flags;
		unsigned int drain_next : 1;
		unsigned int restricted : 1;
		unsigned int off_timeout_used : 1;
		unsigned int drain_active : 1;
		unsigned int has_evfd : 1;
		unsigned int task_complete : 1;
		struct task_struct *submitter_task;
		struct io_rings *rings;
		struct percpu_ref refs;
		int clockid;
		int clock_offset;
		int notify_method;
		IOU_CTX_SQ_THREAD_IDLE_T sq_thread_idle;
	} __attribute__((aligned(64)));

	struct {
		struct mutex uring_lock;
		u32 *sq_array;
		void *sq_sqes;
		unsigned int cached_sq_head;
		unsigned int sq_entries;
		atomic_t cancel_seq;
		bool poll_multi_queue;
		u8 __opaque_tables[360];
	} __attribute__((aligned(64)));

	struct {
		void *cqe_cached;
		void *cqe_sentinel;
		unsigned int cached_cq_tail;
		unsigned int cq_entries;
		void *io_ev_fd;
		void *cq_wait_arg;
		unsigned long cq_wait_size;
	} __attribute__((aligned(64)));

	u8 __opaque_timeouts_and_tw[256];
	struct io_sq_data *sq_data; /* if using sq thread polling */
	struct wait_queue_head sqo_sq_wait;
	struct list_head sqd_list;
};

#endif
