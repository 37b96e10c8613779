/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel differences of io-wq, apart from core_fixes.bpf.h (which holds the rest) for only
 * the request tier reads io-wq workers (bpf/iouscope_req.bpf.c). Same rules: each difference
 * names the kernels that have it, uses a ___flavor struct and sits behind a get_* inline.
 */
#ifndef IOUSCOPE_CORE_FIXES_IOWQ_BPF_H
#define IOUSCOPE_CORE_FIXES_IOWQ_BPF_H

#include "core_fixes.bpf.h"

/*
 * io-wq workers (io_uring/io-wq.c), whose layout moved in nearly every release. As the kernels
 * the vm tier boots have them:
 * - the task's pointer to its struct io_worker: pf_io_worker in Debian's 5.10 (the io-thread
 *   backport of 5.12), worker_private from 6.1 on. Cleared before the worker exits.
 * - the worker's account (bound or unbound) and its limit: IO_WORKER_F_BOUND in worker->flags
 *   and the accounts in a per-node struct io_wqe (5.10, 6.1); the accounts in the io_wq itself
 *   and the flags as bit numbers (6.12, the seeds kernel); a pointer to the worker's account
 *   and no IO_WORKER_F_BOUND (6.18, 7.2). The loader reads the flag's encoding from the BTF
 *   enumerators (bound_mask).
 */
#define IOU_COMM_IOU_WRK 0x2d6b72772d756f69ULL /* "iou-wrk-" read as a little-endian u64 */

struct task_struct___pf_io_worker {
	void *pf_io_worker;
} __attribute__((preserve_access_index));

struct io_wqe_acct___iou {
	unsigned int nr_workers;
	unsigned int max_workers;
} __attribute__((preserve_access_index));

struct io_wqe___iou {
	struct io_wqe_acct___iou acct[2];
	struct io_wq *wq;
} __attribute__((preserve_access_index));

struct io_worker___wqe {
	struct io_wqe___iou *wqe;
} __attribute__((preserve_access_index));

static __always_inline struct io_worker *get_task_io_worker(struct task_struct *t)
{
	struct task_struct___pf_io_worker *old = (void *)t;

	if (bpf_core_field_exists(old->pf_io_worker))
		return BPF_CORE_READ(old, pf_io_worker);
	return BPF_CORE_READ(t, worker_private);
}

/*
 * An exiting io-wq worker, whose worker pointer is gone by then: by its comm, and its io-thread
 * flag where the kernel leaves it. Kernels with per-node accounts (5.10, 6.1) clear
 * PF_IO_WORKER in io_worker_exit() before do_exit(), so there the comm alone names it.
 */
static __always_inline bool is_exiting_iowq_worker(struct task_struct *t)
{
	struct io_worker___wqe *old = 0;
	__u64 head = 0;

	if (!(t->flags & IOU_PF_IO_WORKER) && !bpf_core_field_exists(old->wqe))
		return false;
	bpf_probe_read_kernel(&head, sizeof(head), &t->comm[0]);
	return head == IOU_COMM_IOU_WRK;
}

struct iou_worker_acct {
	__u64 wq;
	__u32 bound;
	__u32 max_workers;
	__u32 nr_workers;
};

static __always_inline void read_wq_acct(struct io_wq *wq, bool bound, struct iou_worker_acct *a)
{
	a->wq = (__u64)wq;
	if (bound) {
		bpf_core_read(&a->max_workers, sizeof(a->max_workers), &wq->acct[0].max_workers);
		bpf_core_read(&a->nr_workers, sizeof(a->nr_workers), &wq->acct[0].nr_workers);
	} else {
		bpf_core_read(&a->max_workers, sizeof(a->max_workers), &wq->acct[1].max_workers);
		bpf_core_read(&a->nr_workers, sizeof(a->nr_workers), &wq->acct[1].nr_workers);
	}
}

/* The worker's io_wq and account. bound_mask: IO_WORKER_F_BOUND as a mask, 0 if none. */
static __always_inline void get_io_worker_acct(struct io_worker *w, __u32 bound_mask,
					       struct iou_worker_acct *a)
{
	if (bpf_core_field_exists(w->acct)) {
		struct io_wq *wq = BPF_CORE_READ(w, wq);
		struct io_wq_acct *acct = BPF_CORE_READ(w, acct);

		a->wq = (__u64)wq;
		a->bound = (__u64)acct == (__u64)wq + bpf_core_field_offset(struct io_wq, acct);
		a->max_workers = BPF_CORE_READ(acct, max_workers);
		a->nr_workers = BPF_CORE_READ(acct, nr_workers);
		return;
	}
	/* Bits 0-3 of an unsigned int (6.1) or unsigned long (6.12): the low 4 bytes either way. */
	__u32 flags = 0;
	bpf_core_read(&flags, sizeof(flags), &w->flags);
	bool bound = (flags & bound_mask) != 0;
	struct io_worker___wqe *old = (void *)w;

	if (bpf_core_field_exists(old->wqe)) {
		struct io_wqe___iou *wqe = BPF_CORE_READ(old, wqe);

		a->wq = (__u64)BPF_CORE_READ(wqe, wq);
		a->bound = bound;
		if (bound) {
			bpf_core_read(&a->max_workers, 4, &wqe->acct[0].max_workers);
			bpf_core_read(&a->nr_workers, 4, &wqe->acct[0].nr_workers);
		} else {
			bpf_core_read(&a->max_workers, 4, &wqe->acct[1].max_workers);
			bpf_core_read(&a->nr_workers, 4, &wqe->acct[1].nr_workers);
		}
		return;
	}
	a->bound = bound;
	read_wq_acct(BPF_CORE_READ(w, wq), bound, a);
}

#endif /* IOUSCOPE_CORE_FIXES_IOWQ_BPF_H */
