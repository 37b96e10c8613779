/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * task_struct and sched_entity as laid out before 5.14 (x86-64, approximate offsets):
 * task_struct.state is a `volatile long` right after thread_info. 5.14 renamed it to __state
 * (commit 2f064a59a11f), which is what get_task_state() switches on.
 */
#ifndef IOU_CORE_KERNEL_V5_H
#define IOU_CORE_KERNEL_V5_H

#include "common.h"

struct thread_info {
	unsigned long flags;
	u32 status;
};

struct sched_entity {
	u8 load_and_run_node[40];
	struct list_head group_node;
	unsigned int on_rq;
	u64 exec_start;
	u64 sum_exec_runtime;
	u64 vruntime;
	u64 prev_sum_exec_runtime;
};

struct task_struct {
	struct thread_info thread_info;
	volatile long state;
	void *stack;
	refcount_t usage;
	unsigned int flags;
	u8 __opaque_sched[72];
	struct sched_entity se;
	u8 __opaque_mm[1000];
	pid_t pid;
	pid_t tgid;
	unsigned long stack_canary;
	struct task_struct *real_parent;
	struct task_struct *parent;
	struct list_head children;
	struct list_head sibling;
	struct task_struct *group_leader;
	u8 __opaque_times[184];
	unsigned long nvcsw;
	unsigned long nivcsw;
	u64 start_time;            /* thread identity with the tid (ring records' sq_start_ns) */
	u64 start_boottime;
	u8 __opaque_cred[80];
	char comm[16];
	u8 __opaque_fs[64];
	struct css_set *cgroups;
};

#endif
