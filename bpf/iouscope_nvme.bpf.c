// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Deep tier, NVMe passthrough: nvme_core's end_io callbacks (or block_rq_complete matched by
 * their addresses), io_uring_cmd_done (the completion reaching the ring) and the char devices'
 * iopoll. fentry where the kernel allows it, else the tracepoint or kprobes; the programs fire
 * per request. Its maps and switches are its own: no other tier reads them.
 */
#include "common.bpf.h"

/* Set by the loader when the io_uring_cmd_done probe is loaded: see iou_fentry_cmd_done. */
const volatile bool track_cmd_done = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOU_MAX_DEVICES);
	__type(key, struct iou_dev_key);
	__type(value, struct iou_nvme_stats);
} nvme_stats SEC(".maps");

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
		/* Started on another CPU, whose clock may be ahead: then it counts as 0. */
		__u64 lat = now > start ? now - start : 0;
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

