/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * @layout 6.12.118 + tests/vm/kernels/seeds: 000 [2/2], 002 and 004 as ported
 *
 * The io_sq_data of the seeds kernel that tests/vm/run --kernel seeds boots: Debian's 6.12 (with
 * free_refs and without the completion of 6.18), u64 sq_thread_idle and idle_mode (002),
 * enable_work_time_stat (004), and the per-CPU sqd's percpu, exited and sq_thread_cpu (000).
 *
 * @expect exists io_sq_data.idle_mode 1
 * @expect exists io_sq_data.sq_thread_idle 1
 * @expect exists io_sq_data.sq_cpu 1
 * @expect exists io_sq_data.work_time 1
 * @expect exists io_sq_data.enable_work_time_stat 1
 * @expect exists io_sq_data.percpu 1
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
	refcount_t free_refs;
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
	bool enable_work_time_stat; /* seeds 004 */

	bool percpu;            /* seeds 000 */
	bool exited;            /* seeds 000 */
	unsigned sq_thread_cpu; /* seeds 000 */
};
