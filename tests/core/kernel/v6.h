/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * task_struct, sched_entity and file as laid out around 6.18 (x86-64, approximate offsets):
 * task_struct.__state is an unsigned int.
 */
#ifndef IOU_CORE_KERNEL_V6_H
#define IOU_CORE_KERNEL_V6_H

#include "common.h"

struct thread_info {
	unsigned long flags;
	unsigned long syscall_work;
	u32 status;
	u32 cpu;
};

struct sched_entity {
	u8 load_and_run_node[40];
	u64 deadline;
	u64 min_vruntime;
	u64 min_slice;
	struct list_head group_node;
	unsigned char on_rq;
	unsigned char sched_delayed;
	unsigned char rel_deadline;
	unsigned char custom_slice;
	u64 exec_start;
	u64 sum_exec_runtime;
	u64 prev_sum_exec_runtime;
	u64 vruntime;
};

struct task_struct {
	struct thread_info thread_info;
	unsigned int __state;
	unsigned int saved_state;
	void *stack;
	refcount_t usage;
	unsigned int flags;
	u8 __opaque_sched[80];
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
	u8 __opaque_times[200];
	unsigned long nvcsw;
	unsigned long nivcsw;
	u64 start_time;            /* thread identity with the tid (ring records' sq_start_ns) */
	u64 start_boottime;
	u8 __opaque_cred[184];
	char comm[16];
	u8 __opaque_fs[64];
	struct css_set *cgroups;
};

#endif
