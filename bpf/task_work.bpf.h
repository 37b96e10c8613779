/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The request tier's task-work programs (bpf/iouscope_req.bpf.c includes this once, after its
 * enter maps): the task work a thread runs inside its waits (wait_task_work), and the IPIs the
 * kernel sends to make a running thread run it (task_work_ipis). Apart from the object's file
 * by concern: what a ring's submitter is woken or interrupted for, which the setup-flag
 * findings (DEFER_TASKRUN, COOP_TASKRUN) judge.
 */
#ifndef IOUSCOPE_TASK_WORK_BPF_H
#define IOUSCOPE_TASK_WORK_BPF_H

/*
 * Task work run by a thread waiting in io_uring_enter (IORING_ENTER_GETEVENTS): completions that
 * come by task work (poll-driven reads, O_DIRECT ends) each wake the waiter to be posted, once
 * per batch the kernel queued while the last was pending. Counted on the ring it waits on; a
 * task's task work can hold other rings' completions too. `ring` is the ring whose deferred
 * work ran (IORING_SETUP_DEFER_TASKRUN), 0 for the task's own list.
 */
static __always_inline void note_wait_task_work(__u64 ring, unsigned int count)
{
	static const struct iou_ring_enters zero = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iou_enter_call *c = bpf_map_lookup_elem(&enter_calls, &tid);

	if (!c || !count || !(c->flags & IOU_ENTER_GETEVENTS) || (ring && ring != c->ctx))
		return;
	struct iou_req_key key = { .ctx = c->ctx, .born_ns = c->born_ns };
	struct iou_ring_enters *e =
		lookup_or_init(&ring_enters, &key, &zero, &req_counters.enters_dropped);

	if (e)
		__sync_fetch_and_add(&e->wait_task_work, 1);
}

/* 6.0+: (tctx, count), with a third argument, loops, before 6.9. */
SEC("tp_btf/io_uring_task_work_run")
int BPF_PROG(iou_task_work_run, void *tctx, unsigned int count)
{
	note_wait_task_work(0, count);
	return 0;
}

/* 6.1+: (ctx, count, loops), a DEFER_TASKRUN ring's work run by its submitter. */
SEC("tp_btf/io_uring_local_work_run")
int BPF_PROG(iou_local_work_run, void *ring, int count, unsigned int loops)
{
	note_wait_task_work((__u64)ring, count > 0 ? (unsigned int)count : 0);
	return 0;
}

/* task_work_add's code, [start, end), from /proc/kallsyms: set by the loader. */
const volatile __u64 task_work_add_start = 0;
const volatile __u64 task_work_add_end = 0;

/* The ring of the poll completion a CPU is queueing as task work, and when (io_uring_task_add). */
struct iou_tw_stash {
	__u64 ctx;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iou_tw_stash);
} tw_stash SEC(".maps");

/*
 * A task_work_add's IPI follows its io_uring_task_add on the same CPU within this (the two are
 * a few calls apart, under the poll wait queue's lock); a COOP_TASKRUN ring's task_add is
 * followed by no IPI, and its stash must not be taken for the next task_work_add's.
 */
#define IOU_TW_IPI_WINDOW_NS 5000

/*
 * 6.0+: (req, mask), a poll wake-up about to queue the request's completion as task work for
 * its submitter. Remembered on this CPU for the IPI that may follow.
 */
SEC("tp_btf/io_uring_task_add")
int BPF_PROG(iou_task_add, struct io_kiocb *req, int mask)
{
	__u32 zero = 0;
	struct iou_tw_stash *s = bpf_map_lookup_elem(&tw_stash, &zero);

	if (s) {
		s->ctx = (__u64)BPF_CORE_READ(req, ctx);
		s->ns = bpf_ktime_get_ns();
	}
	return 0;
}

/*
 * 6.6+: an IPI about to be sent. One from task_work_add is TWA_SIGNAL's kick of the task running
 * on `cpu`, to make it run its task work at once (io_uring's notification without
 * IORING_SETUP_COOP_TASKRUN). Right after a poll wake-up's io_uring_task_add on this CPU, it is
 * for that request's ring. Other IPIs end at the first compare.
 */
SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(iou_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback)
{
	static const struct iou_ring_enters zero_enters = {};
	__u32 zero = 0;

	if (callsite < task_work_add_start || callsite >= task_work_add_end)
		return 0;
	struct iou_tw_stash *s = bpf_map_lookup_elem(&tw_stash, &zero);

	if (!s || !s->ctx || bpf_ktime_get_ns() - s->ns > IOU_TW_IPI_WINDOW_NS)
		return 0;
	struct iou_req_key key = { .ctx = s->ctx, .born_ns = ring_born(s->ctx) };

	s->ctx = 0;
	struct iou_ring_enters *e =
		lookup_or_init(&ring_enters, &key, &zero_enters, &req_counters.enters_dropped);

	if (e)
		__sync_fetch_and_add(&e->task_work_ipis, 1);
	return 0;
}

#endif /* IOUSCOPE_TASK_WORK_BPF_H */
