/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The request tier's records (bpf/iouscope_req.bpf.c), shared between its BPF object and the
 * daemon. Apart from records.h so that a change here rebuilds only what reads requests.
 *
 * Every field is fixed-width and every struct padded by hand, as in records.h. A ring is named
 * by its io_ring_ctx address and its birth (ring_births, bpf/iouscope.bpf.c): the next ring at
 * a closed ring's address counts under keys of its own from its first request, so no count
 * passes from one ring to the next, and collect/ deletes the keys of rings that are gone.
 */
#ifndef IOUSCOPE_REQUESTS_H
#define IOUSCOPE_REQUESTS_H

#include "iouscope/records.h"

/* Entries of the request maps (--probes.max-requests overrides the in-flight one). */
#define IOU_MAX_REQ_KEYS 8192
#define IOU_MAX_REQ_INFLIGHT 32768

/* How a request reached its completion: the latency histograms are per path. */
enum iou_req_path {
	IOU_PATH_INLINE = 0, /* issued from the submitter (or its task work), never queued */
	IOU_PATH_IOWQ = 1,   /* punted to an io-wq worker (io_uring_queue_async_work) */
	IOU_PATH_POLL = 2,   /* armed for async poll and issued again when ready */
	IOU_REQ_PATHS = 3,
};

/* The result classes of a completion (cqe.res). */
enum iou_req_result {
	IOU_RES_OK = 0,     /* res >= 0 */
	IOU_RES_EAGAIN = 1, /* -EAGAIN */
	IOU_RES_ECANCELED = 2,
	IOU_RES_ETIME = 3,   /* a timeout that expired */
	IOU_RES_ENOBUFS = 4, /* a provided-buffer ring ran dry */
	IOU_RES_OTHER = 5,   /* any other error */
	/*
	 * A request whose final CQE no completion program saw: its io_kiocb was submitted again
	 * while its entry was still in flight. Kernels that trace only CQEs that fit the CQ (6.18
	 * does) post the overflowed ones unseen; the entry goes when the io_kiocb is reused.
	 */
	IOU_RES_UNTRACED = 6,
	IOU_REQ_RESULTS = 7,
};

/* A ring's counts for one opcode and path. */
struct iou_req_key {
	__u64 ctx;     /* io_ring_ctx address */
	__u64 born_ns; /* ring_births[ctx] when counted; 0 for a ring older than iouscope */
	__u32 opcode;  /* IORING_OP_* (the kernel's enum io_uring_op) */
	__u32 path;    /* enum iou_req_path; IOU_PATH_INLINE for the submit-side counts */
};

struct iou_req_stats {
	__u64 submitted;                /* requests submitted (path INLINE keys only) */
	__u64 punted;                   /* io-wq queueings (path INLINE keys only) */
	__u64 punted_forced;            /* of them, of requests with IOSQE_ASYNC (REQ_F_FORCE_ASYNC) */
	__u64 punted_hashed;            /* of them, hashed to their file: run one at a time per file */
	__u64 poll_armed;               /* async poll arms (path INLINE keys only) */
	__u64 completed;                /* final CQEs of requests seen submitted, on this path */
	__u64 latency_sum_ns;           /* submit -> final CQE, summed over `completed` */
	__u64 results[IOU_REQ_RESULTS]; /* completions by enum iou_req_result */
	__u64 latency[IOU_LAT_BUCKETS]; /* log2 buckets of submit -> final CQE, ns */
};

/*
 * The latest request at an io_kiocb address, keyed by it: in flight from its submission to its
 * final CQE, then done (start_ns 0) until the next request at the address writes it again.
 */
struct iou_req_inflight {
	__u64 start_ns; /* bpf_ktime_get_ns() at submission; 0 once done */
	__u64 ctx;
	__u64 born_ns;
	__u32 opcode;
	__u32 path; /* enum iou_req_path, moved on by a punt or a poll arm */
	__u32 fd;   /* the SQE's fd where the kernel keeps it (6.1+), else -1 */
	__u32 _pad;
};

/* CQEs that took a ring's overflow path (io_uring_cqe_overflow, 5.19+), keyed by ctx. */
struct iou_ring_overflow {
	__u64 born_ns; /* the ring these belong to (as iou_req_key.born_ns) */
	__u64 cqes;    /* CQEs that went to the overflow list */
	__u64 dropped; /* CQEs the kernel could not keep (no memory): lost */
};

/* SQEs submitted per io_uring_enter call: bucket 0 holds 0, bucket b holds [2^(b-1), 2^b - 1]. */
#define IOU_ENTER_BUCKETS 16

/*
 * A ring's io_uring_enter calls (syscall tracepoints), keyed as iou_req_key with opcode and path
 * 0: how often the application enters the kernel for it, how many SQEs each call submitted, and
 * how long the calls that waited for completions (IORING_ENTER_GETEVENTS) took.
 */
struct iou_ring_enters {
	__u64 enters;               /* io_uring_enter calls on the ring */
	__u64 sqes;                 /* SQEs they submitted: the sum of their results above 0 */
	__u64 waits;                /* calls with IORING_ENTER_GETEVENTS */
	__u64 wait_ns;              /* time those calls took, entry to exit */
	__u64 per_enter[IOU_ENTER_BUCKETS]; /* calls by SQEs submitted, see IOU_ENTER_BUCKETS */
	/*
	 * Task-work batches that ran in the caller during those waits (io_uring_task_work_run,
	 * 6.0+; io_uring_local_work_run for IORING_SETUP_DEFER_TASKRUN, 6.1+): each is a wake-up of
	 * the waiter to post completions, whether or not enough had come to end the wait.
	 */
	__u64 wait_task_work;
	/*
	 * IPIs task_work_add sent to make the submitter, running, run the task work of a poll
	 * completion of the ring at once (ipi_send_cpu right after io_uring_task_add on one CPU,
	 * 6.6+; TWA_SIGNAL, the notification without IORING_SETUP_COOP_TASKRUN).
	 */
	__u64 task_work_ipis;
	__u64 issuer_switches; /* calls from a thread other than the previous call's */
	__u32 last_tid;        /* the thread of the latest call, 0 before the first */
	__u32 _pad;
};

/* A thread inside io_uring_enter, keyed by its tid. */
struct iou_enter_call {
	__u64 start_ns;
	__u64 ctx;                  /* the ring its fd names */
	__u64 born_ns;
	__u32 flags;                /* IORING_ENTER_* */
	__u32 _pad;
};

/* The request tier's own counters, in its object's .bss. */
struct iou_req_counters {
	__u64 keys_dropped;     /* counts lost: req_stats was full */
	__u64 inflight_dropped; /* requests not timed: req_inflight was full */
	__u64 unmatched;        /* final CQEs of requests not seen submitted */
	__u64 overflow_dropped; /* overflow counts lost: ring_overflow was full */
	__u64 enters_dropped;   /* io_uring_enter calls not counted: a map was full */
	__u64 enters_unnamed;   /* calls through a registered ring fd: no ring to name */
	__u64 iowq_dropped;     /* io-wq worker exits not counted: iowq_exits was full */
};

/* Processes whose io-wq worker exits are counted at once (iowq_exits). */
#define IOU_MAX_IOWQ_PROCS 4096

/*
 * An io-wq worker's account, as IORING_REGISTER_IOWQ_MAX_WORKERS names them: bound (work that
 * blocks briefly, regular files and block devices; limited per io-wq by its CPUs) or unbound
 * (sockets, pipes, anything that may block for long; limited by RLIMIT_NPROC).
 */
enum iou_iowq_kind {
	IOU_IOWQ_BOUND = 0,
	IOU_IOWQ_UNBOUND = 1,
	IOU_IOWQ_KINDS = 2,
};

/*
 * A live io-wq worker (an iou-wrk-<tid> thread), one per record of the worker walk (iter/task,
 * bpf/iouscope_req.bpf.c). Workers are threads of the process whose requests they run.
 */
struct iou_iowq_worker {
	__u64 wq;          /* its io_wq: one per submitting thread (or SQ thread) */
	__u64 start_ns;    /* task start_time: a reused tid is another worker */
	__u64 runtime_ns;  /* se.sum_exec_runtime: CPU time since it started */
	__u64 leader_start_ns; /* its process's (iou_iowq_proc_key) */
	__u64 cgroup_id;   /* its cgroup v2 id */
	__u32 tid;
	__u32 tgid;
	__u32 owner_tid;   /* the io_wq's task, whose requests it runs (iou-wrk-<owner_tid>) */
	__u32 kind;        /* enum iou_iowq_kind */
	__u32 max_workers; /* the kernel's limit for its account in its io_wq */
	__u32 nr_workers;  /* the kernel's count of workers of that account in its io_wq */
	char comm[IOU_COMM_LEN]; /* its process's comm (the group leader's) */
};

/* A process by tgid and its group leader's start_time: a reused pid is another process. */
struct iou_iowq_proc_key {
	__u32 tgid;
	__u32 _pad;
	__u64 leader_start_ns;
};

/*
 * The io-wq workers of a process that exited since iouscope attached, counted by
 * sched_process_exit, so none is missed between two walks (a worker's account cannot be read
 * any more at its exit). The entry goes when the process's last thread exits.
 */
struct iou_iowq_exits {
	__u64 exited;     /* workers that exited */
	__u64 born_since; /* of them, started after iouscope attached */
	__u64 cpu_ns;     /* their CPU time, whole lives */
	char comm[IOU_COMM_LEN]; /* the process's comm at the first exit */
};

#ifdef __cplusplus
#define IOU_REQ_ASSERT_SIZE(type, size) \
	static_assert(sizeof(struct type) == (size), #type " layout")
#else
#define IOU_REQ_ASSERT_SIZE(type, size) \
	_Static_assert(sizeof(struct type) == (size), #type " layout")
#endif
IOU_REQ_ASSERT_SIZE(iou_req_key, 24);
IOU_REQ_ASSERT_SIZE(iou_req_stats, 56 + 8 * IOU_REQ_RESULTS + 8 * IOU_LAT_BUCKETS);
IOU_REQ_ASSERT_SIZE(iou_req_inflight, 40);
IOU_REQ_ASSERT_SIZE(iou_ring_overflow, 24);
IOU_REQ_ASSERT_SIZE(iou_req_counters, 56);
IOU_REQ_ASSERT_SIZE(iou_iowq_worker, 64 + IOU_COMM_LEN);
IOU_REQ_ASSERT_SIZE(iou_iowq_proc_key, 16);
IOU_REQ_ASSERT_SIZE(iou_iowq_exits, 24 + IOU_COMM_LEN);
IOU_REQ_ASSERT_SIZE(iou_ring_enters, 64 + 8 * IOU_ENTER_BUCKETS);
IOU_REQ_ASSERT_SIZE(iou_enter_call, 32);

#endif /* IOUSCOPE_REQUESTS_H */
