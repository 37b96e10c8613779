/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * @layout 6.18 + seeds 004 (IORING_SETUP_SQTHREAD_STATS): bool enable_work_time_stat
 *
 * Seeds patch 004 on the 6.18-rc it was written against: it appends enable_work_time_stat to
 * io_sq_data, after the completion. has_sqd_work_time() must then read that bool.
 *
 * @expect exists io_sq_data.idle_mode 0
 * @expect exists io_sq_data.sq_thread_idle 1
 * @expect exists io_sq_data.sq_cpu 1
 * @expect exists io_sq_data.work_time 1
 * @expect exists io_sq_data.enable_work_time_stat 1
 * @expect exists io_sq_data.percpu 0
 * @expect exists task_struct.__state 1
 * @expect exists task_struct.state 0
 * @expect idle io_sq_data.sq_thread_idle 4
 */
#include "io_uring-6.h"

struct io_sq_data {
	refcount_t refs;
	atomic_t park_pending;
	struct mutex lock;

	/* ctx's that are using this sqd */
	struct list_head ctx_list;

	struct task_struct *thread;
	struct wait_queue_head wait;

	unsigned int sq_thread_idle;
	int sq_cpu;
	pid_t task_pid;
	pid_t task_tgid;

	u64 work_time;
	unsigned long state;
	struct completion exited;
	bool enable_work_time_stat; /* seeds 004 */
};
