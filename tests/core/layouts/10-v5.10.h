/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * @layout 5.10: sqd without sq_thread_idle/sq_cpu/work_time; task_struct.state
 *
 * The oldest kernel iouscope supports. io_sq_data has none of the fields core_fixes.bpf.h
 * probes for, so the idle setting must come from io_ring_ctx, and get_task_state() must take the
 * pre-5.14 `state` path.
 *
 * @expect exists io_sq_data.idle_mode 0
 * @expect exists io_sq_data.sq_thread_idle 0
 * @expect exists io_sq_data.sq_cpu 0
 * @expect exists io_sq_data.work_time 0
 * @expect exists io_sq_data.enable_work_time_stat 0
 * @expect exists io_sq_data.percpu 0
 * @expect exists task_struct.__state 0
 * @expect exists task_struct.state 1
 * @expect idle io_ring_ctx.sq_thread_idle 4
 */
#include "io_uring-5.h"

struct io_sq_data {
	refcount_t refs;
	struct mutex lock;

	/* ctx's that are using this sqd */
	struct list_head ctx_list;
	struct list_head ctx_new_list;
	struct mutex ctx_lock;

	struct task_struct *thread;
	struct wait_queue_head wait;
};
