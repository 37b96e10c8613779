// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * iouscope's default tier: zero cost on the I/O path.
 * - iter/task_file samples counters the kernel already keeps for every io_uring file.
 * - tp_btf sched_switch / sched_waking follow SQ threads only; every other task leaves after one
 *   flags test (see is_sq_thread()).
 * - tp_btf io_uring_create notes rings that may live and die between two samples.
 *
 * One object per tier, as the loader groups the probes (collect/probe_table.cpp): this one, the
 * default tier, is always loaded; with --probes.deep, iouscope_deep.bpf.c (the SQ thread's loop:
 * io_sq_thread, io_sq_tw, io_submit_sqes, io_do_iopoll), iouscope_nvme.bpf.c (NVMe passthrough:
 * end_io, io_uring_cmd_done, the char devices' iopoll; its maps and switches are its own) and
 * iouscope_gaps.bpf.c (the work-gap probe, per batch or per SQE: the per-SQE variant is
 * duty-cycled and shares the window with sched_switch here). An object is loaded only when one
 * of its probes is, so a tier that is off costs no object. This object owns every map two tiers
 * share (deep_maps.bpf.h, work_gaps.bpf.h) and the shared globals (common.bpf.h); the loader
 * loads it first and hands them to the others.
 */
#include "common.bpf.h"
#include "deep_maps.bpf.h"
#include "ring_births.bpf.h"
#include "work_gaps.bpf.h"

/* Identifies io_uring files: io_uring_fops is in neither kallsyms nor BTF, io_uring_poll is. */
extern const void io_uring_poll __ksym __weak;

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

static __always_inline struct iou_sched_state *sched_state_get(struct task_struct *t)
{
	static const struct iou_sched_state zero = {};

	return thread_entry(&sched_state, t->pid, t->start_time, &zero, &stats.sched_dropped);
}

/* Set by the loader when the deep tier, the only writer of ring_work, is loaded. */
const volatile bool ring_work_kept = false;
/* The kernel has bpf_rdonly_cast: the walk reads rings with plain loads (core_fixes.bpf.h). */
const volatile bool ring_cast = false;

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

/*
 * Deep tier only: time switched out inside a pass's work bracket is not work. prev_sq and
 * next_sq say which of the two tasks is an SQ thread.
 */
static __always_inline void passes_switch(struct task_struct *prev, bool prev_sq,
					  struct task_struct *next, bool next_sq, __u64 now)
{
	struct iou_sq_passes *p;

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
}

/* SQ thread next gets a CPU: its on-CPU stretch starts, its sleep and wake latency end. */
static __always_inline void switch_in(struct task_struct *next, __u64 now)
{
	struct iou_sched_state *s = sched_state_get(next);

	/*
	 * The CPU time the iterator adds to a thread on a CPU starts here: exact on the monotonic
	 * clock, where the scheduler charges a thread alone on a nohz_full CPU once a second.
	 */
	if (s) {
		s->oncpu_runtime_ns = next->se.sum_exec_runtime;
		s->oncpu_mono_ns = now;
		s->oncpu_switches = next->nvcsw + next->nivcsw;
	}
	/*
	 * A sleep still open here ended with no wakeup traced. Under CPU contention the 6.18 host
	 * put back on a CPU a thread that had switched out in TASK_INTERRUPTIBLE 80 ms before, with
	 * neither sched_waking nor sched_wakeup (bpftrace's classic tracepoints saw none either).
	 * Left open, its time asleep would be lost to the next sleep.
	 */
	if (s)
		close_sleep(s, now);
	if (s && s->wake_ts_ns) {
		/* Woken on another CPU, whose clock may be ahead (submit_exit() in the deep tier). */
		__u64 lat = now > s->wake_ts_ns ? now - s->wake_ts_ns : 0;
		__u32 b = log2_bucket(lat);

		s->wake_ts_ns = 0;
		if (b < IOU_LAT_BUCKETS)
			__sync_fetch_and_add(&s->lat_hist[b], 1);
		__sync_fetch_and_add(&s->lat_count, 1);
		__sync_fetch_and_add(&s->lat_sum_ns, lat);
	}
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

	if (track_call_cpu) {
		__u32 prev_tid = prev_sq ? prev->pid : 0, next_tid = next_sq ? next->pid : 0;

		calls_switch(&submit_calls, prev_tid, next_tid, now);
		calls_switch(&iopoll_calls, prev_tid, next_tid, now);
	}
	passes_switch(prev, prev_sq, next, next_sq, now);

	__u32 state = prev_sq && !preempt ? get_task_state(prev, false) : TASK_RUNNING;
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
	if (next_sq)
		switch_in(next, now);
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

/*
 * What the walk reads once per task rather than once per ring: the iterator visits a task's
 * files one after another, and a process holding 10,000 rings has one tgid, cgroup and comm.
 * Per CPU, so that a walk migrating between two read()s, or a second walk beside it, only misses.
 * An entry holds for one walk (walk_gen) and one process (its tgid): a task_struct's address
 * comes back for the next process forked on that CPU, and an entry kept from an earlier walk
 * named a new process's rings after the dead one that had had the address (about 1 round in 3
 * of kill, fork, read on one CPU).
 */
volatile __u64 walk_gen = 0; /* the collector counts its walks here, before each */

struct task_facts {
	__u64 task;    /* task_struct address these are of, 0 for none */
	__u64 gen;     /* walk_gen of the walk that read them */
	__u64 read_ns; /* when the walk reached the task: the instant of its plain rings' records */
	__u64 cgroup_id;
	__u32 tgid;
	__u32 _pad;
	char comm[IOU_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_facts);
} task_facts SEC(".maps");

static __always_inline void holder_facts(struct task_struct *task, struct iou_ring_record *r)
{
	__u32 zero = 0;
	struct task_facts *f = bpf_map_lookup_elem(&task_facts, &zero);
	__u32 tgid = BPF_CORE_READ(task, tgid);

	if (f && f->task == (__u64)task && f->gen == walk_gen && f->tgid == tgid) {
		r->read_ns = f->read_ns;
		r->pid = f->tgid;
		r->cgroup_id = f->cgroup_id;
		__builtin_memcpy(r->comm, f->comm, sizeof(r->comm));
		return;
	}
	r->read_ns = bpf_ktime_get_ns();
	r->pid = tgid;
	r->cgroup_id = get_task_cgroup_id(task, false);
	BPF_CORE_READ_STR_INTO(&r->comm, task, group_leader, comm);
	if (f) {
		f->task = (__u64)task;
		f->gen = walk_gen;
		f->read_ns = r->read_ns;
		f->tgid = r->pid;
		f->cgroup_id = r->cgroup_id;
		__builtin_memcpy(f->comm, r->comm, sizeof(f->comm));
	}
}

/*
 * What a ring with an SQ thread has besides: its idle setting, its backlog, its sqd's CPU and
 * work time, and the thread itself.
 */
static __always_inline void read_sq_side(struct io_ring_ctx *ctx, struct io_sq_data *sqd,
					 struct iou_ring_record *r)
{
	const bool cast = ring_cast;

	r->sq_thread_idle = get_sq_thread_idle(ctx, sqd, cast, &r->sq_idle_unit);
	/*
	 * SQEs published and not yet consumed: a backlog only where an SQ thread consumes them.
	 * Elsewhere the application's own io_uring_enter does, so the tail, in the rings' shared
	 * pages (a cache and TLB miss of its own), is left unread.
	 */
	struct io_rings *rings = IOU_READ(cast, ctx, rings);
	if (rings && cast) {
		r->sq_tail = rings->sq.tail;
		r->caps |= IOU_CAP_SQ_TAIL;
	} else if (rings && !bpf_core_read(&r->sq_tail, sizeof(r->sq_tail), &rings->sq.tail)) {
		r->caps |= IOU_CAP_SQ_TAIL;
	}

	struct io_sq_data___v512 *v512 = (void *)sqd;
	if (bpf_core_field_exists(v512->sq_cpu)) {
		r->caps |= IOU_CAP_SQ_CPU;
		r->sq_cpu = get_sqd_cpu(sqd, cast);
	}
	if (get_sqd_percpu(sqd, cast))
		r->caps |= IOU_CAP_SQD_PERCPU;
	if (has_sqd_work_time(sqd, cast)) {
		r->caps |= IOU_CAP_WORK_TIME;
		r->work_time_us = get_sqd_work_time_us(sqd, cast);
	}
	struct task_struct *t = IOU_READ(cast, sqd, thread);
	if (!t)
		return;
	/* Its CPU time is read now, so its instant is now. */
	r->read_ns = bpf_ktime_get_ns();
	r->caps |= IOU_CAP_SQ_THREAD;
	r->sq_tid = IOU_READ(cast, t, pid);
	r->sq_start_ns = IOU_READ(cast, t, start_time);
	r->sq_runtime_ns = IOU_READ(cast, t, se.sum_exec_runtime);
	r->sq_nvcsw = IOU_READ(cast, t, nvcsw);
	r->sq_nivcsw = IOU_READ(cast, t, nivcsw);
	if (running_since_switch_in(r->sq_tid, r->sq_start_ns, r->sq_runtime_ns,
				    r->sq_nvcsw + r->sq_nivcsw, r->read_ns, &r->sq_running_ns,
				    &r->sq_oncpu_ns))
		r->caps |= IOU_CAP_RUNNING;
	r->sq_state = get_task_state(t, cast);
	r->sq_tgid = IOU_READ(cast, t, tgid);
	r->sq_cgroup_id = get_task_cgroup_id(t, cast);
	if (cast)
		bpf_probe_read_kernel_str(r->sq_comm, sizeof(r->sq_comm), t->group_leader->comm);
	else
		BPF_CORE_READ_STR_INTO(&r->sq_comm, t, group_leader, comm);
}

/*
 * Light walks (model/ring_carry.hpp). walk_order is the order of the last full walk, written by
 * userspace (collect/walk_order.hpp): one entry per io_uring file as the iterator met them (tasks
 * by pid, each task's fds ascending), the ring's address with bit 0 set where the ring is plain
 * (neither SQPOLL nor IOPOLL), was idle over the last period, and a light walk may pass over it.
 * A light walk follows the order with walk_at and passes over a file that meets its next plain
 * entry without loading anything of the ring: at 10,000 idle rings the ring's first, cold load
 * was nearly half of the program's time. The entries are read in order, so they come from the
 * cache as the ring did not; a hash of the address into a table of hints missed the cache as
 * often as the ring itself (measured). A
 * file that meets none of the next IOU_WALK_LOOKAHEAD entries is read in full: a ring born since
 * the full walk, or one after a run of closed ones. A ring born at a closed plain ring's place
 * and address is taken out of the order by userspace once io_uring_create announced it, and one
 * born after the sampler drained those announcements stops the light walk passing over rings
 * (walk_births_seen); only a ring whose fd is installed but not yet announced can be passed over.
 */
#define IOU_WALK_LOOKAHEAD 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u32);
	__type(value, __u64);
} walk_order SEC(".maps");

/* Set by userspace before each walk. */
volatile __u32 walk_light = 0; /* pass over the plain rings of walk_order */
volatile __u32 walk_known = 0; /* entries of walk_order that hold the last full walk's order */
volatile __u32 walk_at = 0;    /* the light walk's place in walk_order, from 0 */
/* stats.rings_created when the sampler drained created_rings, just before the walk. */
volatile __u64 walk_births_seen = 0;

/*
 * Whether ctx is the plain ring the order expects next, or a few entries on (the rings between
 * closed). Compares the address as a number: a privileged program may, where it may not do
 * arithmetic on it.
 */
static __always_inline bool walk_passes_over(struct io_ring_ctx *ctx)
{
	__u32 at = walk_at;

	if (stats.rings_created != walk_births_seen)
		return false;
	for (__u32 k = 0; k < IOU_WALK_LOOKAHEAD; k++) {
		__u32 i = at + k;
		if (i >= walk_known)
			return false;
		__u64 *e = bpf_map_lookup_elem(&walk_order, &i);
		if (!e)
			return false;
		if ((*e & ~1ULL) != (__u64)ctx)
			continue;
		walk_at = i + 1;
		return *e & 1;
	}
	return false;
}

/*
 * Every file of every task passes the first test, so it is made of plain loads: the iterator's
 * file is a BTF pointer, and so is its f_op (probe reads cost ~30 ns each, twice per file, 29 %
 * of the daemon's time at 10,000 rings). private_data is a void *: the ring's own fields are
 * plain loads only where the kernel can cast it (ring_cast).
 */
SEC("iter/task_file")
int iou_iter_rings(struct bpf_iter__task_file *it)
{
	struct file *file = it->file;
	struct task_struct *task = it->task;

	if (!file || !task || !&io_uring_poll)
		return 0;
	const struct file_operations *fop = file->f_op;
	if (!fop || (const void *)fop->poll != &io_uring_poll)
		return 0;

	struct io_ring_ctx *ctx = get_ring_ctx(file->private_data, ring_cast);
	if (!ctx)
		return 0;
	if (walk_light && walk_passes_over(ctx))
		return 0;

	struct iou_ring_record r = {};
	r.ctx = (__u64)ctx;
	r.fd = it->fd;
	holder_facts(task, &r);
	r.setup_flags = IOU_READ(ring_cast, ctx, flags);
	r.sq_head = IOU_READ(ring_cast, ctx, cached_sq_head);
	r.cq_tail = IOU_READ(ring_cast, ctx, cached_cq_tail);
	r.sq_entries = IOU_READ(ring_cast, ctx, sq_entries);
	r.cq_entries = IOU_READ(ring_cast, ctx, cq_entries);
	r.sq_tid = -1;
	r.sq_cpu = -1;
	r.jiffies = bpf_jiffies64();
	__u64 *born = bpf_map_lookup_elem(&ring_births, &r.ctx);
	if (born)
		r.born_ns = *born;
	struct iou_ring_work *work = ring_work_kept ? bpf_map_lookup_elem(&ring_work, &r.ctx) : 0;
	if (work)
		r.probe_sqes = work->sqes;

	struct io_sq_data *sqd = IOU_READ(ring_cast, ctx, sq_data);
	r.sqd = (__u64)sqd;
	if (has_sqd_thread_idle())
		r.caps |= IOU_CAP_IDLE_IN_SQD;
	/* A ring without an SQ thread has no idle setting, backlog or thread to read. */
	if (sqd)
		read_sq_side(ctx, sqd, &r);
	__sync_fetch_and_add(&stats.iter_rings, 1);
	bpf_seq_write(it->meta->seq, &r, sizeof(r));
	return 0;
}
