// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Deep tier, the SQ thread's loop: io_sq_thread (thread starts), io_sq_tw (loop passes and each
 * ring's turn), io_submit_sqes (per-ring submission work) and io_do_iopoll (poll efficiency per
 * ring and caller). fentry/fexit where the kernel allows them, kprobe/kretprobe otherwise. Off
 * unless the user asks (--probes.deep): io_submit_sqes and io_do_iopoll fire per batch or per
 * poll. The loader picks one variant per probe; both variants feed the same maps through the
 * same helpers. The maps are the default tier's (deep_maps.bpf.h), handed over before load.
 */
#include "common.bpf.h"
#include "deep_maps.bpf.h"

/* Set by the loader from io_do_iopoll's BTF prototype (see core_fixes: no version checks). */
const volatile bool iopoll_counts_in_arg = false;
/* Set by the loader when the loop-pass probe (io_sq_tw) is loaded: see iou_fexit_sq_tw. */
const volatile bool track_passes = false;

/* Entry state for the exit probe; a call that cannot be paired is counted, not guessed. */
static __always_inline void call_enter(void *map, __u32 tid, struct call_state *st)
{
	if (bpf_map_update_elem(map, &tid, st, BPF_ANY))
		__sync_fetch_and_add(&stats.inflight_dropped, 1);
}

/*
 * Counts SQ thread starts. The thread's sqd is not kept: the iterator reads it from each ring
 * (ctx->sq_data) every sample, which also sees threads that started before iouscope.
 */
static __always_inline void note_sq_thread(void *sqd)
{
	__sync_fetch_and_add(&stats.sq_threads_started, 1);
}

SEC("fentry/io_sq_thread")
int BPF_PROG(iou_fentry_sq_thread, void *sqd)
{
	note_sq_thread(sqd);
	return 0;
}

SEC("kprobe/io_sq_thread")
int BPF_KPROBE(iou_kprobe_sq_thread, void *sqd)
{
	note_sq_thread(sqd);
	return 0;
}

/* --- Loop passes: io_sq_tw ends every pass of the SQ thread's loop (6.9+) -------------------- */

static __always_inline void credit_turn(__u64 ctx, __u64 ns)
{
	static const struct iou_ring_work zero = {};
	struct iou_ring_work *w = lookup_or_init(&ring_work, &ctx, &zero, &stats.deep_dropped);

	if (w)
		__sync_fetch_and_add(&w->turn_ns, ns);
}

/*
 * The SQ thread starts serving ring ctx: the pass's work bracket opens unless it already has,
 * and the previous ring's turn ends.
 */
static __always_inline void pass_work_begins(__u32 tid, __u64 now, __u64 ctx)
{
	static const struct iou_sq_passes zero = {};

	if (!track_passes)
		return;
	struct iou_sq_passes *p =
		thread_entry(&sq_passes, tid, current_start_ns(), &zero, &stats.deep_dropped);
	if (!p)
		return;
	if (!p->start_ns) {
		p->start_ns = now;
	} else if (p->turn_ctx != ctx) {
		if (p->turn_ctx && now > p->turn_start_ns)
			credit_turn(p->turn_ctx, now - p->turn_start_ns);
	} else {
		return; /* the same ring's polling, then its submission */
	}
	p->turn_ctx = ctx;
	p->turn_start_ns = now;
}

/* The current SQ thread's pass state, created on its first pass. */
static __always_inline struct iou_sq_passes *current_passes(void)
{
	static const struct iou_sq_passes zero = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	return thread_entry(&sq_passes, tid, current_start_ns(), &zero, &stats.deep_dropped);
}

/*
 * The pass's task work begins (io_sq_tw entry): the last ring's turn ends here. Under SQPOLL the
 * completions of every ring run in this call, so none of it is that ring's.
 */
static __always_inline void task_work_begins(void)
{
	struct iou_sq_passes *p = current_passes();

	if (!p)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (p->start_ns && p->turn_ctx && now > p->turn_start_ns)
		credit_turn(p->turn_ctx, now - p->turn_start_ns);
	p->turn_ctx = 0;
	p->turn_start_ns = now;
	p->tw_start_ns = now;
}

/*
 * Only the thread itself writes its entry, and sched_switch writes it only while the thread is
 * not running, so plain increments suffice.
 */
static __always_inline void pass_ends(long task_work)
{
	struct iou_sq_passes *p = current_passes();

	if (!p)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 tw = p->tw_start_ns && now > p->tw_start_ns ? now - p->tw_start_ns : 0;

	p->passes += 1;
	p->tw_start_ns = 0;
	if (p->start_ns) {
		if (now > p->start_ns)
			p->work_ns += now - p->start_ns;
		/* Without the entry probe (none attached yet) the last turn runs to here. */
		if (p->turn_ctx && now > p->turn_start_ns)
			credit_turn(p->turn_ctx, now - p->turn_start_ns);
		else
			p->task_work_ns += tw;
		p->start_ns = 0;
		p->busy_passes += 1;
	} else if (task_work > 0) {
		/* A pass that only ran completions: work all the same, as the kernel counts it. */
		p->work_ns += tw;
		p->task_work_ns += tw;
		p->busy_passes += 1;
	}
	p->turn_ctx = 0;
}

SEC("fentry/io_sq_tw")
int BPF_PROG(iou_fentry_sq_tw)
{
	task_work_begins();
	return 0;
}

SEC("kprobe/io_sq_tw")
int BPF_KPROBE(iou_kprobe_sq_tw)
{
	task_work_begins();
	return 0;
}

/*
 * static int io_sq_tw(struct llist_node **retry_list, int max_entries) returns the task work
 * items it ran (6.9+; 7.x kernels dropped the second parameter). Called once per loop pass,
 * after every ring had its turn, and once more when the thread exits; only SQ threads call it.
 * One fexit per prototype: the verifier lets a program read the return value only at its real
 * position, and the loader picks by the BTF parameter count.
 */
SEC("fexit/io_sq_tw")
int BPF_PROG(iou_fexit_sq_tw, void *retry_list, int max_entries, int ret)
{
	pass_ends(ret);
	return 0;
}

SEC("fexit/io_sq_tw")
int BPF_PROG(iou_fexit_sq_tw_1arg, void *arg, int ret)
{
	pass_ends(ret);
	return 0;
}

SEC("kretprobe/io_sq_tw")
int BPF_KRETPROBE(iou_kretprobe_sq_tw, int ret)
{
	pass_ends(ret);
	return 0;
}

/* --- io_submit_sqes: per-ring SQ thread work ------------------------------------------------ */

static __always_inline void submit_enter(void *ctx)
{
	if (!current_is_sq_thread())
		return;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_state st = { .ts = bpf_ktime_get_ns(), .ctx = (__u64)ctx };
	pass_work_begins(tid, st.ts, st.ctx);
	call_enter(&submit_calls, tid, &st);
}

static __always_inline void submit_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_state *st = bpf_map_lookup_elem(&submit_calls, &tid);

	if (!st)
		return;
	/*
	 * The call may have started on another CPU, whose clock can be ahead: a TCG guest's vCPUs
	 * differ by up to a millisecond (a call 0.73 ms "negative" wrapped the ring's submit time
	 * to 2^64 ns in Churn.ShortFioJobsHoldTheInvariants on the sid guest). Such a call counts 0.
	 */
	__u64 now = bpf_ktime_get_ns();
	__u64 ns = now > st->ts ? now - st->ts : 0;
	__u64 ctx = st->ctx;
	bpf_map_delete_elem(&submit_calls, &tid);

	static const struct iou_ring_work zero = {};
	struct iou_ring_work *w = lookup_or_init(&ring_work, &ctx, &zero, &stats.deep_dropped);
	if (!w)
		return;
	__sync_fetch_and_add(&w->submit_ns, ns);
	__sync_fetch_and_add(&w->batches, 1);
	if (ret > 0)
		__sync_fetch_and_add(&w->sqes, ret);
}

SEC("fentry/io_submit_sqes")
int BPF_PROG(iou_fentry_submit, void *ring)
{
	submit_enter(ring);
	return 0;
}

SEC("fexit/io_submit_sqes")
int BPF_PROG(iou_fexit_submit, void *ring, unsigned int nr, int ret)
{
	submit_exit(ret);
	return 0;
}

SEC("kprobe/io_submit_sqes")
int BPF_KPROBE(iou_kprobe_submit, void *ring)
{
	submit_enter(ring);
	return 0;
}

SEC("kretprobe/io_submit_sqes")
int BPF_KRETPROBE(iou_kretprobe_submit, int ret)
{
	submit_exit(ret);
	return 0;
}

/* --- io_do_iopoll: poll efficiency per ring and caller ------------------------------------- */

/*
 * 5.10-5.15: int io_do_iopoll(ctx, unsigned int *nr_events, long min) returns 0/-err and adds
 * the reaped count to *nr_events. 5.16+: int io_do_iopoll(ctx, bool force_nonspin) returns the
 * reaped count. iopoll_counts_in_arg selects the first reading.
 */
static __always_inline void iopoll_enter(void *ctx, void *nr_events)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_state st = { .ts = bpf_ktime_get_ns(), .ctx = (__u64)ctx };

	if (iopoll_counts_in_arg && nr_events) {
		st.nr_events_ptr = (__u64)nr_events;
		bpf_probe_read_kernel(&st.nr_before, sizeof(st.nr_before), nr_events);
	}
	if (track_passes && current_is_sq_thread())
		pass_work_begins(tid, st.ts, st.ctx);
	call_enter(&iopoll_calls, tid, &st);
}

static __always_inline void iopoll_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_state *st = bpf_map_lookup_elem(&iopoll_calls, &tid);

	if (!st)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 ns = now > st->ts ? now - st->ts : 0; /* another CPU's clock, see submit_exit() */
	__u64 reaped = 0;
	if (iopoll_counts_in_arg) {
		__u32 after = st->nr_before;
		if (st->nr_events_ptr)
			bpf_probe_read_kernel(&after, sizeof(after), (void *)st->nr_events_ptr);
		reaped = (__u32)(after - st->nr_before);
	} else if (ret > 0) {
		reaped = ret;
	}
	struct iou_iopoll_key key = {
		.ctx = st->ctx,
		.caller = current_is_sq_thread() ? IOU_CALLER_SQ_THREAD : IOU_CALLER_APP,
	};
	bpf_map_delete_elem(&iopoll_calls, &tid);

	static const struct iou_iopoll_stats zero = {};
	struct iou_iopoll_stats *s = lookup_or_init(&iopoll_stats, &key, &zero, &stats.deep_dropped);
	if (!s)
		return;
	__sync_fetch_and_add(&s->calls, 1);
	__sync_fetch_and_add(&s->ns, ns);
	if (reaped)
		__sync_fetch_and_add(&s->completions, reaped);
	else
		__sync_fetch_and_add(&s->empty, 1);
}

SEC("fentry/io_do_iopoll")
int BPF_PROG(iou_fentry_iopoll, void *ring, void *arg1)
{
	iopoll_enter(ring, arg1);
	return 0;
}

/*
 * The 5.10-5.15 prototype's entry. Verifiers of that age refuse an fentry program's read of an
 * argument that points to anything but a struct (btf_ctx_access: "invalid bpf_context access"),
 * and nr_events is an unsigned int *; the pointer is copied out of the trampoline's argument
 * array instead.
 */
SEC("fentry/io_do_iopoll")
int iou_fentry_iopoll_v510(__u64 *ctx)
{
	__u64 nr_events = 0;

	bpf_probe_read_kernel(&nr_events, sizeof(nr_events), &ctx[1]);
	iopoll_enter((void *)ctx[0], (void *)nr_events);
	return 0;
}

/* Two exits: the verifier only lets a program read the return value at its real position. */
SEC("fexit/io_do_iopoll")
int BPF_PROG(iou_fexit_iopoll, void *ring, bool force_nonspin, int ret)
{
	iopoll_exit(ret);
	return 0;
}

SEC("fexit/io_do_iopoll")
int BPF_PROG(iou_fexit_iopoll_v510, void *ring, unsigned int *nr_events, long min, int ret)
{
	iopoll_exit(ret);
	return 0;
}

SEC("kprobe/io_do_iopoll")
int BPF_KPROBE(iou_kprobe_iopoll, void *ring, void *arg1)
{
	iopoll_enter(ring, arg1);
	return 0;
}

SEC("kretprobe/io_do_iopoll")
int BPF_KRETPROBE(iou_kretprobe_iopoll, int ret)
{
	iopoll_exit(ret);
	return 0;
}

