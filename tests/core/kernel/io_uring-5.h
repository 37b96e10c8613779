/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * io_uring's ring header and io_ring_ctx as in fs/io_uring.c of 5.10 .. 5.13 (approximate offsets;
 * only what iou_iter_rings reads is named). struct io_sq_data is left to each layout.
 *
 * IOU_CTX_SQ_THREAD_IDLE_T: type of io_ring_ctx.sq_thread_idle. Seeds patch 002 (IORING_SETUP_IDLE_NS)
 * widens it from unsigned to u64 along with io_sq_data.sq_thread_idle.
 */
#ifndef IOU_CORE_IO_URING_5_H
#define IOU_CORE_IO_URING_5_H

#include "v5.h"

#ifndef IOU_CTX_SQ_THREAD_IDLE_T
#define IOU_CTX_SQ_THREAD_IDLE_T unsigned int
#endif

/* Before 6.x head and tail each had a cacheline of their own. */
struct io_uring {
	u32 head __attribute__((aligned(64)));
	u32 tail __attribute__((aligned(64)));
};

struct io_rings {
	struct io_uring sq, cq;
	u32 sq_ring_mask, cq_ring_mask;
	u32 sq_ring_entries, cq_ring_entries;
	u32 sq_dropped;
	u32 sq_flags;
	u32 cq_flags;
	u32 cq_overflow;
};

struct io_sq_data;

struct io_ring_ctx {
	struct {
		struct percpu_ref refs;
	} __attribute__((aligned(64)));

	struct {
		unsigned int flags;
		unsigned int compat : 1;
		unsigned int limit_mem : 1;
		unsigned int cq_overflow_flushed : 1;
		unsigned int drain_next : 1;
		unsigned int eventfd_async : 1;
		unsigned int restricted : 1;
		u32 *sq_array;
		unsigned int cached_sq_head;
		unsigned int sq_entries;
		unsigned int sq_mask;
		IOU_CTX_SQ_THREAD_IDLE_T sq_thread_idle;
		unsigned int cached_sq_dropped;
		unsigned int cached_cq_overflow;
		unsigned long sq_check_overflow;
		struct list_head defer_list;
		struct list_head timeout_list;
		struct list_head cq_overflow_list;
		void *sq_sqes;
	} __attribute__((aligned(64)));

	struct io_rings *rings;
	void *io_wq;
	struct task_struct *sqo_task;
	void *sqo_mm;
	struct io_sq_data *sq_data; /* if using sq thread polling */
	struct wait_queue_head sqo_sq_wait;
	struct list_head sqd_list;

	struct {
		unsigned int cached_cq_tail;
		unsigned int cq_entries;
		unsigned int cq_mask;
		atomic_t cq_timeouts;
		unsigned long cq_check_overflow;
		struct wait_queue_head cq_wait;
		void *cq_fasync;
		void *cq_ev_fd;
	} __attribute__((aligned(64)));
};

#endif
