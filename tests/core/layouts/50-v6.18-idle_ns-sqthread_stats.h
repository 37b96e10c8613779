/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * @layout 6.18 + seeds 002 forward-ported + seeds 004: both patches at once
 *
 * A kernel carrying both unmerged patches, 002 rebased onto 6.18 the obvious way (u64
 * sq_thread_idle followed by idle_mode, in io_sq_data and io_ring_ctx) and 004 as posted.
 * Every field core_fixes.bpf.h probes for is present, and every offset after sq_thread_idle
 * moves relative to layout 30.
 *
 * @expect exists io_sq_data.idle_mode 1
 * @expect exists io_sq_data.sq_thread_idle 1
 * @expect exists io_sq_data.sq_cpu 1
 * @expect exists io_sq_data.work_time 1
 * @expect exists io_sq_data.enable_work_time_stat 1
 * @expect exists io_sq_data.percpu 0
 * @expect exists task_struct.__state 1
 * @expect exists task_struct.state 0
 * @expect idle io_sq_data.sq_thread_idle 8
 *
 * Same ctx fallback as layout 20: rings without SQPOLL read 4 of the 8 (zero) bytes.
 * @expect width io_ring_ctx.sq_thread_idle 4/8
 */
#define IOU_CTX_SQ_THREAD_IDLE_T u64
#include "io_uring-6.h"

struct io_sq_data {
	refcount_t refs;
	atomic_t park_pending;
	struct mutex lock;

	/* ctx's that are using this sqd */
	struct list_head ctx_list;

	struct task_struct *thread;
	struct wait_queue_head wait;

	u64 sq_thread_idle; /* seeds 002 */
	bool idle_mode;     /* seeds 002 */
	int sq_cpu;
	pid_t task_pid;
	pid_t task_tgid;

	u64 work_time;
	unsigned long state;
	struct completion exited;
	bool enable_work_time_stat; /* seeds 004 */
};
