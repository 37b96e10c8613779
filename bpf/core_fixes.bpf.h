/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every kernel difference iouscope's BPF code depends on lives here, behind a has_* or get_*
 * inline. Fields that not every supported kernel (5.10 .. 7.x) has are reached through a
 * `___flavor` struct, so this file also compiles against a vmlinux.h from a kernel that lacks them:
 * libbpf's CO-RE strips the suffix and relocates against the running kernel's BTF.
 */
#ifndef IOUSCOPE_CORE_FIXES_BPF_H
#define IOUSCOPE_CORE_FIXES_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/*
 * A member of a kernel object: a plain load where `cast` says the pointer is one the verifier
 * lets a program load through (a BTF pointer from bpf_rdonly_cast, see get_ring_ctx()), else a
 * probe read, a helper call. `cast` is a load-time constant, so the verifier walks only one of
 * the two, and a kernel without the cast never sees the plain load.
 */
#define IOU_READ(cast, p, field) ((cast) ? (p)->field : BPF_CORE_READ(p, field))

/* include/linux/sched.h; stable since 2.6. */
#define IOU_PF_EXITING 0x00000004
#define IOU_PF_IO_WORKER 0x00000010
#define IOU_PF_KTHREAD 0x00200000

/*
 * Kernel 5.14 (commit 2f064a59a11f, "sched: Change task_struct::state") renamed task_struct.state
 * to __state and made it unsigned int.
 */
struct task_struct___pre514 {
	volatile long state;
} __attribute__((preserve_access_index));

/*
 * cgroup v2 id of a task: the kernfs node id of its default-hierarchy cgroup. kernfs_node.id is a
 * u64 since 5.5 ("kernfs: convert kernfs_node->id from union kernfs_node_id to u64"), before the
 * oldest kernel iouscope supports, so no flavour is needed; the inline keeps the path in one
 * place.
 */
static __always_inline __u64 get_task_cgroup_id(struct task_struct *t, bool cast)
{
	if (cast)
		return t->cgroups->dfl_cgrp->kn->id;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

static __always_inline __u32 get_task_state(void *task, bool cast)
{
	struct task_struct *t = task;
	struct task_struct___pre514 *o = task;

	if (bpf_core_field_exists(t->__state))
		return IOU_READ(cast, t, __state);
	return (__u32)IOU_READ(cast, o, state);
}

/*
 * What kind of voluntary switch-out this is (include/linux/sched.h bits, stable since 2.6). The
 * SQPOLL loop's own idle sleep is prepare_to_wait(&sqd->wait, ..., TASK_INTERRUPTIBLE) and then
 * schedule(), in every version from 5.10 (the kthread) to 7.x. The thread's other waits are
 * uninterruptible: mutex_lock(&sqd->lock), parking (wait_event() in io_sqd_handle_event, 5.11+),
 * TASK_PARKED in 5.10's kthread_parkme(), I/O a submission blocks on. TASK_KILLABLE and TASK_IDLE
 * include TASK_UNINTERRUPTIBLE, and TASK_FREEZABLE (6.1+) is a flag beside either, so the two low
 * bits decide.
 */
#define IOU_TASK_INTERRUPTIBLE 0x1
#define IOU_TASK_UNINTERRUPTIBLE 0x2

static __always_inline bool is_idle_sleep(__u32 state)
{
	return (state & (IOU_TASK_INTERRUPTIBLE | IOU_TASK_UNINTERRUPTIBLE)) == IOU_TASK_INTERRUPTIBLE;
}

/*
 * Where a wakeup runs: a task, or an interrupt (an hrtimer such as an io_uring timeout, a device
 * completing I/O). In an interrupt "current" is whichever task was interrupted, so it must not be
 * named as the waker. preempt_count would say, but x86 keeps it in a per-CPU variable that BPF
 * can only name as a typed ksym, and libbpf resolves every typed ksym of an object, loaded or
 * not: one missing from vmlinux BTF sends it through the module BTFs, which needs CAP_SYS_ADMIN
 * the daemon does not have. The stack answers instead: x86-64 runs hardirqs, and the softirqs
 * served on their way out, on the CPU's IRQ stack, not on the task's. A BPF program's frame is
 * on the stack it runs on, so a frame outside the current task's stack is an interrupt's.
 * Softirqs that ksoftirqd runs are on its own stack and name it, which is right. Comparing a
 * stack address with a number needs CAP_PERFMON (allow_ptr_leaks), which the daemon holds.
 */
#define IOU_TASK_STACK_SPAN (32 * 1024) /* THREAD_SIZE: 16 KiB, 32 KiB with KASAN */

#define IOU_ENOSYS 38

/*
 * x86-64 does not switch stacks for an interrupt that arrives while the CPU runs user code: it
 * runs on the task's stack, above the pt_regs the entry saved (measured: 2 of 20 timer wakeups
 * named after a compiler running on the host). Those regs tell the two apart: a system call
 * enters with ax = -ENOSYS, which stays until the call returns (entry_SYSCALL_64 pushes it, and
 * do_syscall_64 stores the result only at the end), while an interrupt or exception from user
 * mode keeps the user's ax. A wakeup on the task's stack with user-mode regs whose ax is not
 * -ENOSYS is therefore an interrupt's (or an exception's, which does not wake SQ threads).
 * The regs come from bpf_task_pt_regs (5.15+), or before it from the top of the task's stack.
 * A kernel thread has no user-mode regs there, so it is never taken for an interrupt.
 */
#define IOU_USER_CS 0x33   /* __USER_CS */
#define IOU_USER32_CS 0x23 /* __USER32_CS */

static __always_inline bool is_user_cs(__u64 cs)
{
	return cs == IOU_USER_CS || cs == IOU_USER32_CS;
}

static __always_inline bool entered_from_user_by_interrupt(__u64 stack)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = NULL;

	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs) &&
	    bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
		if (!regs || !is_user_cs(BPF_CORE_READ(regs, cs)))
			return false;
	} else {
		/*
		 * Before 5.15: the regs sit at the top of the stack, THREAD_SIZE above its base,
		 * 16 KiB or (KASAN) 32 KiB. Whichever slot holds a user code selector is the one.
		 */
		if (!stack)
			return false;
		__u64 size = bpf_core_type_size(struct pt_regs);
		for (__u64 top = 16 * 1024; top <= 32 * 1024 && !regs; top *= 2) {
			struct pt_regs *slot = (void *)(stack + top - size);
			if (is_user_cs(BPF_CORE_READ(slot, cs)))
				regs = slot;
		}
		if (!regs)
			return false;
	}
	return (long)BPF_CORE_READ(regs, ax) != -IOU_ENOSYS;
#else
	return false;
#endif
}

static __always_inline __u32 waker_context(void)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	__u64 lo = (__u64)BPF_CORE_READ(t, stack);
	volatile __u64 frame = 0;
	__u64 here = (__u64)&frame;

	if (lo && (here < lo || here >= lo + IOU_TASK_STACK_SPAN))
		return IOU_WAKER_IRQ;
	return entered_from_user_by_interrupt(lo) ? IOU_WAKER_IRQ : IOU_WAKER_TASK;
}

/*
 * SQ thread identity.
 * - 5.12+ and 5.10.162+ (which took 5.15's io_uring): an io-thread named "iou-sqp-<pid>" with
 *   PF_IO_WORKER (5.12, "io_uring: move SQPOLL thread io-wq forked worker").
 *   io-wq workers share the flag but are named "iou-wrk-".
 * - 5.10.0-5.10.161 and 5.11: a kthread named "io_uring-sq" with PF_KTHREAD.
 * The flags test is one load and rejects almost every task, so the comm is read only for the rare
 * io-thread or kthread; this keeps sched_switch's cost for other tasks to a few instructions.
 */
#define IOU_COMM_IOU_SQP 0x2d7071732d756f69ULL  /* "iou-sqp-" read as a little-endian u64 */
#define IOU_COMM_IO_URING 0x676e6972755f6f69ULL /* "io_uring" */
#define IOU_COMM_SQ_TAIL 0x71732dU               /* "-sq\0" low 3 bytes + NUL */

static __always_inline bool sq_thread_comm(struct task_struct *t, __u32 flags)
{
	__u64 head = 0;

	if (bpf_probe_read_kernel(&head, sizeof(head), &t->comm[0]))
		return false;
	if (flags & IOU_PF_IO_WORKER)
		return head == IOU_COMM_IOU_SQP;
	if (head != IOU_COMM_IO_URING)
		return false;
	__u32 tail = 0;
	if (bpf_probe_read_kernel(&tail, sizeof(tail), &t->comm[8]))
		return false;
	return tail == IOU_COMM_SQ_TAIL;
}

/* io_sq_data.sq_cpu arrived in 5.12 with io-thread SQ threads (see the io_sq_data notes below). */
struct io_sq_data___v512 {
	int sq_cpu;
} __attribute__((preserve_access_index));

/*
 * The one task flag SQ threads carry on this kernel. Kernels whose io_sq_data has sq_cpu (5.12+,
 * 5.10.162+) run SQ threads as io-threads; only older ones use kthreads. Testing PF_KTHREAD
 * there would send every switch to or from the idle task (a kthread) down the comm check.
 * bpf_core_field_exists() is resolved at load time, so the test costs nothing at run time.
 */
static __always_inline __u32 sq_thread_flag(void)
{
	struct io_sq_data___v512 *probe = 0;

	return bpf_core_field_exists(probe->sq_cpu) ? IOU_PF_IO_WORKER : IOU_PF_KTHREAD;
}

/* For any task pointer (kprobes, bpf_get_current_task()): every read goes through the helper. */
static __always_inline bool is_sq_thread(struct task_struct *t)
{
	__u32 flags = BPF_CORE_READ(t, flags);

	return (flags & sq_thread_flag()) && sq_thread_comm(t, flags);
}

/*
 * For trusted BTF pointers (tp_btf and fentry arguments): the flags test is a plain load, so the
 * scheduler tracepoints cost other tasks one load and one branch, no helper call.
 */
static __always_inline bool is_sq_thread_btf(struct task_struct *t)
{
	__u32 flags = t->flags;

	return (flags & sq_thread_flag()) && sq_thread_comm(t, flags);
}

/*
 * io_sq_data fields that appeared over time:
 * - sq_thread_idle: 5.11 (the SQPOLL loop rework of seeds patch 000 moved it into the sqd);
 *   5.10 keeps it only in io_ring_ctx.
 * - sq_cpu, task_pid, task_tgid: 5.12 (SQ thread became an io-thread).
 * - work_time (microseconds): 6.9 ("io_uring/sqpoll: statistics of the true utilization of sq
 *   threads"). Up to 6.17 it accumulates getrusage(RUSAGE_SELF) system time, i.e. the whole
 *   process; 6.18 made it per thread. The daemon tells the two apart (see collect/kernel_features).
 */
struct io_sq_data___v69 {
	__u64 work_time;
} __attribute__((preserve_access_index));

/* Seeds patch 004 (IORING_SETUP_SQTHREAD_STATS, not merged): work_time only moves when enabled. */
struct io_sq_data___sqthread_stats {
	bool enable_work_time_stat;
} __attribute__((preserve_access_index));

/*
 * sq_thread_idle in the sqd: unsigned jiffies upstream (5.11+). Seeds patch 002
 * (IORING_SETUP_IDLE_NS, not merged) widens it to u64 and adds idle_mode: when set, the value is
 * nanoseconds, otherwise jiffies.
 */
struct io_sq_data___v511 {
	unsigned int sq_thread_idle;
} __attribute__((preserve_access_index));

struct io_sq_data___idle_ns {
	__u64 sq_thread_idle;
	bool idle_mode;
} __attribute__((preserve_access_index));

/*
 * Seeds patch 000 (IORING_SETUP_SQPOLL_PERCPU, not merged), as ported to 6.12 in
 * tests/vm/kernels/seeds/0001: the per-CPU shared sqd is marked by `percpu`, its CPU is
 * sq_thread_cpu (the seed's name; upstream's own sq_cpu stays).
 */
struct io_sq_data___percpu {
	bool percpu;
	unsigned int sq_thread_cpu;
} __attribute__((preserve_access_index));

static __always_inline bool get_sqd_percpu(void *sqd, bool cast)
{
	struct io_sq_data___percpu *p = sqd;

	return bpf_core_field_exists(p->percpu) && IOU_READ(cast, p, percpu);
}

static __always_inline int get_sqd_cpu(void *sqd, bool cast)
{
	struct io_sq_data___v512 *s = sqd;

	if (bpf_core_field_exists(s->sq_cpu))
		return IOU_READ(cast, s, sq_cpu);
	return -1;
}

static __always_inline bool has_sqd_work_time(void *sqd, bool cast)
{
	struct io_sq_data___v69 *s = sqd;
	struct io_sq_data___sqthread_stats *p = sqd;

	if (!bpf_core_field_exists(s->work_time))
		return false;
	if (bpf_core_field_exists(p->enable_work_time_stat))
		return IOU_READ(cast, p, enable_work_time_stat);
	return true;
}

/* 5.11+: the sqd holds the idle setting, and the loop rework that put it there restarts the idle
 * timeout after every pass that found work. 5.10 counts it from the thread's last wakeup. */
static __always_inline bool has_sqd_thread_idle(void)
{
	struct io_sq_data___v511 *s = 0;
	struct io_sq_data___idle_ns *n = 0;

	return bpf_core_field_exists(s->sq_thread_idle) || bpf_core_field_exists(n->sq_thread_idle);
}

static __always_inline __u64 get_sqd_work_time_us(void *sqd, bool cast)
{
	struct io_sq_data___v69 *s = sqd;

	return IOU_READ(cast, s, work_time);
}

/*
 * Whether the SQE being submitted is the first of its io_submit_sqes() batch. io_get_sqe() takes
 * each SQE with ctx->cached_sq_head++ before io_submit_sqe() fires the submit tracepoint, and
 * io_commit_sqring() publishes cached_sq_head as rings->sq.head only when the batch ends, so the
 * difference is the SQE's place in its batch (5.1 to 7.x; the proposed IORING_SETUP_SQ_REWIND,
 * which rewinds cached_sq_head to 0 at each commit, keeps the first at 1). sq.head shares a cache
 * line with the tail the application writes, so reading it costs ~25 ns per SQE on a 2-vCPU KVM
 * guest (bpf_stats). The ring's deferred completions (submit_state.compl_reqs, 5.17+) answer
 * first and for free: they are flushed when a batch ends, always under uring_lock, so a non-empty
 * list means an earlier SQE of this batch completed inline (a NOP, a buffered hit). Plain loads,
 * for BTF-typed programs only: probe reads would cost ~10 ns each.
 */
struct io_ring_ctx___v517 {
	struct {
		struct {
			void *first;
		} compl_reqs;
	} submit_state;
} __attribute__((preserve_access_index));

static __always_inline bool is_first_sqe_of_batch_btf(struct io_ring_ctx *ctx)
{
	struct io_ring_ctx___v517 *v = (void *)ctx;

	if (bpf_core_field_exists(v->submit_state.compl_reqs) && v->submit_state.compl_reqs.first)
		return false;
	return ctx->cached_sq_head - ctx->rings->sq.head <= 1;
}

/*
 * The walk reaches a ring through file->private_data, a void *, so every member it reads of the
 * ring and of its SQ thread was a probe read: a helper call each, 43 % of the walk's time at
 * 10,000 rings. bpf_rdonly_cast (6.2, commit a35b9af4ec2c) types such a pointer as an untrusted
 * io_ring_ctx, and what is reached through it takes plain loads the JIT guards against faults
 * (IOU_READ). Weak, so that an object that calls it still loads where it is absent: there the
 * loader leaves `cast` false, and the verifier, seeing a constant, never walks the call.
 *
 * Weak is not enough before 6.2, though: libbpf (1.1) looks for a kfunc missing from vmlinux's
 * BTF in the modules' BTF, whose listing (BPF_BTF_GET_NEXT_ID) takes CAP_SYS_ADMIN there, and
 * fails the load with EPERM without it: the packaged unit, with CAP_BPF and CAP_PERFMON only,
 * could not start on Debian 12's 6.1. So the default tier is built twice, and the loader opens
 * the build without the extern (IOU_NO_RDONLY_CAST, iouscope_nocast) where vmlinux lacks it.
 */
#ifndef IOU_NO_RDONLY_CAST
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
#endif

static __always_inline struct io_ring_ctx *get_ring_ctx(void *private_data, bool cast)
{
#ifndef IOU_NO_RDONLY_CAST
	if (cast)
		return bpf_rdonly_cast(private_data, bpf_core_type_id_kernel(struct io_ring_ctx));
#endif
	return private_data;
}

/* Returns the idle setting; *unit gets IOU_IDLE_JIFFIES or IOU_IDLE_NS. */
static __always_inline __u64 get_sq_thread_idle(struct io_ring_ctx *ctx, void *sqd, bool cast,
						 __u32 *unit)
{
	struct io_sq_data___idle_ns *n = sqd;
	struct io_sq_data___v511 *s = sqd;

	*unit = IOU_IDLE_JIFFIES;
	if (sqd && bpf_core_field_exists(n->idle_mode)) {
		if (IOU_READ(cast, n, idle_mode))
			*unit = IOU_IDLE_NS;
		return IOU_READ(cast, n, sq_thread_idle);
	}
	if (sqd && bpf_core_field_exists(s->sq_thread_idle))
		return IOU_READ(cast, s, sq_thread_idle);
	/* 5.10: only the ctx has it. */
	return IOU_READ(cast, ctx, sq_thread_idle);
}

/*
 * Block requests, for NVMe passthrough completions (uring_cmd passthrough exists from 6.0, so
 * only layouts from then on matter).
 * - REQ_POLLED (5.17, renamed from REQ_HIPRI): the submitter asked for a polled completion. Its
 *   bit position moves between versions, hence the CO-RE enum relocation.
 * - request_queue.disk (5.15) names the namespace.
 * - blk_mq_hw_ctx.type is HCTX_TYPE_POLL when the request sits on a poll queue. A REQ_POLLED
 *   request on any other queue type is completed by an interrupt: the device has no poll queues.
 */
static __always_inline bool get_req_polled_intent(struct request *req)
{
	if (!bpf_core_enum_value_exists(enum req_flag_bits, __REQ_POLLED))
		return false;
	__u32 bit = bpf_core_enum_value(enum req_flag_bits, __REQ_POLLED);
	return (BPF_CORE_READ(req, cmd_flags) >> bit) & 1;
}

static __always_inline bool get_req_on_poll_queue(struct request *req)
{
	return BPF_CORE_READ(req, mq_hctx, type) == bpf_core_enum_value(enum hctx_type, HCTX_TYPE_POLL);
}

static __always_inline void get_req_disk_name(struct request *req, char *buf, int len)
{
	struct gendisk *disk = BPF_CORE_READ(req, q, disk);

	if (disk)
		bpf_probe_read_kernel_str(buf, len, BPF_CORE_READ(disk, disk_name));
}

/*
 * nvme_core's structs live in its module BTF (drivers/nvme/host/nvme.h, ioctl.c); only the
 * fields used are declared and CO-RE finds their offsets there.
 * - A namespace's char device (ng0n1) is embedded in its nvme_ns. Under multipath the char
 *   device (the "head", one per namespace of a subsystem) is embedded in nvme_ns_head instead,
 *   whose current_path[numa node] is the path the kernel submits to.
 * - nvme_uring_cmd_pdu sits in io_uring_cmd.pdu. Its first pointer is the bio while the command
 *   is in flight on kernels that poll by bio (6.1: a union of bio and req), the request on
 *   kernels that poll by request (6.12, 7.x: a plain req field).
 * - io_uring_cmd.cookie holds the bio to poll on the bio-polling kernels (6.1); it shares a
 *   union with task_work_cb, which an IRQ-completed command gets before its task work runs.
 */
struct nvme_ns___iou {
	struct cdev cdev;
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct nvme_ns_head___iou {
	struct cdev cdev;
	struct gendisk *disk;
	struct nvme_ns___iou *current_path[];
} __attribute__((preserve_access_index));

struct nvme_uring_cmd_pdu___iou {
	struct request *req;
} __attribute__((preserve_access_index));

struct io_uring_cmd___cookie {
	void *cookie;
} __attribute__((preserve_access_index));

/* The disk a command's char device stands for: the namespace's, or the current path's. */
static __always_inline struct gendisk *get_uring_cmd_cdev_disk(struct io_uring_cmd *cmd,
								bool head_cdev)
{
	struct cdev *cdev = BPF_CORE_READ(cmd, file, f_inode, i_cdev);
	if (!cdev)
		return NULL;
	if (!head_cdev) {
		struct nvme_ns___iou *ns =
			(void *)((char *)cdev - bpf_core_field_offset(struct nvme_ns___iou, cdev));
		return BPF_CORE_READ(ns, disk);
	}
	struct nvme_ns_head___iou *head =
		(void *)((char *)cdev - bpf_core_field_offset(struct nvme_ns_head___iou, cdev));
	struct nvme_ns___iou *path = NULL;
	__u32 node = bpf_get_numa_node_id();
	if (node < 64)
		bpf_probe_read_kernel(&path, sizeof(path),
				      (char *)head +
					      bpf_core_field_offset(struct nvme_ns_head___iou,
								    current_path) +
					      node * sizeof(path));
	return path ? BPF_CORE_READ(path, disk) : BPF_CORE_READ(head, disk);
}

/*
 * The disk whose queue an iopoll call polls, so that polls and completions (named by the
 * request's disk) agree, multipath included: the path's disk (nvme0c1n1), not the head's.
 * head_cdev: the call came through nvme_ns_head_chr_uring_cmd_iopoll (bio-polling kernels),
 * which is the only way to tell a head's char device from a namespace's there.
 */
static __always_inline void get_uring_cmd_poll_disk_name(struct io_uring_cmd *cmd,
							  bool head_cdev, char *buf, int len)
{
	void *pdu = (char *)cmd + bpf_core_field_offset(struct io_uring_cmd, pdu);
	struct gendisk *disk = NULL;
	void *first = NULL;

	bpf_probe_read_kernel(&first, sizeof(first), pdu);
	if (bpf_core_field_exists(struct io_uring_cmd___cookie, cookie)) {
		void *cookie = BPF_CORE_READ((struct io_uring_cmd___cookie *)cmd, cookie);
		/* The cookie is the bio only while it equals the pdu's bio; else the command had no
		 * poll queue (no cookie) or already waits for its task work (task_work_cb). */
		if (cookie && cookie == first)
			disk = BPF_CORE_READ((struct bio *)cookie, bi_bdev, bd_disk);
		else
			disk = get_uring_cmd_cdev_disk(cmd, head_cdev);
	} else if (bpf_core_field_exists(struct nvme_uring_cmd_pdu___iou, req) && first) {
		disk = BPF_CORE_READ((struct request *)first, q, disk);
	}
	if (disk)
		bpf_probe_read_kernel_str(buf, len, BPF_CORE_READ(disk, disk_name));
}

#endif /* IOUSCOPE_CORE_FIXES_BPF_H */
