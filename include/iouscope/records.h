/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records shared between the BPF programs (bpf/iouscope.bpf.c) and the daemon.
 *
 * Every field is fixed-width and every struct is padded by hand, so the layout is the same for
 * clang -target bpf and for g++ on x86_64/arm64. The size assertions at the end are compiled on
 * both sides: a change here that moves a field breaks the build, not the data.
 */
#ifndef IOUSCOPE_RECORDS_H
#define IOUSCOPE_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define IOU_COMM_LEN 16
/* Wake-latency histogram: bucket i counts latencies in [2^i, 2^(i+1)) ns; the last one is open. */
#define IOU_LAT_BUCKETS 34
/* Bounds of the BPF maps; overflow is counted in iou_stats, never silent. */
#define IOU_MAX_SQ_THREADS 4096
#define IOU_MAX_WAKERS 8192
#define IOU_MAX_CREATED 16384
#define IOU_MAX_RINGS 16384
#define IOU_MAX_DEVICES 256
/* Entry-to-exit state of deep-tier calls in flight: one per thread inside a probed call. */
#define IOU_MAX_INFLIGHT 8192
/*
 * Work-gap histogram (deep tier): bucket 0 holds gaps under 64 ns; bucket i >= 1 covers
 * [2^m + s * 2^(m-2), 2^m + (s+1) * 2^(m-2)) ns with m = 6 + (i-1)/4 and s = (i-1)%4, i.e. four
 * sub-buckets per power of two (at most 25 % wide), so idle-time predictions interpolate within
 * a quarter octave. The last bucket is open; 2^41 ns is about 37 minutes.
 */
#define IOU_GAP_BUCKETS 142

/* Units of iou_ring_record.sq_thread_idle. */
enum iou_idle_unit {
	IOU_IDLE_JIFFIES = 0, /* upstream: msecs_to_jiffies(sq_thread_idle) */
	IOU_IDLE_NS = 1,      /* seeds' IORING_SETUP_IDLE_NS patch with sqd->idle_mode set */
};

/* Bits of iou_ring_record.caps: what this kernel let the iterator read. */
enum iou_ring_caps {
	IOU_CAP_SQ_THREAD = 1 << 0,  /* sq_data->thread was readable (SQPOLL ring, thread alive) */
	IOU_CAP_SQ_CPU = 1 << 1,     /* io_sq_data.sq_cpu exists (5.12+) */
	IOU_CAP_WORK_TIME = 1 << 2,  /* io_sq_data.work_time exists and is being updated (6.9+) */
	IOU_CAP_SQ_TAIL = 1 << 3,    /* ctx->rings->sq.tail was readable */
	IOU_CAP_RUNNING = 1 << 4,    /* sq_running_ns was computed: the thread is on a CPU and has
	                              * switched in since iouscope attached */
	IOU_CAP_IDLE_IN_SQD = 1 << 5, /* io_sq_data holds sq_thread_idle (5.11+): the loop spins
	                              * for the idle time after its last work, not its last wakeup */
	IOU_CAP_SQD_PERCPU = 1 << 6,  /* the sqd is its CPU's shared one (seeds patch 000,
	                              * IORING_SETUP_SQPOLL_PERCPU): its thread serves rings of any
	                              * process, and belongs to none of them but its creator */
};

/*
 * The IORING_SETUP_* bits of setup_flags that iouscope reads (uapi, so stable), defined once
 * for both sides: vmlinux.h has no macros, and the C++ side does not need liburing for three bits.
 */
#define IOU_SETUP_IOPOLL (1U << 0)
#define IOU_SETUP_SQPOLL (1U << 1)
#define IOU_SETUP_SQ_AFF (1U << 2)
#define IOU_SETUP_COOP_TASKRUN (1U << 8)   /* 5.19 */
#define IOU_SETUP_DEFER_TASKRUN (1U << 13) /* 6.1 */

/*
 * One io_uring file seen by the task_file iterator. The iterator writes these back to back into
 * its seq_file; userspace reads them as a flat array.
 */
struct iou_ring_record {
	__u64 ctx;                  /* address of the io_ring_ctx: the ring's identity while it lives */
	__u64 sqd;                  /* address of its io_sq_data, 0 without SQPOLL */
	__u32 pid;                  /* tgid of the process holding the fd */
	__u32 fd;                   /* fd number in that process */
	__u32 setup_flags;          /* ctx->flags: IORING_SETUP_* */
	__u32 caps;                 /* enum iou_ring_caps */
	__u32 sq_head;              /* ctx->cached_sq_head: SQEs consumed, wraps at 2^32 */
	__u32 sq_tail;              /* ctx->rings->sq.tail: SQEs published by the application; read
	                             * (IOU_CAP_SQ_TAIL) only where an SQ thread consumes them */
	__u32 cq_tail;              /* ctx->cached_cq_tail: CQEs posted, wraps at 2^32 */
	__u32 sq_entries;           /* ctx->sq_entries */
	__s32 sq_tid;               /* SQ thread tid, -1 without one */
	__s32 sq_cpu;               /* sqd->sq_cpu: CPU the thread is pinned to, -1 if not pinned */
	__u64 sq_thread_idle;       /* raw idle setting, in sq_idle_unit */
	__u32 sq_idle_unit;         /* enum iou_idle_unit */
	__u32 cq_entries;           /* ctx->cq_entries */
	__u64 jiffies;              /* bpf_jiffies64() at the walk: lets userspace measure HZ */
	__u64 work_time_us;         /* sqd->work_time in microseconds, valid with IOU_CAP_WORK_TIME */
	__u64 sq_runtime_ns;        /* SQ thread's se.sum_exec_runtime */
	__u64 sq_running_ns;        /* with IOU_CAP_RUNNING: what the thread has run since the
	                             * scheduler last added to sum_exec_runtime, as the kernel's
	                             * task_sched_runtime() adds it. A thread alone on a nohz_full
	                             * CPU gets that update once a second only (the remote tick) */
	__u64 sq_nvcsw;             /* SQ thread's voluntary context switches */
	__u64 sq_nivcsw;            /* SQ thread's involuntary context switches */
	__u32 sq_state;             /* SQ thread's __state (TASK_* bits); 0 = running */
	__u32 _pad0;                /* keeps comm 8-byte aligned on every ABI */
	char comm[IOU_COMM_LEN];    /* comm of the process's group leader */
	__u64 born_ns;              /* bpf_ktime_get_ns() when io_uring_create announced this ctx
	                             * (ring_births map); 0 for a ring created before iouscope
	                             * attached. With ctx, the ring's identity: a freed ctx's address
	                             * is soon reused by the next ring */
	__u64 sq_start_ns;          /* SQ thread's start_time: with sq_tid, the thread's identity */
	__u32 sq_tgid;              /* SQ thread's own tgid (its process, not the ring's holder) */
	__u32 _pad2;
	char sq_comm[IOU_COMM_LEN]; /* comm of the SQ thread's group leader */
	__u64 read_ns;              /* bpf_ktime_get_ns() when the SQ thread's fields were read (the
	                             * instant sq_running_ns describes); without an SQ thread, when
	                             * the walk reached the holding task, a clock read per task
	                             * rather than per ring */
	__u64 probe_sqes;           /* deep tier: iou_ring_work.sqes of this ring, read in the same
	                             * instant as sq_head, so the two can be compared exactly */
	__u64 sq_oncpu_ns;          /* with IOU_CAP_RUNNING: bpf_ktime_get_ns() of the SQ thread's
	                             * switch-in. Its CPU time grows with the clock from there, so
	                             * userspace can give it at the sample's instant rather than at
	                             * read_ns, which a walk split over several read()s delays */
	__u64 cgroup_id;            /* cgroup v2 id of the fd holder (the kernfs node id of its
	                             * default-hierarchy cgroup, as bpf_get_current_cgroup_id()
	                             * gives it; the v2 root's on a cgroup v1-only host) */
	__u64 sq_cgroup_id;         /* the SQ thread's own, 0 without one: a thread can be moved
	                             * apart from its process */
};

/*
 * Values keyed by an SQ thread's tid start with the owning thread's start_time. A tid is reused
 * once its thread exits, so a BPF program that finds another thread's start_time there resets
 * the entry before counting (thread_entry()), and userspace ignores entries whose start_time is
 * not the live thread's.
 */

/* Per SQ thread scheduler state, keyed by tid; written only by the sched tracepoints. */
struct iou_sched_state {
	__u64 owner_start_ns;       /* start_time of the thread these counts belong to */
	__u64 sleeps;               /* idle sleeps: voluntary switch-outs in TASK_INTERRUPTIBLE, the
	                             * state of the SQPOLL loop's own schedule() after its idle time */
	__u64 wakeups;              /* sched_waking events for the thread (one per wakeup) */
	__u64 sleep_ns;             /* completed time in idle sleeps: switch-out until wakeup, or
	                             * until back on a CPU when no wakeup was traced */
	__u64 sleep_start_ns;       /* bpf_ktime_get_ns() of the current sleep or block, 0 while
	                             * awake; blocked says which */
	__u64 blocks;               /* other voluntary switch-outs: uninterruptible waits (sqd->lock,
	                             * parking, I/O inside a submission), TASK_PARKED (5.10) */
	__u64 block_ns;             /* completed time blocked: switch-out until wakeup */
	__u32 blocked;              /* 1 while the current sleep_start_ns is a block */
	__u32 _pad;
	__u64 oncpu_mono_ns;        /* bpf_ktime_get_ns() when the thread last got a CPU, 0 while it
	                             * is off one: with oncpu_runtime_ns, its CPU time right now */
	__u64 oncpu_runtime_ns;     /* se.sum_exec_runtime at that moment */
	__u64 wake_ts_ns;           /* time of a wakeup not yet followed by getting a CPU, else 0 */
	__u64 lat_count;            /* wake latencies recorded */
	__u64 lat_sum_ns;           /* sum of wake latencies */
	__u64 lat_hist[IOU_LAT_BUCKETS]; /* log2 histogram of wake latency, see IOU_LAT_BUCKETS */
	__u64 oncpu_switches;       /* the thread's nvcsw + nivcsw when it last got a CPU: while they
	                             * still match, oncpu_mono_ns is that stretch on the CPU even if
	                             * the sched programs were detached since (the scheduler gate) */
};

/* Who woke an SQ thread. */
enum iou_waker_context {
	IOU_WAKER_TASK = 0,         /* a task: waker_pid is its tgid */
	IOU_WAKER_IRQ = 1,          /* an interrupt: a handler (a timer, a device's completion) or a
	                             * softirq served on its way out; waker_pid is 0, the task it
	                             * interrupted is not the waker */
};

struct iou_waker_key {
	__u32 sq_tid;               /* the SQ thread that was woken */
	__u32 waker_pid;            /* tgid of the task that was running the wakeup, 0 in interrupts */
	__u32 context;              /* enum iou_waker_context */
	__u32 _pad;
};

struct iou_waker_val {
	__u64 sq_start_ns;          /* start_time of the SQ thread sq_tid names (see above) */
	__u64 count;                /* wakeups of sq_tid done by waker_pid */
	char comm[IOU_COMM_LEN];    /* comm of the waking thread, last seen */
};

/*
 * A ring announced by the io_uring_create tracepoint, kept until userspace drains it. Keyed by
 * address and creation time: under churn the next ring often gets the same address before
 * userspace drains the map, and a ctx key alone would overwrite the first record.
 */
struct iou_created_key {
	__u64 ctx;                  /* io_ring_ctx address */
	__u64 ts_ns;                /* bpf_ktime_get_ns() at creation */
};

struct iou_created_ring {
	__u64 ctx;                  /* io_ring_ctx address, same identity as iou_ring_record.ctx */
	__u64 ts_ns;                /* bpf_ktime_get_ns() at creation */
	__u32 pid;                  /* tgid of the creator */
	__u32 fd;                   /* fd returned to it */
	__u32 setup_flags;          /* IORING_SETUP_* */
	__u32 sq_entries;           /* SQ size */
	char comm[IOU_COMM_LEN];    /* comm of the creating thread */
};

/*
 * Deep tier (fentry/fexit or kprobe/kretprobe; opt-in, per batch or per request).
 */

/* SQ thread time spent submitting for one ring, keyed by io_ring_ctx address. */
struct iou_ring_work {
	__u64 submit_ns;            /* time in io_submit_sqes called by the SQ thread */
	__u64 batches;              /* io_submit_sqes calls by the SQ thread */
	__u64 sqes;                 /* SQEs those calls submitted */
	__u64 turn_ns;              /* on-CPU time of the ring's turns in busy loop passes, see
	                             * iou_sq_passes; 0 where the pass probe is off */
};

/*
 * Gaps between consecutive SQEs submitted by one SQ thread, keyed by its tid. The gaps tile the
 * thread's timeline, so for any idle setting T the thread would have spent sum(min(gap, T)) on
 * the CPU and slept once per gap longer than T: this is what `iouscope advise` predicts from.
 */
struct iou_work_gaps {
	__u64 owner_start_ns;       /* start_time of the thread these gaps belong to */
	__u64 last_work_ns;         /* bpf_ktime_get_ns() of the thread's latest SQE */
	__u64 sleep_spins;          /* sleeps that followed a known last SQE */
	__u64 sleep_spin_ns;        /* sum of last SQE -> sleep: the idle spin actually done */
	__u64 count[IOU_GAP_BUCKETS]; /* gaps per bucket, see IOU_GAP_BUCKETS */
	__u64 sum_ns[IOU_GAP_BUCKETS]; /* sum of those gaps, ns */
};

/*
 * One SQ thread's loop passes (deep tier; kernels where io_sq_tw, called once at the end of every
 * pass, can be hooked: 6.9+). A pass is busy when it served a ring (submitted or polled) or ran
 * task work. work_ns brackets a pass the way the kernel's sqd->work_time does (from the first
 * ring with work to the end of the pass's task work) but on the monotonic clock and without the
 * kernel's tick granularity; time the thread spent switched out inside a bracket is left out, as
 * the kernel's CPU time leaves it out. The bracket is cut into turns: a ring's turn runs from the
 * start of its work (io_submit_sqes or io_do_iopoll) to the start of the next ring's, the last
 * one to the start of the pass's task work (io_sq_tw), which runs every ring's completions and
 * is the thread's own (task_work_ns): the rings' turn_ns and task_work_ns add up to work_ns.
 */
struct iou_sq_passes {
	__u64 owner_start_ns;       /* start_time of the thread these passes belong to */
	__u64 passes;               /* loop passes */
	__u64 busy_passes;          /* passes that served a ring or ran task work */
	__u64 work_ns;              /* on-CPU time of the passes that served a ring */
	__u64 start_ns;             /* internal: start of the current pass's ring work, 0 if none */
	__u64 off_cpu_ns;           /* internal: when the thread was switched out inside a bracket */
	__u64 turn_ctx;             /* internal: ring whose turn it is (io_ring_ctx address) */
	__u64 turn_start_ns;        /* internal: start of that turn */
	__u64 task_work_ns;         /* on-CPU time in io_sq_tw of passes that ran task work: the
	                             * completions of every ring the thread serves, no ring's own */
	__u64 tw_start_ns;          /* internal: entry of the io_sq_tw call in progress, 0 if none */
};

enum iou_caller {
	IOU_CALLER_APP = 0,         /* the application, in io_uring_enter */
	IOU_CALLER_SQ_THREAD = 1,   /* the ring's SQ thread */
};

struct iou_iopoll_key {
	__u64 ctx;                  /* io_ring_ctx address */
	__u32 caller;               /* enum iou_caller */
	__u32 _pad;
};

/* io_do_iopoll calls per ring and caller. */
struct iou_iopoll_stats {
	__u64 calls;                /* io_do_iopoll invocations */
	__u64 empty;                /* invocations that reaped nothing: spinning */
	__u64 completions;          /* completions reaped */
	__u64 ns;                   /* time inside io_do_iopoll */
};

#define IOU_DISK_NAME_LEN 32
struct iou_dev_key {
	char disk[IOU_DISK_NAME_LEN]; /* gendisk name of the NVMe namespace, e.g. "nvme0n1" */
};

/* NVMe passthrough (uring_cmd) completions per namespace. */
struct iou_nvme_stats {
	__u64 polled;               /* completions of requests on a poll queue */
	__u64 irq;                  /* completions of requests on an interrupt-driven queue */
	__u64 polled_intent_irq;    /* asked to be polled (REQ_POLLED) but queued where IRQs finish it */
	__u64 polls;                /* nvme_ns_chr_uring_cmd_iopoll calls for this namespace */
	__u64 lat_count;            /* completions with a known start time */
	__u64 lat_sum_ns;           /* sum of their latencies */
	__u64 lat_hist[IOU_LAT_BUCKETS]; /* log2 histogram of request start to end_io, ns */
	__u64 cqes;                 /* completions handed to io_uring (io_uring_cmd_done) */
	__u64 cqe_delay_sum_ns;     /* sum of end_io -> io_uring_cmd_done */
	__u64 cqe_delay_hist[IOU_LAT_BUCKETS]; /* log2 histogram of end_io -> io_uring_cmd_done, ns:
	                             * the task-work hop a completion takes before its CQE */
};

/* An NVMe passthrough command between its end_io and io_uring_cmd_done (deep tier). */
struct iou_cmd_pending {
	__u64 end_io_ns;            /* bpf_ktime_get_ns() at end_io */
	struct iou_dev_key dev;     /* the namespace it completed on */
};

/* Global counters, in the .data.shared section every BPF object shares (bpf/common.bpf.h);
 * only rare paths touch them. */
struct iou_stats {
	__u64 rings_created;        /* io_uring_create events */
	__u64 created_dropped;      /* created rings not recorded because the map was full */
	__u64 sched_dropped;        /* SQ threads not tracked because the map was full */
	__u64 wakers_dropped;       /* waker pairs not recorded because the map was full */
	__u64 iter_rings;           /* rings emitted by the last iterator walk(s), cumulative */
	__u64 sq_threads_started;   /* io_sq_thread entries seen (deep tier) */
	__u64 deep_dropped;         /* deep-tier records lost to full maps */
	__u64 births_dropped;       /* rings whose birth was not recorded because the map was full */
	__u64 inflight_dropped;     /* entry probes whose exit could not be paired: map full */
};

#ifdef __cplusplus
#define IOU_ASSERT_SIZE(type, size) static_assert(sizeof(struct type) == (size), #type " layout")
#else
#define IOU_ASSERT_SIZE(type, size) _Static_assert(sizeof(struct type) == (size), #type " layout")
#endif
IOU_ASSERT_SIZE(iou_ring_record, 224);
IOU_ASSERT_SIZE(iou_sched_state, 112 + 8 * IOU_LAT_BUCKETS);
IOU_ASSERT_SIZE(iou_waker_key, 16);
IOU_ASSERT_SIZE(iou_waker_val, 32);
IOU_ASSERT_SIZE(iou_created_ring, 48);
IOU_ASSERT_SIZE(iou_created_key, 16);
IOU_ASSERT_SIZE(iou_stats, 72);
IOU_ASSERT_SIZE(iou_ring_work, 32);
IOU_ASSERT_SIZE(iou_work_gaps, 32 + 16 * IOU_GAP_BUCKETS);
IOU_ASSERT_SIZE(iou_sq_passes, 80);
IOU_ASSERT_SIZE(iou_iopoll_key, 16);
IOU_ASSERT_SIZE(iou_iopoll_stats, 32);
IOU_ASSERT_SIZE(iou_dev_key, 32);
IOU_ASSERT_SIZE(iou_nvme_stats, 64 + 16 * IOU_LAT_BUCKETS);
IOU_ASSERT_SIZE(iou_cmd_pending, 40);

#endif /* IOUSCOPE_RECORDS_H */
