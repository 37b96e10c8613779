/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel types shared by every layout in ../layouts/. They are stand-ins written for this test,
 * not copies of kernel headers: only the members iou_iter_rings relocates against are named, the
 * rest is opaque padding that keeps offsets in the right neighbourhood. They are compiled for the
 * host (clang -g, then pahole -J), never for BPF.
 */
#ifndef IOU_CORE_KERNEL_COMMON_H
#define IOU_CORE_KERNEL_COMMON_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int pid_t;
typedef _Bool bool;

typedef struct { int counter; } atomic_t;
typedef struct { atomic_t refs; } refcount_t;

struct list_head {
	struct list_head *next, *prev;
};

/* A task's cgroup v2 id: task_struct.cgroups->dfl_cgrp->kn->id (get_task_cgroup_id). */
struct kernfs_node {
	atomic_t count;
	atomic_t active;
	u8 __opaque_names[64];
	u64 id;
};

struct cgroup {
	u8 __opaque_css[200];
	int id;
	int level;
	struct kernfs_node *kn;
};

struct css_set {
	u8 __opaque_subsys[120];
	refcount_t refcount;
	struct css_set *dom_cset;
	struct cgroup *dfl_cgrp;
};

struct mutex {
	long owner;
	int wait_lock;
	int osq;
	struct list_head wait_list;
};

struct wait_queue_head {
	int lock;
	struct list_head head;
};

struct completion {
	unsigned int done;
	struct wait_queue_head wait;
};

struct percpu_ref {
	unsigned long percpu_count_ptr;
	void *data;
};

/*
 * The iterator context. Unlike everything else here these two must match the running kernel:
 * when the test loads the relocated program, the verifier checks it->task, it->file and
 * it->meta->seq against the kernel's own bpf_iter__task_file and bpf_iter_meta. Both have been
 * this shape since task_file iterators appeared (5.8).
 */
struct seq_file;
struct bpf_iter_meta {
	union { struct seq_file *seq; };
	u64 session_id;
	u64 seq_num;
};

struct task_struct;
struct file;
struct bpf_iter__task_file {
	union { struct bpf_iter_meta *meta; };
	union { struct task_struct *task; };
	u32 fd;
	union { struct file *file; };
};

/*
 * The walk's filter loads these directly, not by probe read, and the verifier checks such loads
 * against the running kernel's BTF: tests/core/run places them at its offsets (IOU_HOST_*).
 */
struct poll_table_struct;
struct file_operations {
	u8 __opaque_before_poll[IOU_HOST_FOPS_POLL];
	unsigned int (*poll)(struct file *, struct poll_table_struct *);
	void *unlocked_ioctl;
};

struct file {
	u8 __opaque_before_f_op[IOU_HOST_FILE_F_OP];
	const struct file_operations *f_op;
	u8 __opaque_before_private_data[IOU_HOST_FILE_PRIVATE_DATA - IOU_HOST_FILE_F_OP - 8];
	void *private_data;
};

#endif
