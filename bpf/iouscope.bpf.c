// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * iouscope's default tier: zero cost on the I/O path.
 * - iter/task_file samples counters the kernel already keeps for every io_uring file.
 * - tp_btf sched_switch / sched_waking follow SQ threads only; every other task leaves after one
 *   flags test (see is_sq_thread()).
 * - tp_btf io_uring_create notes rings that may live and die between two samples.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "iouscope/records.h"
#include "iouscope/gap_sampling.h"
#include "core_fixes.bpf.h"

#define EEXIST 17

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Identifies io_uring files: io_uring_fops is in neither kallsyms nor BTF, io_uring_poll is. */
extern const void io_uring_poll __ksym __weak;

struct iou_stats stats = {};

/*
 * Duty-cycled work gaps (include/iouscope/gap_sampling.h): 0 when every gap is recorded. The
 * daemon opens a window by attaching the per-SQE program, then writing gap_start_ns and, last,
 * gap_end_ns; a program reads the end first, so it never pairs a new end with an old start.
 */
const volatile __u64 gap_cutoff_ns = 0;
volatile __u64 gap_start_ns = 0;
volatile __u64 gap_end_ns = 0;

/* Whether a thread's last SQE is one of this window's, so the spin from it to a sleep now is
 * known; with every gap recorded it always is. */
static __always_inline bool last_work_in_window(__u64 last, __u64 now)
{
	if (!gap_cutoff_ns)
		return true;
	__u64 end = gap_end_ns;

	return last >= gap_start_ns && now < end;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct iou_sched_state);
} sched_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_WAKERS);
	__type(key, struct iou_waker_key);
	__type(value, struct iou_waker_val);
} wakers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_CREATED);
	__type(key, struct iou_created_key);
	__type(value, struct iou_created_ring);
} created_rings SEC(".maps");

/*
 * When io_uring_create announced each ring, by io_ring_ctx address. The iterator copies it into
 * the ring's record (born_ns): a closed ring's address is soon reused by the next ring, and the
 * birth time tells the two apart. Userspace deletes the entries of rings that are gone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u64);
	__type(value, __u64);
} ring_births SEC(".maps");

/* Deep tier, per ring; declared here because io_uring_create resets them (forget_ring_work). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u64);
	__type(value, struct iou_ring_work);
} ring_work SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, struct iou_iopoll_key);
	__type(value, struct iou_iopoll_stats);
} iopoll_stats SEC(".maps");

/*
 * A new ring at ctx: deep-tier counts still kept under that address belong to a closed ring
 * whose memory it reuses, so they go before the new ring counts anything.
 */
static __always_inline void forget_ring_work(__u64 ctx)
{
	struct iou_iopoll_key key = { .ctx = ctx, .caller = IOU_CALLER_APP };

	bpf_map_delete_elem(&ring_work, &ctx);
	bpf_map_delete_elem(&iopoll_stats, &key);
	key.caller = IOU_CALLER_SQ_THREAD;
	bpf_map_delete_elem(&iopoll_stats, &key);
}

#define TASK_RUNNING 0

/*
 * The value for key, inserted from init if absent. A failed insert is counted in *dropped and
 * gives NULL, whatever the reason (-E2BIG for a full map, -ENOMEM), except -EEXIST: BPF_NOEXIST
 * makes a racing insert harmless, the loser looks up the winner's entry. Inlined like every
 * helper here, so each call site hands the verifier its own map.
 */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *init,
					    __u64 *dropped)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	long err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		__sync_fetch_and_add(dropped, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/*
 * The entry of SQ thread tid in a map whose values begin with their owner's start_time
 * (records.h). An entry left by an exited thread whose tid was reused is reset before the new
 * thread counts anything into it, so no count ever passes from one thread to the next.
 */
static __always_inline void *thread_entry(void *map, __u32 tid, __u64 start, const void *zero,
					  __u64 *dropped)
{
	__u64 *owner = lookup_or_init(map, &tid, zero, dropped);

	if (!owner || *owner == start)
		return owner;
	if (*owner) {
		bpf_map_update_elem(map, &tid, zero, BPF_EXIST);
		owner = bpf_map_lookup_elem(map, &tid);
		if (!owner)
			return NULL;
	}
	*owner = start;
	return owner;
}

/* The entry of thread tid if it belongs to that thread, without creating one. */
static __always_inline void *thread_entry_if_owned(void *map, __u32 tid, __u64 start)
{
	__u64 *owner = bpf_map_lookup_elem(map, &tid);

	return owner && *owner == start ? owner : NULL;
}

static __always_inline __u64 current_start_ns(void)
{
	/* Not bpf_get_current_task_btf(): that helper arrived in 5.11. */
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), start_time);
}

static __always_inline struct iou_sched_state *sched_state_get(struct task_struct *t)
{
	static const struct iou_sched_state zero = {};

	return thread_entry(&sched_state, t->pid, t->start_time, &zero, &stats.sched_dropped);
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 b = 0;

	/* Bounded loop: the verifier needs a constant trip count. */
	for (int i = 0; i < IOU_LAT_BUCKETS - 1; i++) {
		if (v < 2)
			break;
		v >>= 1;
		b++;
	}
	return b;
}

/* Deep tier, declared here because sched_switch reads it: see iou_submit_req. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct iou_work_gaps);
} work_gaps SEC(".maps");

/* Deep tier, declared here because sched_switch reads it: see iou_fexit_sq_tw. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct iou_sq_passes);
} sq_passes SEC(".maps");

/*
 * Deep tier, declared here because sched_switch reads them: in-flight entry state between an
 * entry and its exit probe (io_submit_sqes, io_do_iopoll), per thread.
 */
struct call_state {
	__u64 ts; /* the call's start, moved later by the time the thread spent switched out */
	__u64 ctx;
	__u64 nr_events_ptr; /* io_do_iopoll's unsigned int *nr_events, old prototype only */
	__u64 off_cpu_ns;    /* when the thread was switched out inside the call; 0 if it is not */
	__u32 nr_before;
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_state);
} submit_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct call_state);
} iopoll_calls SEC(".maps");

/* Set by the loader when io_submit_sqes or io_do_iopoll is timed: see calls_switch(). */
const volatile bool track_call_cpu = false;

/*
 * A call's time is the SQ thread's on-CPU time inside it, as a loop pass's is: time switched out
 * (preempted, or waiting inside the call) moves the call's start later. Wall time let a call
 * inside a pass outlast the pass itself.
 */
static __always_inline void calls_switch(void *map, __u32 prev_tid, __u32 next_tid, __u64 now)
{
	struct call_state *st;

	if (prev_tid) {
		st = bpf_map_lookup_elem(map, &prev_tid);
		if (st)
			st->off_cpu_ns = now;
	}
	if (next_tid) {
		st = bpf_map_lookup_elem(map, &next_tid);
		if (st && st->off_cpu_ns) {
			if (now > st->off_cpu_ns)
				st->ts += now - st->off_cpu_ns;
			st->off_cpu_ns = 0;
		}
	}
}

/*
 * Ends the thread's current sleep or block at `now`, charging its time to the one it was. A
 * sleep that began before we attached has no start: only its end is seen.
 */
static __always_inline void close_sleep(struct iou_sched_state *s, __u64 now)
{
	__u64 start = s->sleep_start_ns;

	if (!start)
		return;
	if (now > start)
		__sync_fetch_and_add(s->blocked ? &s->block_ns : &s->sleep_ns, now - start);
	s->sleep_start_ns = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(iou_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool prev_sq = is_sq_thread_btf(prev);
	bool next_sq = is_sq_thread_btf(next);

	if (!prev_sq && !next_sq)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	struct iou_sched_state *s;
	struct iou_sq_passes *p;

	if (track_call_cpu) {
		__u32 prev_tid = prev_sq ? prev->pid : 0, next_tid = next_sq ? next->pid : 0;

		calls_switch(&submit_calls, prev_tid, next_tid, now);
		calls_switch(&iopoll_calls, prev_tid, next_tid, now);
	}
	/* Deep tier only: time switched out inside a pass's work bracket is not work. */
	if (prev_sq) {
		p = thread_entry_if_owned(&sq_passes, prev->pid, prev->start_time);
		if (p && (p->start_ns || p->tw_start_ns))
			p->off_cpu_ns = now;
	}
	if (next_sq) {
		p = thread_entry_if_owned(&sq_passes, next->pid, next->start_time);
		if (p && p->off_cpu_ns) {
			if (p->start_ns && now > p->off_cpu_ns) {
				p->start_ns += now - p->off_cpu_ns;
				p->turn_start_ns += now - p->off_cpu_ns;
			}
			if (p->tw_start_ns && now > p->off_cpu_ns)
				p->tw_start_ns += now - p->off_cpu_ns;
			p->off_cpu_ns = 0;
		}
	}

	__u32 state = prev_sq && !preempt ? get_task_state(prev) : TASK_RUNNING;
	if (prev_sq) {
		/* A thread going to sleep gets an entry; one merely preempted only if it has one. */
		s = state != TASK_RUNNING
			    ? sched_state_get(prev)
			    : thread_entry_if_owned(&sched_state, prev->pid, prev->start_time);
		if (s)
			s->oncpu_mono_ns = 0;
	}
	if (state != TASK_RUNNING) {
		bool idle = is_idle_sleep(state);

		if (s) {
			if (idle)
				__sync_fetch_and_add(&s->sleeps, 1);
			else
				__sync_fetch_and_add(&s->blocks, 1);
			s->blocked = !idle;
			s->sleep_start_ns = now;
		}
		/* Present only with the deep tier: how long it spun after its last SQE. */
		struct iou_work_gaps *g =
			thread_entry_if_owned(&work_gaps, prev->pid, prev->start_time);
		if (idle && g && g->last_work_ns && now > g->last_work_ns &&
		    last_work_in_window(g->last_work_ns, now)) {
			__sync_fetch_and_add(&g->sleep_spins, 1);
			__sync_fetch_and_add(&g->sleep_spin_ns, now - g->last_work_ns);
		}
	}
	if (next_sq) {
		s = sched_state_get(next);
		/*
		 * The CPU time the iterator adds to a thread on a CPU starts here: exact on the
		 * monotonic clock, where the scheduler charges a thread alone on a nohz_full CPU
		 * once a second.
		 */
		if (s) {
			s->oncpu_runtime_ns = next->se.sum_exec_runtime;
			s->oncpu_mono_ns = now;
			s->oncpu_switches = next->nvcsw + next->nivcsw;
		}
		/*
		 * A sleep still open here ended with no wakeup traced. Under CPU contention the 6.18
		 * host put back on a CPU a thread that had switched out in TASK_INTERRUPTIBLE 80 ms
		 * before, with neither sched_waking nor sched_wakeup (bpftrace's classic tracepoints
		 * saw none either). Left open, its time asleep would be lost to the next sleep.
		 */
		if (s)
			close_sleep(s, now);
		if (s && s->wake_ts_ns) {
			__u64 lat = now - s->wake_ts_ns;
			__u32 b = log2_bucket(lat);

			s->wake_ts_ns = 0;
			if (b < IOU_LAT_BUCKETS)
				__sync_fetch_and_add(&s->lat_hist[b], 1);
			__sync_fetch_and_add(&s->lat_count, 1);
			__sync_fetch_and_add(&s->lat_sum_ns, lat);
		}
	}
	return 0;
}

/*
 * One program per wake: it counts the wakeup, ends the sleep, starts the wake latency and names
 * the waker. sched_waking runs in the waker's context; sched_wakeup may run later on the target
 * CPU (TTWU_QUEUE sends the activation there by IPI), where "current" is whatever that CPU was
 * running, often the idle task: in the 6.x/7.x QEMU guests nearly every wakeup was attributed to
 * the wrong task that way. try_to_wake_up traces sched_waking only once the task's state
 * matched, and each is followed by a sched_wakeup: the same wakes, microseconds earlier, so the
 * latency includes that IPI. A waking that lands while the thread is still switching out comes
 * before that switch's sched_switch; the sleep it opens then closes at the switch-in. A second
 * program on sched_wakeup would add a dispatch to every wakeup of every task on the machine,
 * which the NOP benchmarks pay for (docs/BENCHMARKS.md).
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(iou_sched_waking, struct task_struct *p)
{
	if (!is_sq_thread_btf(p))
		return 0;

	struct iou_sched_state *s = sched_state_get(p);

	if (s) {
		__u64 now = bpf_ktime_get_ns();

		__sync_fetch_and_add(&s->wakeups, 1);
		close_sleep(s, now);
		s->wake_ts_ns = now;
	}

	__u32 context = waker_context();
	struct iou_waker_key key = {
		.sq_tid = p->pid,
		.waker_pid = context == IOU_WAKER_TASK ? bpf_get_current_pid_tgid() >> 32 : 0,
		.context = context,
	};
	__u64 start = p->start_time;
	struct iou_waker_val *w = bpf_map_lookup_elem(&wakers, &key);
	if (w && w->sq_start_ns == start) {
		__sync_fetch_and_add(&w->count, 1);
		return 0;
	}
	/* New pair, or one left by an exited thread whose tid was reused: start it afresh. */
	struct iou_waker_val init = { .sq_start_ns = start, .count = 1 };
	bpf_get_current_comm(init.comm, sizeof(init.comm));
	long err = bpf_map_update_elem(&wakers, &key, &init, w ? BPF_EXIST : BPF_NOEXIST);
	if (err && err != -EEXIST)
		__sync_fetch_and_add(&stats.wakers_dropped, 1);
	return 0;
}

SEC("tp_btf/io_uring_create")
int BPF_PROG(iou_io_uring_create, int fd, void *ring, __u32 sq_entries, __u32 cq_entries,
	     __u32 flags)
{
	struct iou_created_ring r = {
		.ctx = (__u64)ring,
		.ts_ns = bpf_ktime_get_ns(),
		.pid = bpf_get_current_pid_tgid() >> 32,
		.fd = fd,
		.setup_flags = flags,
		.sq_entries = sq_entries,
	};

	/* Not the fetch-and-add's result as a key: fetching atomics need 5.12 (BPF_FETCH). */
	struct iou_created_key key = { .ctx = r.ctx, .ts_ns = r.ts_ns };

	__sync_fetch_and_add(&stats.rings_created, 1);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
	if (bpf_map_update_elem(&created_rings, &key, &r, BPF_NOEXIST))
		__sync_fetch_and_add(&stats.created_dropped, 1);
	if (bpf_map_update_elem(&ring_births, &r.ctx, &r.ts_ns, BPF_ANY))
		__sync_fetch_and_add(&stats.births_dropped, 1);
	forget_ring_work(r.ctx);
	return 0;
}

/*
 * CPU time thread tid has run and the scheduler has not yet charged, from the moment sched_switch
 * gave it a CPU (*since): sum_exec_runtime then, plus the time since, less what is charged now.
 * False when the thread has not switched in since iouscope attached, or is off its CPU.
 */
static __always_inline bool running_since_switch_in(__u32 tid, __u64 start, __u64 charged,
						    __u64 switches, __u64 now, __u64 *out,
						    __u64 *since)
{
	struct iou_sched_state *s = thread_entry_if_owned(&sched_state, tid, start);

	if (!s)
		return false;
	__u64 in = s->oncpu_mono_ns, base = s->oncpu_runtime_ns;
	/*
	 * Every switch-out counts one of nvcsw or nivcsw. A count that moved since the switch-in
	 * means a switch-out sched_switch did not see (the scheduler gate had it detached), so the
	 * stretch is over.
	 */
	if (!in || s->oncpu_switches != switches)
		return false;
	__u64 total = base + (now > in ? now - in : 0);
	*out = total > charged ? total - charged : 0;
	*since = in;
	return true;
}

SEC("iter/task_file")
int iou_iter_rings(struct bpf_iter__task_file *it)
{
	struct file *file = it->file;
	struct task_struct *task = it->task;

	if (!file || !task || !&io_uring_poll)
		return 0;
	if ((const void *)BPF_CORE_READ(file, f_op, poll) != &io_uring_poll)
		return 0;

	struct io_ring_ctx *ctx = BPF_CORE_READ(file, private_data);
	if (!ctx)
		return 0;

	struct iou_ring_record r = {};
	r.ctx = (__u64)ctx;
	r.pid = BPF_CORE_READ(task, tgid);
	r.fd = it->fd;
	r.cgroup_id = get_task_cgroup_id(task);
	r.setup_flags = BPF_CORE_READ(ctx, flags);
	r.sq_head = BPF_CORE_READ(ctx, cached_sq_head);
	r.cq_tail = BPF_CORE_READ(ctx, cached_cq_tail);
	r.sq_entries = BPF_CORE_READ(ctx, sq_entries);
	r.sq_tid = -1;
	r.sq_cpu = -1;
	r.jiffies = bpf_jiffies64();
	r.read_ns = bpf_ktime_get_ns();
	BPF_CORE_READ_STR_INTO(&r.comm, task, group_leader, comm);
	__u64 *born = bpf_map_lookup_elem(&ring_births, &r.ctx);
	if (born)
		r.born_ns = *born;
	struct iou_ring_work *work = bpf_map_lookup_elem(&ring_work, &r.ctx);
	if (work)
		r.probe_sqes = work->sqes;

	struct io_rings *rings = BPF_CORE_READ(ctx, rings);
	if (rings && !bpf_core_read(&r.sq_tail, sizeof(r.sq_tail), &rings->sq.tail))
		r.caps |= IOU_CAP_SQ_TAIL;

	struct io_sq_data *sqd = BPF_CORE_READ(ctx, sq_data);
	r.sqd = (__u64)sqd;
	r.sq_thread_idle = get_sq_thread_idle(ctx, sqd, &r.sq_idle_unit);
	if (has_sqd_thread_idle())
		r.caps |= IOU_CAP_IDLE_IN_SQD;
	if (sqd) {
		struct io_sq_data___v512 *v512 = (void *)sqd;
		if (bpf_core_field_exists(v512->sq_cpu)) {
			r.caps |= IOU_CAP_SQ_CPU;
			r.sq_cpu = get_sqd_cpu(sqd);
		}
		if (get_sqd_percpu(sqd))
			r.caps |= IOU_CAP_SQD_PERCPU;
		if (has_sqd_work_time(sqd)) {
			r.caps |= IOU_CAP_WORK_TIME;
			r.work_time_us = get_sqd_work_time_us(sqd);
		}
		struct task_struct *t = BPF_CORE_READ(sqd, thread);
		if (t) {
			r.caps |= IOU_CAP_SQ_THREAD;
			r.sq_tid = BPF_CORE_READ(t, pid);
			r.sq_start_ns = BPF_CORE_READ(t, start_time);
			r.sq_runtime_ns = BPF_CORE_READ(t, se.sum_exec_runtime);
			r.sq_nvcsw = BPF_CORE_READ(t, nvcsw);
			r.sq_nivcsw = BPF_CORE_READ(t, nivcsw);
			if (running_since_switch_in(r.sq_tid, r.sq_start_ns, r.sq_runtime_ns,
						    r.sq_nvcsw + r.sq_nivcsw, r.read_ns,
						    &r.sq_running_ns, &r.sq_oncpu_ns))
				r.caps |= IOU_CAP_RUNNING;
			r.sq_state = get_task_state(t);
			r.sq_tgid = BPF_CORE_READ(t, tgid);
			r.sq_cgroup_id = get_task_cgroup_id(t);
			BPF_CORE_READ_STR_INTO(&r.sq_comm, t, group_leader, comm);
		}
	}
	__sync_fetch_and_add(&stats.iter_rings, 1);
	bpf_seq_write(it->meta->seq, &r, sizeof(r));
	return 0;
}

/*
 * ---------------------------------------------------------------------------------------------
 * Deep tier: fentry/fexit where the kernel allows them, kprobe/kretprobe otherwise. Off unless
 * the user asks (--probes.deep): io_submit_sqes and io_do_iopoll fire per batch or per poll, the
 * NVMe programs per request. The loader picks one variant per probe; both variants feed the same
 * maps through the same helpers.
 * ---------------------------------------------------------------------------------------------
 */

/* Set by the loader from io_do_iopoll's BTF prototype (see core_fixes: no version checks). */
const volatile bool iopoll_counts_in_arg = false;
/* Set by the loader when the loop-pass probe (io_sq_tw) is loaded: see iou_fexit_sq_tw. */
const volatile bool track_passes = false;
/* Set by the loader when the io_uring_cmd_done probe is loaded: see iou_fentry_cmd_done. */
const volatile bool track_cmd_done = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_DEVICES);
	__type(key, struct iou_dev_key);
	__type(value, struct iou_nvme_stats);
} nvme_stats SEC(".maps");

/* Entry state for the exit probe; a call that cannot be paired is counted, not guessed. */
static __always_inline void call_enter(void *map, __u32 tid, struct call_state *st)
{
	if (bpf_map_update_elem(map, &tid, st, BPF_ANY))
		__sync_fetch_and_add(&stats.inflight_dropped, 1);
}

static __always_inline bool current_is_sq_thread(void)
{
	return is_sq_thread((struct task_struct *)bpf_get_current_task());
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
	__u64 ns = bpf_ktime_get_ns() - st->ts;
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
	__u64 ns = bpf_ktime_get_ns() - st->ts;
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

/* --- NVMe passthrough completions ------------------------------------------------------------- */

static __always_inline struct iou_nvme_stats *nvme_stats_get(struct iou_dev_key *key)
{
	static const struct iou_nvme_stats zero = {};

	return lookup_or_init(&nvme_stats, key, &zero, &stats.deep_dropped);
}

/*
 * NVMe commands between end_io and io_uring_cmd_done, by io_uring_cmd address. LRU: an entry
 * whose done never comes (a ring torn down under it) ages out instead of filling the map.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct iou_cmd_pending);
} cmd_pending SEC(".maps");

/*
 * nvme_uring_cmd_end_io(struct request *req, blk_status_t err[, ...]): 6.1 returns void, later
 * kernels return enum rq_end_io_ret, 7.0 adds an io_comp_batch argument. Only req is read, so one
 * program serves every prototype.
 */
static __always_inline void nvme_end_io(struct request *req)
{
	struct iou_dev_key key = {};
	get_req_disk_name(req, key.disk, sizeof(key.disk));
	struct iou_nvme_stats *s = nvme_stats_get(&key);
	if (!s)
		return;
	bool on_poll_queue = get_req_on_poll_queue(req);
	if (on_poll_queue)
		__sync_fetch_and_add(&s->polled, 1);
	else
		__sync_fetch_and_add(&s->irq, 1);
	if (!on_poll_queue && get_req_polled_intent(req))
		__sync_fetch_and_add(&s->polled_intent_irq, 1);
	__u64 now = bpf_ktime_get_ns();
	if (track_cmd_done) {
		/* nvme's end_io_data is the io_uring_cmd io_uring_cmd_done will be called with. */
		__u64 cmd = (__u64)BPF_CORE_READ(req, end_io_data);
		struct iou_cmd_pending p = { .end_io_ns = now, .dev = key };
		if (cmd)
			bpf_map_update_elem(&cmd_pending, &cmd, &p, BPF_ANY);
	}
	__u64 start = BPF_CORE_READ(req, start_time_ns);
	if (start) {
		__u64 lat = now - start;
		__u32 b = log2_bucket(lat);
		if (b < IOU_LAT_BUCKETS)
			__sync_fetch_and_add(&s->lat_hist[b], 1);
		__sync_fetch_and_add(&s->lat_count, 1);
		__sync_fetch_and_add(&s->lat_sum_ns, lat);
	}
}

SEC("fentry/nvme_uring_cmd_end_io")
int BPF_PROG(iou_fentry_nvme_end_io, struct request *req)
{
	nvme_end_io(req);
	return 0;
}

/* 6.1-6.7 complete commands that carry a metadata buffer through a second callback. */
SEC("fentry/nvme_uring_cmd_end_io_meta")
int BPF_PROG(iou_fentry_nvme_end_io_meta, struct request *req)
{
	nvme_end_io(req);
	return 0;
}

/*
 * Addresses of nvme_core's two end_io callbacks (the _meta one exists 6.1-6.7), written by the
 * loader from /proc/kallsyms whenever nvme_core is (re)loaded, 0 while it is not. They are not
 * ksyms: libbpf resolves those once, at load, so a module loaded after the daemon started would
 * leave them 0 and the tracepoint variant matching nothing.
 */
volatile __u64 nvme_end_io_fn = 0;
volatile __u64 nvme_end_io_meta_fn = 0;

/*
 * Tracepoint variant, preferred over the kprobe: block_rq_complete fires for every request just
 * before its end_io callback, in whatever context completes it. A kprobe there runs in the
 * interrupt handler and is skipped whenever the interrupt lands while another kprobe program of
 * ours runs on that CPU (bpf_prog_active): in the 6.1 guest it lost about 20% of IRQ
 * completions, without counting them in recursion_misses. tp_btf programs have no such shared
 * guard. The request is a passthrough command of ours if its end_io is one of the two above.
 */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(iou_tp_nvme_complete, struct request *req)
{
	/*
	 * A plain load through the tracepoint's trusted pointer, not BPF_CORE_READ: this runs for
	 * every block request of the machine, and the probe-read helper was most of its cost.
	 */
	__u64 fn = (__u64)req->end_io;

	if (!fn || (fn != nvme_end_io_fn && fn != nvme_end_io_meta_fn))
		return 0;
	nvme_end_io(req);
	return 0;
}

SEC("kprobe/nvme_uring_cmd_end_io")
int BPF_KPROBE(iou_kprobe_nvme_end_io, struct request *req)
{
	nvme_end_io(req);
	return 0;
}

SEC("kprobe/nvme_uring_cmd_end_io_meta")
int BPF_KPROBE(iou_kprobe_nvme_end_io_meta, struct request *req)
{
	nvme_end_io(req);
	return 0;
}

/*
 * io_uring_cmd_done(cmd, ret, res2[, issue_flags]) (6.0-6.17), __io_uring_cmd_done(cmd, ...)
 * (6.18+, io_uring_cmd_done becoming an inline wrapper): the completion reaches the ring. Every
 * uring_cmd passes here (ublk, sockets too); only commands whose NVMe end_io was seen count.
 * On 6.16+ (and 6.1.143+) end_io always defers this to task work; before, polled completions
 * came here at once and interrupt-completed ones through task work.
 */
static __always_inline void cmd_done(struct io_uring_cmd *cmd)
{
	__u64 key = (__u64)cmd;
	struct iou_cmd_pending *p = bpf_map_lookup_elem(&cmd_pending, &key);

	if (!p)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 delay = now > p->end_io_ns ? now - p->end_io_ns : 0;
	struct iou_dev_key dev = p->dev;
	bpf_map_delete_elem(&cmd_pending, &key);
	struct iou_nvme_stats *s = nvme_stats_get(&dev);
	if (!s)
		return;
	__u32 b = log2_bucket(delay);
	__sync_fetch_and_add(&s->cqes, 1);
	__sync_fetch_and_add(&s->cqe_delay_sum_ns, delay);
	if (b < IOU_LAT_BUCKETS)
		__sync_fetch_and_add(&s->cqe_delay_hist[b], 1);
}

SEC("fentry/io_uring_cmd_done")
int BPF_PROG(iou_fentry_cmd_done, struct io_uring_cmd *cmd)
{
	cmd_done(cmd);
	return 0;
}

SEC("fentry/__io_uring_cmd_done")
int BPF_PROG(iou_fentry_cmd_done_618, struct io_uring_cmd *cmd)
{
	cmd_done(cmd);
	return 0;
}

SEC("kprobe/io_uring_cmd_done")
int BPF_KPROBE(iou_kprobe_cmd_done, struct io_uring_cmd *cmd)
{
	cmd_done(cmd);
	return 0;
}

SEC("kprobe/__io_uring_cmd_done")
int BPF_KPROBE(iou_kprobe_cmd_done_618, struct io_uring_cmd *cmd)
{
	cmd_done(cmd);
	return 0;
}

/*
 * One poll of a passthrough command, counted on the disk of the request it polls: the path's
 * disk (nvme0c1n1) under multipath, the same disk its completion is counted on.
 */
static __always_inline void nvme_poll(struct io_uring_cmd *cmd, bool head_cdev)
{
	struct iou_dev_key key = {};
	get_uring_cmd_poll_disk_name(cmd, head_cdev, key.disk, sizeof(key.disk));
	struct iou_nvme_stats *s = nvme_stats_get(&key);
	if (s)
		__sync_fetch_and_add(&s->polls, 1);
}

SEC("fentry/nvme_ns_chr_uring_cmd_iopoll")
int BPF_PROG(iou_fentry_nvme_poll, struct io_uring_cmd *cmd)
{
	nvme_poll(cmd, false);
	return 0;
}

SEC("kprobe/nvme_ns_chr_uring_cmd_iopoll")
int BPF_KPROBE(iou_kprobe_nvme_poll, struct io_uring_cmd *cmd)
{
	nvme_poll(cmd, false);
	return 0;
}

/*
 * Multipath head character devices (/dev/ngXnY of a namespace reachable through several
 * controllers) have their own iopoll up to 6.x kernels that still use the io_uring_cmd cookie;
 * later ones poll them through nvme_ns_chr_uring_cmd_iopoll too.
 */
SEC("fentry/nvme_ns_head_chr_uring_cmd_iopoll")
int BPF_PROG(iou_fentry_nvme_head_poll, struct io_uring_cmd *cmd)
{
	nvme_poll(cmd, true);
	return 0;
}

SEC("kprobe/nvme_ns_head_chr_uring_cmd_iopoll")
int BPF_KPROBE(iou_kprobe_nvme_head_poll, struct io_uring_cmd *cmd)
{
	nvme_poll(cmd, true);
	return 0;
}

/* --- Work gaps: io_uring_submit_req / io_uring_submit_sqe tracepoints ----------------------- */

/*
 * Records one SQE of the current SQ thread. Only that thread writes its entry (sched_switch
 * writes other fields, in the same thread's context), so plain increments suffice: this runs per
 * SQE and a locked add costs as much as the rest.
 */
static __always_inline void note_work(__u32 tid, __u64 born, bool sampled)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 start = 0;
	static const struct iou_work_gaps zero = {};

	if (sampled) {
		__u64 end = gap_end_ns; /* the end first: see gap_start_ns */

		start = gap_start_ns;
		if (!iou_gap_in_window(now, born, start, end))
			return;
	}
	struct iou_work_gaps *g = thread_entry(&work_gaps, tid, born, &zero, &stats.deep_dropped);

	if (!g)
		return;
	__u64 gap;
	if (sampled) {
		gap = iou_gap_sampled(now, &g->last_work_ns, start, gap_cutoff_ns);
	} else {
		__u64 last = g->last_work_ns;

		g->last_work_ns = now;
		gap = last && now > last ? now - last : 0;
	}
	if (!gap)
		return;
	__u64 b = iou_gap_bucket(gap);
	/*
	 * Clamped here, on the register used as the index: clang otherwise bounds a zero-extended
	 * copy and indexes with the original, which verifiers before 6.8 or so reject.
	 */
	asm volatile("" : "+r"(b));
	if (b >= IOU_GAP_BUCKETS)
		b = IOU_GAP_BUCKETS - 1;
	g->count[b] += 1;
	g->sum_ns[b] += gap;
}

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
 * The tracepoint's name before 6.4, with other arguments on 5.10 (ctx, opcode, ...) than later
 * (the request); none is read, so the test is on the current task instead.
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
