/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * @layout 5.13-rc + seeds 002 (IORING_SETUP_IDLE_NS): u64 sq_thread_idle + bool idle_mode
 *
 * Seeds patch 002 as posted, on the kernel it was written against (its hunks show sq_cpu,
 * task_pid and task_tgid, i.e. 5.12+, and no work_time, which came in 6.9). It widens both
 * io_sq_data.sq_thread_idle and io_ring_ctx.sq_thread_idle to u64 and adds io_sq_data.idle_mode.
 * 5.13 still has task_struct.state. The forward port onto 6.18 is layout 50.
 *
 * @expect exists io_sq_data.idle_mode 1
 * @expect exists io_sq_data.sq_thread_idle 1
 * @expect exists io_sq_data.sq_cpu 1
 * @expect exists io_sq_data.work_time 0
 * @expect exists io_sq_data.enable_work_time_stat 0
 * @expect exists io_sq_data.percpu 0
 * @expect exists task_struct.__state 0
 * @expect exists task_struct.state 1
 * @expect idle io_sq_data.sq_thread_idle 8
 *
 * get_sq_thread_idle() falls back to BPF_CORE_READ(ctx, sq_thread_idle), whose local type
 * (vmlinux.h) is a 4-byte unsigned, for rings without SQPOLL (sqd == NULL). On this kernel that
 * copies half of a u64. Accepted: the patch only assigns ctx->sq_thread_idle for SQPOLL rings,
 * so the fallback reads a zeroed u64, and half of 0 is 0 at either end of it.
 * @expect width io_ring_ctx.sq_thread_idle 4/8
 */
#define IOU_CTX_SQ_THREAD_IDLE_T u64
#include "io_uring-5.h"

struct io_sq_data {
	refcount_t refs;
	atomic_t park_pending;
	struct mutex lock;

	/* ctx's that are using this sqd */
	struct list_head ctx_list;

	struct task_struct *thread;
	struct wait_queue_head wait;

	u64 sq_thread_idle; /* seeds 002: was unsigned (jiffies) */
	bool idle_mode;     /* seeds 002: sq_thread_idle is in ns when set */
	int sq_cpu;
	pid_t task_pid;
	pid_t task_tgid;

	unsigned long state;
	struct completion exited;
};
