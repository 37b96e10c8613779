// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Deep tier, the work-gap probe: the gaps between an SQ thread's submissions (advise's idle
 * curve), noted per batch where io_submit_sqes can be hooked, else per SQE from the
 * io_uring_submit_req / io_uring_submit_sqe tracepoint, duty-cycled (collect/gap_duty.hpp). One
 * object for every variant: they share note_work() and, with the default tier's sched_switch,
 * the work_gaps map and the sampling window (work_gaps.bpf.h, common.bpf.h), which the default
 * tier's object owns and hands over before load.
 */
#include "common.bpf.h"
#include "work_gaps.bpf.h"

/*
 * Where fexit or kretprobe on io_submit_sqes is possible, work is noted once per batch instead of
 * once per SQE: the gaps inside a batch are nanoseconds and change no prediction, and a
 * per-SQE program costs every submission of every ring (measured on 6.18 with the tracepoint
 * below: ~55 ns per NOP, most of it the tracepoint call itself).
 */
SEC("fexit/io_submit_sqes")
int BPF_PROG(iou_fexit_submit_gaps, void *ring, unsigned int nr, int ret)
{
	if (ret > 0 && current_is_sq_thread())
		note_work((__u32)bpf_get_current_pid_tgid(), current_start_ns(), false);
	return 0;
}

SEC("kretprobe/io_submit_sqes")
int BPF_KRETPROBE(iou_kretprobe_submit_gaps, int ret)
{
	if (ret > 0 && current_is_sq_thread())
		note_work((__u32)bpf_get_current_pid_tgid(), current_start_ns(), false);
	return 0;
}

/*
 * 6.4+. Runs for every SQE any task submits. With SQPOLL only the SQ thread submits (the
 * application's io_uring_enter just wakes it), so the ring's flags, two plain loads through the
 * trusted request pointer, send every other submission away without a helper call.
 *
 * Work is noted at the first SQE of each batch and the batch's other SQEs return after two more
 * loads: the clock read is most of what noting costs (on 6.18 under KVM, 33 of the 50 ns a noted
 * SQE adds, bpf_stats), and the gaps inside a batch are nanoseconds, as for the per-batch
 * variant above. That one notes a batch at its end, this one at its start; either gap is off by
 * one batch's duration.
 */
SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(iou_submit_req, struct io_kiocb *req)
{
	struct io_ring_ctx *ring = req->ctx;

	if (!(ring->flags & IOU_SETUP_SQPOLL) || !is_first_sqe_of_batch_btf(ring))
		return 0;
	/*
	 * The tracepoint is 6.4+, so the BTF task helper (5.11+) is there: the task's pid and start
	 * time are then two plain loads, where the generic path takes three helper calls.
	 */
	struct task_struct *t = bpf_get_current_task_btf();

	note_work(t->pid, t->start_time, gap_cutoff_ns != 0);
	return 0;
}

/*
 * The tracepoint's name before 6.4, with other arguments on 5.10 (ctx, req, opcode, ..., read
 * from 5.10.262's BTF) than on 6.0-6.3 (req, force_nonblock); none is read, so the test is on
 * the current task instead.
 */
SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(iou_submit_sqe)
{
	/* Not bpf_get_current_task_btf(): that helper arrived in 5.11. */
	if (!current_is_sq_thread())
		return 0;
	note_work((__u32)bpf_get_current_pid_tgid(), current_start_ns(), gap_cutoff_ns != 0);
	return 0;
}
