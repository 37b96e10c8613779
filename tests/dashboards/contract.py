"""The metric contract the dashboards and rules are written against.

BASE is docs/ARCHITECTURE.md's "Metric contract" (plus its "Also exported" list); DEEP is the
deep probe tier's fixed contract (issue 6). The live test checks dashboards against the running
daemon's /metrics and uses these tables only for metrics the daemon cannot show on this kernel
(DEEP, when its probes are not attached) and for the static checks that run without a daemon.

DEEP also says which probes (uringscope_probe_attached{probe}) feed each metric: a query over
a deep metric is skipped, with that reason, only when the metric is absent from the live
exposition and none of its probes is attached.
"""

THREAD = {"sq_thread", "pid", "comm"}
RING = {"ring", "pid", "comm", "mode", "sq_thread"}
IOPOLL = {"ring", "pid", "comm", "caller"}

# name: (type, labels)
BASE = {
    "uringscope_sqthread_cpu_seconds_total": ("counter", THREAD),
    "uringscope_sqthread_work_seconds_total": ("counter", THREAD),
    "uringscope_sqthread_spin_seconds_total": ("counter", THREAD),
    "uringscope_sqthread_sleep_seconds_total": ("counter", THREAD),
    "uringscope_sqthread_sleeps_total": ("counter", THREAD),
    "uringscope_sqthread_wakeups_total": ("counter", THREAD),
    "uringscope_sqthread_wakeup_latency_seconds": ("histogram", THREAD),
    "uringscope_sqthread_rings": ("gauge", THREAD),
    "uringscope_sqthread_fairness": ("gauge", THREAD),
    "uringscope_sqthread_idle_setting_seconds": ("gauge", THREAD),
    "uringscope_ring_sqes_total": ("counter", RING),
    "uringscope_ring_cqes_total": ("counter", RING),
    "uringscope_ring_sq_backlog": ("gauge", RING),
    "uringscope_ring_sqthread_share": ("gauge", RING),
    "uringscope_probe_attached": ("gauge", {"probe", "kind"}),
    # "Also exported"
    "uringscope_sqthread_work_time_source": ("gauge", THREAD | {"source"}),
    "uringscope_sqthread_voluntary_switches_total": ("counter", THREAD),
    "uringscope_sqthread_involuntary_switches_total": ("counter", THREAD),
    "uringscope_sqthread_wakeups_by_waker_total": ("counter",
                                                   THREAD | {"waker_pid", "waker_comm",
                                                             "waker_context"}),
    "uringscope_sqthread_blocks_total": ("counter", THREAD),
    "uringscope_sqthread_work_by_source_seconds_total": ("counter", THREAD | {"source"}),
    "uringscope_sqthread_blocked_seconds_total": ("counter", THREAD),
    "uringscope_sqthread_spin_model": ("gauge", THREAD | {"model"}),
    "uringscope_sqthread_sq_cpu": ("gauge", THREAD | {"pinned"}),
    "uringscope_sqthread_running": ("gauge", THREAD),
    "uringscope_ring_sq_entries": ("gauge", RING),
    "uringscope_rings": ("gauge", {"mode"}),
    "uringscope_rings_created_total": ("counter", {"mode"}),
    "uringscope_rings_short_lived_total": ("counter", {"mode"}),
    "uringscope_map_overflow_total": ("counter", {"map"}),
    "uringscope_map_entries": ("gauge", {"map"}),
    "uringscope_ring_start_time_seconds": ("gauge", RING),
    "uringscope_sqthread_start_time_seconds": ("gauge", THREAD),
    "uringscope_identities_replaced_total": ("counter", {"kind"}),
    "uringscope_walks_incomplete_total": ("counter", set()),
    "uringscope_probe_missed_total": ("counter", {"probe", "kind"}),
    "uringscope_probe_waiting": ("gauge", {"probe", "kind"}),
    "uringscope_samples_total": ("counter", set()),
    "uringscope_sample_duration_seconds": ("gauge", set()),
    "uringscope_last_sample_timestamp_seconds": ("gauge", set()),
    "uringscope_build_info": ("gauge", {"version"}),
}

# name: (type, labels, probes that feed it)
DEEP = {
    "uringscope_sqthread_task_work_seconds_total": ("counter", THREAD, ("loop_passes",)),
    "uringscope_probe_coverage_ratio": ("gauge", {"probe"}, ("io_submit_sqes",)),
    "uringscope_probe_coverage_sqes_total": ("counter", {"probe", "seen_by"}, ("io_submit_sqes",)),
    "uringscope_ring_sqthread_work_seconds_total": ("counter", RING, ("io_submit_sqes",)),
    "uringscope_iopoll_calls_total": ("counter", IOPOLL, ("io_do_iopoll",)),
    "uringscope_iopoll_empty_total": ("counter", IOPOLL, ("io_do_iopoll",)),
    "uringscope_iopoll_completions_total": ("counter", IOPOLL, ("io_do_iopoll",)),
    "uringscope_iopoll_seconds_total": ("counter", IOPOLL, ("io_do_iopoll",)),
    "uringscope_nvme_uring_cmd_completions_total": ("counter", {"device", "polled"},
                                                    ("nvme_uring_cmd_end_io",)),
    "uringscope_nvme_uring_cmd_latency_seconds": ("histogram", {"device"},
                                                  ("nvme_uring_cmd_end_io",)),
    "uringscope_device_iopoll_without_poll_queues": ("gauge", {"device"},
                                                     ("nvme_uring_cmd_end_io",)),
}

# Series Prometheus itself adds for every target.
TARGET_LABELS = {"instance", "job"}
PROMETHEUS_SERIES = {
    "up": ("gauge", set()),
    "scrape_duration_seconds": ("gauge", set()),
    "scrape_samples_scraped": ("gauge", set()),
    "scrape_samples_post_metric_relabeling": ("gauge", set()),
    "scrape_series_added": ("gauge", set()),
}


def deep_family(sample_name):
    """The DEEP family a sample name belongs to (histogram suffixes included), or None."""
    if sample_name in DEEP:
        return sample_name
    for suffix in ("_bucket", "_sum", "_count"):
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in DEEP:
            return sample_name[: -len(suffix)]
    return None
