// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Request tier: each request from submission to its final CQE, per ring and opcode
 * (include/iouscope/requests.h). Off unless asked for (--probes.requests), because the submit
 * and complete tracepoints fire for every request of every ring on the machine; the cost per
 * request is in docs/BENCHMARKS.md. io_uring_cqe_overflow, which fires only when a ring's CQ
 * is full, is here too but in the default tier: this object loads for it alone without
 * --probes.requests.
 *
 * The tracepoints changed shape several times (argument lists read from each kernel's BTF):
 *   submit:   5.10-5.19 io_uring_submit_sqe(ctx, req, opcode, user_data, flags, nonblock, sq)
 *             6.0-6.3   io_uring_submit_sqe(req, force_nonblock)
 *             6.4+      io_uring_submit_req(req)
 *   complete: 5.10-5.18 (ctx, user_data, res, cflags): no request, so no latency or path there
 *             5.19-6.12 (ctx, req, user_data, res, cflags, extra1, extra2)
 *             6.13+     (ctx, req, cqe)
 *   queue_async_work: 5.10-5.19 (ctx, rw, req, work, flags); 6.0+ (req, rw), (req, hashed) 6.19+;
 *             on every kernel rw and hashed are io_wq_is_hashed(&req->work)
 *   poll_arm: 5.10-5.19 (ctx, req, opcode, user_data, mask, events); 6.0+ (req, mask, events)
 * The loader picks the program that matches the running kernel's prototype (collect/
 * probe_table.cpp, by BTF parameter count). A request is keyed by its io_kiocb address from
 * submission to its final CQE; a ring by its address and birth (ring_births, shared with the
 * default tier), so a ring that reuses a closed one's memory counts apart from its first request.
 */
#include "common.bpf.h"
#include "core_fixes_iowq.bpf.h"
#include "iouscope/requests.h"
#include "ring_births.bpf.h"

#define EAGAIN 11
#define ETIME 62
#define ENOBUFS 105
#define ECANCELED 125
#define IOU_CQE_F_MORE (1U << 1) /* IORING_CQE_F_MORE: a multishot request goes on */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_REQ_KEYS);
	__type(key, struct iou_req_key);
	__type(value, struct iou_req_stats);
} req_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_REQ_INFLIGHT);
	__type(key, __u64);
	__type(value, struct iou_req_inflight);
} req_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_RINGS);
	__type(key, __u64);
	__type(value, struct iou_ring_overflow);
} ring_overflow SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_REQ_KEYS);
	__type(key, struct iou_req_key);
	__type(value, struct iou_ring_enters);
} ring_enters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_INFLIGHT);
	__type(key, __u32);
	__type(value, struct iou_enter_call);
} enter_calls SEC(".maps");

struct iou_req_counters req_counters = {};

/*
 * Set by the loader: requests are timed (a complete program that sees the request is attached),
 * and the REQ_F_* masks read from the kernel's BTF enumerators by name (REQ_F_CQE_SKIP_BIT,
 * REQ_F_FORCE_ASYNC_BIT), 0 where the kernel has no such flag.
 */
const volatile bool time_requests = false;
const volatile __u64 cqe_skip_mask = 0;
const volatile __u64 force_async_mask = 0;

static __always_inline __u64 ring_born(__u64 ctx)
{
	__u64 *born = bpf_map_lookup_elem(&ring_births, &ctx);

	return born ? *born : 0;
}

static __always_inline struct iou_req_stats *stats_of(__u64 ctx, __u64 born, __u32 opcode,
						      __u32 path)
{
	static const struct iou_req_stats zero = {};
	struct iou_req_key key = { .ctx = ctx, .born_ns = born, .opcode = opcode, .path = path };

	return lookup_or_init(&req_stats, &key, &zero, &req_counters.keys_dropped);
}

/*
 * The request whose entry f is ended without a completion we saw: its io_kiocb is being
 * submitted again. That is how a CQE that took the overflow path shows where the kernel traces
 * only CQEs that fit (6.1 and later). Counted on its path as untraced, untimed.
 */
static __always_inline void supersede(struct iou_req_inflight *f)
{
	struct iou_req_stats *s = stats_of(f->ctx, f->born_ns, f->opcode, f->path);

	if (s) {
		__sync_fetch_and_add(&s->completed, 1);
		__sync_fetch_and_add(&s->results[IOU_RES_UNTRACED], 1);
	}
}

/*
 * A submitted request: counted, and where a completion program will see it, noted in flight
 * under its io_kiocb address. A request that asked to post no CQE on success
 * (IOSQE_CQE_SKIP_SUCCESS) is counted only: its completion may never be traced.
 *
 * An entry outlives its request, marked done (start_ns 0) rather than deleted: io_kiocbs come
 * from each ring's cache, so the next request at that address finds its entry and writes it in
 * place, where a delete and an insert per request cost a map lock and a free-list trip each
 * (28 % of the tier's program time on 6.18, bpf_stats). Entries go with their ring
 * (collect/requests.cpp).
 */
static __always_inline void note_submit(__u64 req, __u64 ctx, __u32 opcode, __u64 flags,
					__s32 fd)
{
	__u64 born = ring_born(ctx);
	struct iou_req_stats *s = stats_of(ctx, born, opcode, IOU_PATH_INLINE);

	if (s)
		__sync_fetch_and_add(&s->submitted, 1);
	if (!time_requests || (flags & cqe_skip_mask))
		return;
	struct iou_req_inflight *f = bpf_map_lookup_elem(&req_inflight, &req);

	if (f) {
		if (f->start_ns)
			supersede(f);
		f->ctx = ctx;
		f->born_ns = born;
		f->opcode = opcode;
		f->path = IOU_PATH_INLINE;
		f->fd = (__u32)fd;
		f->start_ns = bpf_ktime_get_ns();
		return;
	}
	struct iou_req_inflight fresh = {
		.start_ns = bpf_ktime_get_ns(),
		.ctx = ctx,
		.born_ns = born,
		.opcode = opcode,
		.path = IOU_PATH_INLINE,
		.fd = (__u32)fd,
	};
	/*
	 * As an int: 6.1 hands the helper's int result back zero-extended (-EEXIST arrived as
	 * 0xffffffef), so a comparison as long never matched there. EEXIST is a racing insert of
	 * the same address, which cannot be this request's: nothing to redo.
	 */
	int err = bpf_map_update_elem(&req_inflight, &req, &fresh, BPF_NOEXIST);

	if (err && err != -EEXIST)
		__sync_fetch_and_add(&req_counters.inflight_dropped, 1);
}

/*
 * The request left the inline path (path): punted to io-wq or armed for poll. hashed: io-wq
 * serializes the work with the rest of its file's hashed work (punts only).
 */
static __always_inline void note_detour(__u64 req, __u64 ctx, __u32 opcode, __u64 flags,
					__u32 path, bool hashed)
{
	struct iou_req_inflight *f = bpf_map_lookup_elem(&req_inflight, &req);
	__u64 born;

	if (f && f->start_ns) {
		f->path = path;
		born = f->born_ns;
	} else {
		born = ring_born(ctx);
	}
	struct iou_req_stats *s = stats_of(ctx, born, opcode, IOU_PATH_INLINE);

	if (!s)
		return;
	if (path == IOU_PATH_POLL) {
		__sync_fetch_and_add(&s->poll_armed, 1);
		return;
	}
	__sync_fetch_and_add(&s->punted, 1);
	if (flags & force_async_mask)
		__sync_fetch_and_add(&s->punted_forced, 1);
	if (hashed)
		__sync_fetch_and_add(&s->punted_hashed, 1);
}

static __always_inline __u32 result_class(__s32 res)
{
	if (res >= 0)
		return IOU_RES_OK;
	switch (-res) {
	case EAGAIN:
		return IOU_RES_EAGAIN;
	case ECANCELED:
		return IOU_RES_ECANCELED;
	case ETIME:
		return IOU_RES_ETIME;
	case ENOBUFS:
		return IOU_RES_ENOBUFS;
	}
	return IOU_RES_OTHER;
}

/* A CQE of request req: the final one closes its time in flight on the path it took. */
static __always_inline void note_complete(__u64 req, __s32 res, __u32 cflags)
{
	if (cflags & IOU_CQE_F_MORE)
		return;
	struct iou_req_inflight *f = bpf_map_lookup_elem(&req_inflight, &req);

	if (!f || !f->start_ns) {
		__sync_fetch_and_add(&req_counters.unmatched, 1);
		return;
	}
	__u64 ns = bpf_ktime_get_ns() - f->start_ns;
	struct iou_req_stats *s = stats_of(f->ctx, f->born_ns, f->opcode, f->path);

	f->start_ns = 0;
	if (!s)
		return;
	__sync_fetch_and_add(&s->completed, 1);
	__sync_fetch_and_add(&s->latency_sum_ns, ns);
	__u32 c = result_class(res);
	if (c < IOU_REQ_RESULTS)
		__sync_fetch_and_add(&s->results[c], 1);
	__u32 b = log2_bucket(ns);
	if (b < IOU_LAT_BUCKETS)
		__sync_fetch_and_add(&s->latency[b], 1);
}

/* --- Submission ------------------------------------------------------------------------------ */

/*
 * 6.4+. The request is a trusted pointer: its fields are plain loads. cqe.fd holds the SQE's fd
 * until the request completes (io_init_req, 6.1+).
 */
SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(iou_req_submit, struct io_kiocb *req)
{
	note_submit((__u64)req, (__u64)req->ctx, req->opcode, req->flags, req->cqe.fd);
	return 0;
}

/* 6.0-6.3: the same request under the old name, with force_nonblock beside it. */
SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(iou_req_submit_sqe, struct io_kiocb *req, bool force_nonblock)
{
	note_submit((__u64)req, (__u64)req->ctx, req->opcode, req->flags, req->cqe.fd);
	return 0;
}

/*
 * 5.10-5.19: the ring and opcode are arguments. Their complete tracepoint has no request before
 * 5.19, so nothing is timed there (time_requests is off) and the flags are not read.
 */
SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(iou_req_submit_sqe_v510, void *ring, void *req, __u8 opcode)
{
	note_submit((__u64)req, (__u64)ring, opcode, 0, -1);
	return 0;
}

/*
 * 6.1+: an SQE the kernel consumed and refused before issuing it (a bad opcode, flag or fd):
 * no submit tracepoint fires for it, yet it is a request of the ring, and its CQE (the error)
 * follows. Rare, so free; absent on 5.10, where such SQEs are not counted.
 */
SEC("tp_btf/io_uring_req_failed")
int BPF_PROG(iou_req_failed, const struct io_uring_sqe *sqe, struct io_kiocb *req, int error)
{
	note_submit((__u64)req, (__u64)req->ctx, req->opcode, req->flags, req->cqe.fd);
	return 0;
}

/* --- Detours: io-wq and async poll ----------------------------------------------------------- */

/* 6.0+: (req, rw) to 6.18, (req, hashed) from 6.19; an int or a bool, zero-extended either way. */
SEC("tp_btf/io_uring_queue_async_work")
int BPF_PROG(iou_req_punt, struct io_kiocb *req, int hashed)
{
	note_detour((__u64)req, (__u64)req->ctx, req->opcode, req->flags, IOU_PATH_IOWQ,
		    hashed != 0);
	return 0;
}

/* 5.10-5.19: (ctx, rw, req, work, flags); the request is untyped, read through probe reads. */
SEC("tp_btf/io_uring_queue_async_work")
int BPF_PROG(iou_req_punt_v510, void *ring, int rw, void *req)
{
	struct io_kiocb *r = req;

	note_detour((__u64)req, (__u64)ring, BPF_CORE_READ(r, opcode), BPF_CORE_READ(r, flags),
		    IOU_PATH_IOWQ, rw != 0);
	return 0;
}

SEC("tp_btf/io_uring_poll_arm")
int BPF_PROG(iou_req_poll_arm, struct io_kiocb *req)
{
	note_detour((__u64)req, (__u64)req->ctx, req->opcode, req->flags, IOU_PATH_POLL, false);
	return 0;
}

SEC("tp_btf/io_uring_poll_arm")
int BPF_PROG(iou_req_poll_arm_v510, void *ring, void *req, __u8 opcode)
{
	note_detour((__u64)req, (__u64)ring, opcode, 0, IOU_PATH_POLL, false);
	return 0;
}

/* --- Completion ------------------------------------------------------------------------------ */

/* 5.19-6.12: (ctx, req, user_data, res, cflags, extra1, extra2); req is NULL for aux CQEs. */
SEC("tp_btf/io_uring_complete")
int BPF_PROG(iou_req_complete_v519, void *ring, void *req, __u64 user_data, int res,
	     unsigned int cflags)
{
	if (req)
		note_complete((__u64)req, res, cflags);
	return 0;
}

/* 6.13+: (ctx, req, cqe), the CQE as posted. */
SEC("tp_btf/io_uring_complete")
int BPF_PROG(iou_req_complete, struct io_ring_ctx *ring, void *req, struct io_uring_cqe *cqe)
{
	if (req)
		note_complete((__u64)req, cqe->res, cqe->flags);
	return 0;
}

/* --- CQ overflow ---------------------------------------------------------------------------- */

/*
 * 5.19+: a CQE that found the CQ full goes to the overflow list (ocqe), or is lost when the
 * kernel cannot allocate one (ocqe NULL). Rare by nature, so it costs nothing until a ring is in
 * trouble. The entry is reset when it belongs to an earlier ring at the same address.
 */
SEC("tp_btf/io_uring_cqe_overflow")
int BPF_PROG(iou_cqe_overflow, void *ring, __u64 user_data, __s32 res, __u32 cflags, void *ocqe)
{
	static const struct iou_ring_overflow zero = {};
	__u64 key = (__u64)ring, born = ring_born(key);
	struct iou_ring_overflow *o =
		lookup_or_init(&ring_overflow, &key, &zero, &req_counters.overflow_dropped);

	if (!o)
		return 0;
	if (o->born_ns != born) {
		struct iou_ring_overflow fresh = { .born_ns = born };

		bpf_map_update_elem(&ring_overflow, &key, &fresh, BPF_EXIST);
		o = bpf_map_lookup_elem(&ring_overflow, &key);
		if (!o)
			return 0;
	}
	__sync_fetch_and_add(&o->cqes, 1);
	if (!ocqe)
		__sync_fetch_and_add(&o->dropped, 1);
	return 0;
}

/* --- io_uring_enter (syscall tracepoints) ---------------------------------------------------- */

#define IOU_ENTER_GETEVENTS (1U << 0)       /* IORING_ENTER_GETEVENTS */
#define IOU_ENTER_REGISTERED_RING (1U << 4) /* IORING_ENTER_REGISTERED_RING, 5.18+ */
#define IOU_ENTER_CALL_SQPOLL (1U << 31)    /* ours, in iou_enter_call.flags: an SQPOLL ring */

/*
 * The ring behind the fd of the current task: files->fdt->fd[fd]->private_data, by probe reads
 * (the task is not a trusted pointer before 5.11). Not checked to be an io_uring file: a call on
 * another fd fails in the kernel, and its entry names no live ring, so the reader deletes it.
 */
static __always_inline __u64 ring_of_fd(int fd)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds = BPF_CORE_READ(fdt, fd);
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	struct file *f = NULL;

	if (fd < 0 || (unsigned int)fd >= max)
		return 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f ? (__u64)BPF_CORE_READ(f, private_data) : 0;
}

/*
 * Runs once per io_uring_enter call of any task (per batch, not per request). A call through a
 * registered ring fd indexes the task's io_uring context, not its files: counted unnamed.
 */
SEC("tracepoint/syscalls/sys_enter_io_uring_enter")
int iou_enter(struct trace_event_raw_sys_enter *args)
{
	__u32 flags = (__u32)args->args[3];

	if (flags & IOU_ENTER_REGISTERED_RING) {
		__sync_fetch_and_add(&req_counters.enters_unnamed, 1);
		return 0;
	}
	__u64 ring = ring_of_fd((int)args->args[0]);

	if (!ring)
		return 0;
	/*
	 * Under SQPOLL the SQ thread submits and the call returns what it was asked to submit, not
	 * what it did: such a call submits nothing of its own (it wakes the thread, or waits).
	 */
	__u32 setup = BPF_CORE_READ((struct io_ring_ctx *)ring, flags);
	struct iou_enter_call c = {
		.start_ns = bpf_ktime_get_ns(),
		.ctx = ring,
		.born_ns = ring_born(ring),
		.flags = flags | (setup & IOU_SETUP_SQPOLL ? IOU_ENTER_CALL_SQPOLL : 0),
	};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (bpf_map_update_elem(&enter_calls, &tid, &c, BPF_ANY))
		__sync_fetch_and_add(&req_counters.enters_dropped, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_io_uring_enter")
int iou_enter_exit(struct trace_event_raw_sys_exit *args)
{
	static const struct iou_ring_enters zero = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iou_enter_call *found = bpf_map_lookup_elem(&enter_calls, &tid);

	if (!found)
		return 0;
	struct iou_enter_call c = *found;

	bpf_map_delete_elem(&enter_calls, &tid);
	struct iou_req_key key = { .ctx = c.ctx, .born_ns = c.born_ns };
	struct iou_ring_enters *e =
		lookup_or_init(&ring_enters, &key, &zero, &req_counters.enters_dropped);

	if (!e)
		return 0;
	long ret = c.flags & IOU_ENTER_CALL_SQPOLL ? 0 : args->ret;
	__u32 b = ret > 0 ? log2_bucket((__u64)ret) + 1 : 0;

	__sync_fetch_and_add(&e->enters, 1);
	/* Racy between two threads of one ring by design: any interleaving counts switches. */
	if (e->last_tid && e->last_tid != tid)
		__sync_fetch_and_add(&e->issuer_switches, 1);
	e->last_tid = tid;
	if (ret > 0)
		__sync_fetch_and_add(&e->sqes, (__u64)ret);
	if (b >= IOU_ENTER_BUCKETS)
		b = IOU_ENTER_BUCKETS - 1;
	__sync_fetch_and_add(&e->per_enter[b], 1);
	if (c.flags & IOU_ENTER_GETEVENTS) {
		__sync_fetch_and_add(&e->waits, 1);
		__sync_fetch_and_add(&e->wait_ns, bpf_ktime_get_ns() - c.start_ns);
	}
	return 0;
}

#include "task_work.bpf.h"

/*
 * io-wq workers (iou-wrk-<tid> threads): the worker walk (iter/task, each sample) reports each
 * live one with its account, limit and CPU time; sched_process_exit counts those that exit, per
 * process, so that a worker born and gone between two walks still counts, and deletes a
 * process's counts when its last thread exits.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_IOWQ_PROCS);
	__type(key, struct iou_iowq_proc_key);
	__type(value, struct iou_iowq_exits);
} iowq_exits SEC(".maps");

/* IO_WORKER_F_BOUND as a mask (core_fixes.bpf.h), set by the loader from the kernel's BTF. */
const volatile __u32 worker_bound_mask = 0;
/* Set by the daemon as it attaches: workers started since were created while it watched. */
volatile __u64 iowq_since_ns = 0;

SEC("iter/task")
int iou_iter_workers(struct bpf_iter__task *it)
{
	struct task_struct *t = it->task;

	/* Every task of the machine passes here: two plain loads for all but io-threads. */
	if (!t || !(t->flags & IOU_PF_IO_WORKER) || (t->flags & IOU_PF_EXITING))
		return 0;
	struct io_worker *w = get_task_io_worker(t);
	if (!w) /* an SQ thread, or a worker on its way out */
		return 0;

	struct iou_worker_acct acct = {};
	get_io_worker_acct(w, worker_bound_mask, &acct);
	/* Apart: inside BPF_CORE_READ, acct.wq would be relocated as a kernel field. */
	struct io_wq *wq = (struct io_wq *)acct.wq;
	struct iou_iowq_worker r = {
		.wq = acct.wq,
		.start_ns = t->start_time,
		.runtime_ns = t->se.sum_exec_runtime,
		.leader_start_ns = BPF_CORE_READ(t, group_leader, start_time),
		.cgroup_id = get_task_cgroup_id(t, false),
		.tid = t->pid,
		.tgid = t->tgid,
		.owner_tid = wq ? BPF_CORE_READ(wq, task, pid) : 0,
		.kind = acct.bound ? IOU_IOWQ_BOUND : IOU_IOWQ_UNBOUND,
		.max_workers = acct.max_workers,
		.nr_workers = acct.nr_workers,
	};
	BPF_CORE_READ_STR_INTO(&r.comm, t, group_leader, comm);
	bpf_seq_write(it->meta->seq, &r, sizeof(r));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(iou_iowq_exit, struct task_struct *p)
{
	struct iou_iowq_proc_key key = {
		.tgid = p->tgid,
		.leader_start_ns = p->group_leader->start_time,
	};

	if (is_exiting_iowq_worker(p)) {
		struct iou_iowq_exits init = {};
		struct iou_iowq_exits *e;

		BPF_CORE_READ_STR_INTO(&init.comm, p, group_leader, comm);
		e = lookup_or_init(&iowq_exits, &key, &init, &req_counters.iowq_dropped);
		if (e) {
			__sync_fetch_and_add(&e->exited, 1);
			if (p->start_time >= iowq_since_ns)
				__sync_fetch_and_add(&e->born_since, 1);
			__sync_fetch_and_add(&e->cpu_ns, p->se.sum_exec_runtime);
		}
	}
	/* The last thread of the group: its counts go with it. */
	if (!p->signal->live.counter)
		bpf_map_delete_elem(&iowq_exits, &key);
	return 0;
}
