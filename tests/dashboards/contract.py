"""The metric contract the dashboards and rules are written against.

CATALOGUE is every family the daemon declares (exporters/metric_catalog.cpp), read from
`iouscoped --metrics`: name, type and labels come from that one declaration. DEEP names the
deep tier's families with the probes that feed them; BASE is the rest. The live test checks
dashboards against the running daemon's /metrics and uses these tables only for metrics the
daemon cannot show on this kernel (DEEP, when its probes are not attached) and for the static
checks that run without a daemon.

DEEP also says which probes (iouscope_probe_attached{probe}) feed each metric: a query over
a deep metric is skipped, with that reason, only when the metric is absent from the live
exposition and none of its probes is attached.

Queries may also name series that are not the daemon's: PROMETHEUS_SERIES, which Prometheus
adds for every target, and KUBE_STATE_METRICS_SERIES, which the dashboards join to for
Kubernetes names.
"""

import os
import subprocess

_BUILD = os.environ.get("IOUSCOPE_BUILD",
                        os.path.join(os.path.dirname(__file__), "..", "..", "build"))


def load_catalogue(daemon=os.path.join(_BUILD, "iouscoped")):
    """name -> (type, labels, help) from `iouscoped --metrics` (tab-separated lines)."""
    try:
        out = subprocess.run([daemon, "--metrics"], capture_output=True, text=True, check=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"contract: cannot read the metric catalogue from {daemon} --metrics "
                         f"({e}); build the project first (scripts/dev build)")
    cat = {}
    for line in out.splitlines():
        name, typ, labels, help_text = line.split("\t", 3)
        cat[name] = (typ, set(filter(None, labels.split(","))), help_text)
    return cat


CATALOGUE = load_catalogue()

# The deep tier's families and the probes that feed them (iouscope_probe_attached{probe}):
# all this table adds to the catalogue, whose type and labels DEEP takes.
DEEP_PROBES = {
    "iouscope_sqthread_task_work_seconds_total": ("loop_passes",),
    "iouscope_sqthread_loop_passes_total": ("loop_passes",),
    "iouscope_sqthread_busy_loop_passes_total": ("loop_passes",),
    "iouscope_sqthread_pass_work_seconds_total": ("loop_passes",),
    "iouscope_probe_coverage_ratio": ("io_submit_sqes",),
    "iouscope_probe_coverage_sqes_total": ("io_submit_sqes",),
    "iouscope_ring_sqthread_work_seconds_total": ("io_submit_sqes",),
    "iouscope_ring_sqthread_submit_seconds_total": ("io_submit_sqes",),
    "iouscope_ring_sqthread_batches_total": ("io_submit_sqes",),
    "iouscope_iopoll_calls_total": ("io_do_iopoll",),
    "iouscope_iopoll_empty_total": ("io_do_iopoll",),
    "iouscope_iopoll_completions_total": ("io_do_iopoll",),
    "iouscope_iopoll_seconds_total": ("io_do_iopoll",),
    "iouscope_iopoll_host_calls_total": ("io_do_iopoll",),
    "iouscope_iopoll_host_empty_total": ("io_do_iopoll",),
    "iouscope_iopoll_host_completions_total": ("io_do_iopoll",),
    "iouscope_nvme_uring_cmd_completions_total": ("nvme_uring_cmd_end_io",),
    "iouscope_nvme_uring_cmd_latency_seconds": ("nvme_uring_cmd_end_io",),
    "iouscope_nvme_uring_cmd_polled_irq_total": ("nvme_uring_cmd_end_io",),
    "iouscope_device_iopoll_without_poll_queues": ("nvme_uring_cmd_end_io",),
    "iouscope_nvme_uring_cmd_polls_total": ("nvme_uring_cmd_iopoll",),
    "iouscope_nvme_uring_cmd_cqes_total": ("io_uring_cmd_done",),
    "iouscope_nvme_uring_cmd_cqe_delay_seconds": ("io_uring_cmd_done",),
}
# name: (type, labels, probes that feed it)
DEEP = {n: (CATALOGUE[n][0], CATALOGUE[n][1], p) for n, p in DEEP_PROBES.items()
        if n in CATALOGUE}
BASE = {n: (typ, labels) for n, (typ, labels, _h) in CATALOGUE.items() if n not in DEEP}


def check_catalogue():
    """DEEP_PROBES names the daemon does not declare, as sentences."""
    return [f"{n} is in DEEP_PROBES but the daemon does not declare it"
            for n in DEEP_PROBES if n not in CATALOGUE]


# Series Prometheus itself adds for every target.
TARGET_LABELS = {"instance", "job"}
PROMETHEUS_SERIES = {
    "up": ("gauge", set()),
    "scrape_duration_seconds": ("gauge", set()),
    "scrape_samples_scraped": ("gauge", set()),
    "scrape_samples_post_metric_relabeling": ("gauge", set()),
    "scrape_series_added": ("gauge", set()),
}


# kube-state-metrics' series that the dashboards join to for Kubernetes names: container_id and
# uid (the pod UID) match iouscope_process_info's container_id and pod_uid. They are not the
# daemon's, so only a Prometheus that also scrapes kube-state-metrics has them; a panel over
# them is empty elsewhere. Labels as kube-state-metrics v2 exports them.
KUBE_STATE_METRICS_SERIES = {
    "kube_pod_container_info": ("gauge", {"namespace", "pod", "uid", "container", "container_id",
                                          "image", "image_id", "image_spec"}),
    "kube_pod_info": ("gauge", {"namespace", "pod", "uid", "node", "host_ip", "pod_ip",
                                "created_by_kind", "created_by_name", "priority_class",
                                "host_network"}),
}


def deep_family(sample_name):
    """The DEEP family a sample name belongs to (histogram suffixes included), or None."""
    if sample_name in DEEP:
        return sample_name
    for suffix in ("_bucket", "_sum", "_count"):
        if sample_name.endswith(suffix) and sample_name[: -len(suffix)] in DEEP:
            return sample_name[: -len(suffix)]
    return None
