// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * uringscope's default tier: zero cost on the I/O path.
 * - iter/task_file samples counters the kernel already keeps for every io_uring file.
 * - tp_btf sched_switch / sched_wakeup follow SQ threads only; every other task leaves after one
 *   flags test (see is_sq_thread()).
 * - tp_btf io_uring_create notes rings that may live and die between two samples.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "uringscope/records.h"
#include "core_fixes.bpf.h"

#define E2BIG 7

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Identifies io_uring files: io_uring_fops is in neither kallsyms nor BTF, io_uring_poll is. */
extern const void io_uring_poll __ksym __weak;
extern int CONFIG_HZ __kconfig __weak;

struct usc_stats stats = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USC_MAX_SQ_THREADS);
	__type(key, __u32);
	__type(value, struct usc_sched_state);
} sched_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USC_MAX_WAKERS);
	__type(key, struct usc_waker_key);
	__type(value, struct usc_waker_val);
} wakers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USC_MAX_CREATED);
	__type(key, __u64);
	__type(value, struct usc_created_ring);
} created_rings SEC(".maps");

#define TASK_RUNNING 0

static __always_inline struct usc_sched_state *sched_state_get(__u32 tid)
{
	struct usc_sched_state *s = bpf_map_lookup_elem(&sched_state, &tid);

	if (s)
		return s;
	static const struct usc_sched_state zero = {};
	if (bpf_map_update_elem(&sched_state, &tid, &zero, BPF_NOEXIST) == -E2BIG) {
		__sync_fetch_and_add(&stats.sched_dropped, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&sched_state, &tid);
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 b = 0;

	/* Bounded loop: the verifier needs a constant trip count. */
	for (int i = 0; i < USC_LAT_BUCKETS - 1; i++) {
		if (v < 2)
			break;
		v >>= 1;
		b++;
	}
	return b;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(usc_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool prev_sq = is_sq_thread(prev);
	bool next_sq = is_sq_thread(next);

	if (!prev_sq && !next_sq)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	struct usc_sched_state *s;

	if (prev_sq && !preempt && get_task_state(prev) != TASK_RUNNING) {
		s = sched_state_get(BPF_CORE_READ(prev, pid));
		if (s) {
			__sync_fetch_and_add(&s->sleeps, 1);
			s->sleep_start_ns = now;
		}
	}
	if (next_sq) {
		__u32 tid = BPF_CORE_READ(next, pid);
		s = bpf_map_lookup_elem(&sched_state, &tid);
		if (s && s->wake_ts_ns) {
			__u64 lat = now - s->wake_ts_ns;
			__u32 b = log2_bucket(lat);

			s->wake_ts_ns = 0;
			if (b < USC_LAT_BUCKETS)
				__sync_fetch_and_add(&s->lat_hist[b], 1);
			__sync_fetch_and_add(&s->lat_count, 1);
			__sync_fetch_and_add(&s->lat_sum_ns, lat);
		}
	}
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(usc_sched_wakeup, struct task_struct *p)
{
	if (!is_sq_thread(p))
		return 0;

	__u64 now = bpf_ktime_get_ns();
	struct usc_sched_state *s = sched_state_get(BPF_CORE_READ(p, pid));

	if (!s)
		return 0;
	__sync_fetch_and_add(&s->wakeups, 1);
	/* A sleep that began before we attached has no start; only its wakeup is counted. */
	if (s->sleep_start_ns) {
		__sync_fetch_and_add(&s->sleep_ns, now - s->sleep_start_ns);
		s->sleep_start_ns = 0;
	}
	s->wake_ts_ns = now;

	struct usc_waker_key key = {
		.sq_tid = BPF_CORE_READ(p, pid),
		.waker_pid = bpf_get_current_pid_tgid() >> 32,
	};
	struct usc_waker_val *w = bpf_map_lookup_elem(&wakers, &key);
	if (w) {
		__sync_fetch_and_add(&w->count, 1);
		return 0;
	}
	struct usc_waker_val init = { .count = 1 };
	bpf_get_current_comm(init.comm, sizeof(init.comm));
	if (bpf_map_update_elem(&wakers, &key, &init, BPF_NOEXIST) == -E2BIG)
		__sync_fetch_and_add(&stats.wakers_dropped, 1);
	return 0;
}

SEC("tp_btf/io_uring_create")
int BPF_PROG(usc_io_uring_create, int fd, void *ring, __u32 sq_entries, __u32 cq_entries,
	     __u32 flags)
{
	struct usc_created_ring r = {
		.ctx = (__u64)ring,
		.ts_ns = bpf_ktime_get_ns(),
		.pid = bpf_get_current_pid_tgid() >> 32,
		.fd = fd,
		.setup_flags = flags,
		.sq_entries = sq_entries,
	};

	__sync_fetch_and_add(&stats.rings_created, 1);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
	if (bpf_map_update_elem(&created_rings, &r.ctx, &r, BPF_ANY) == -E2BIG)
		__sync_fetch_and_add(&stats.created_dropped, 1);
	return 0;
}

SEC("iter/task_file")
int usc_iter_rings(struct bpf_iter__task_file *it)
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

	struct usc_ring_record r = {};
	r.ctx = (__u64)ctx;
	r.pid = BPF_CORE_READ(task, tgid);
	r.fd = it->fd;
	r.setup_flags = BPF_CORE_READ(ctx, flags);
	r.sq_head = BPF_CORE_READ(ctx, cached_sq_head);
	r.cq_tail = BPF_CORE_READ(ctx, cached_cq_tail);
	r.sq_entries = BPF_CORE_READ(ctx, sq_entries);
	r.sq_tid = -1;
	r.sq_cpu = -1;
	r.hz = CONFIG_HZ;
	BPF_CORE_READ_STR_INTO(&r.comm, task, group_leader, comm);

	struct io_rings *rings = BPF_CORE_READ(ctx, rings);
	if (rings && !bpf_core_read(&r.sq_tail, sizeof(r.sq_tail), &rings->sq.tail))
		r.caps |= USC_CAP_SQ_TAIL;

	struct io_sq_data *sqd = BPF_CORE_READ(ctx, sq_data);
	r.sqd = (__u64)sqd;
	r.sq_thread_idle = get_sq_thread_idle(ctx, sqd, &r.sq_idle_unit);
	if (sqd) {
		struct io_sq_data___v512 *v512 = (void *)sqd;
		if (bpf_core_field_exists(v512->sq_cpu)) {
			r.caps |= USC_CAP_SQ_CPU;
			r.sq_cpu = get_sqd_cpu(sqd);
		}
		if (has_sqd_work_time(sqd)) {
			r.caps |= USC_CAP_WORK_TIME;
			r.work_time_us = get_sqd_work_time_us(sqd);
		}
		struct task_struct *t = BPF_CORE_READ(sqd, thread);
		if (t) {
			r.caps |= USC_CAP_SQ_THREAD;
			r.sq_tid = BPF_CORE_READ(t, pid);
			r.sq_runtime_ns = BPF_CORE_READ(t, se.sum_exec_runtime);
			r.sq_nvcsw = BPF_CORE_READ(t, nvcsw);
			r.sq_nivcsw = BPF_CORE_READ(t, nivcsw);
			r.sq_state = get_task_state(t);
		}
	}
	__sync_fetch_and_add(&stats.iter_rings, 1);
	bpf_seq_write(it->meta->seq, &r, sizeof(r));
	return 0;
}
