#pragma once
// What `iouscope advise` and the daemon's advisor report. Plain data, so the snapshot, the
// JSON and Prometheus exporters and the CLI can carry it without knowing how it was derived
// (model/advisor.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace iouscope {

// One measured or predicted quantity, machine-readable: the JSON keeps name, value and unit.
struct Figure {
    std::string name;  // e.g. "cpu_cores", "wakeups_per_second"
    double value = 0;
    std::string unit;  // "cores", "1/s", "s", "ratio", "sqes/s", ...
};

// One point of the sq_thread_idle curve: what the thread would cost with that setting.
struct IdleCurvePoint {
    double setting_seconds = 0;     // the value to pass in io_uring_params.sq_thread_idle
    double effective_seconds = 0;   // mean spin after the last SQE that the kernel then does
    double cpu_cores = 0;           // predicted on-CPU time per second
    double wakeups_per_second = 0;  // predicted sleeps ended by new work
    bool current = false;           // the thread's setting now
    bool recommended = false;
};

// One way to do an SQ thread's work, priced: sq_thread_overpriced lists each for one thread, and
// sq_threads_should_share for its group of threads, as they run ("now") first. Prices are for the
// same SQEs per second as measured.
struct Alternative {
    std::string name;      // now, no_sqpoll, sq_thread_idle, batch_submissions, idle_ns_kernel,
                           // share_sq_thread, sqpoll
    std::string change;    // what to do, in words; empty for "now"
    double cpu_cores = 0;  // predicted CPU per second for the work, SQ thread and submitter
    double wakeups_per_second = 0;     // predicted SQ thread wakeups
    double added_latency_seconds = 0;  // mean delay a submission gains over one never delayed
    bool available = true;  // false: this kernel or this evidence cannot do it (note says why)
    bool recommended = false;
    std::string note;  // why unavailable, or what the price takes for granted
};

struct Finding {
    // Stable identifiers, also the `finding` label of iouscope_advice_finding:
    //   sq_idle_too_long, sq_spinning_without_work, sq_thread_overpriced,
    //   shared_thread_backlog, sq_threads_should_share, iopoll_without_poll_queues,
    //   requests_forced_async, requests_punted_without_nowait, single_sqe_per_enter,
    //   cq_overflow, provided_buffers_ran_dry, requests_stuck, iowq_workers_idle
    std::string id;
    // "sq_thread 1234", "ring 1234:5", "ring 1234:5 write", "process 1234", "device nvme1n1"
    std::string subject;
    std::int32_t sq_thread = -1;  // the thread concerned, -1 if none
    std::string ring;             // ring id ("pid:fd") concerned, empty if none
    std::string device;           // device concerned, empty if none
    std::uint32_t pid = 0;        // owner process, 0 if none
    std::string comm;
    std::string container_id;       // the thread's container ("containerd://<id>"), empty if none
    std::string pod_uid;            // its Kubernetes pod, empty if none
    std::string summary;            // one line: what is wrong, with the key figure
    std::vector<Figure> evidence;   // measured over the window
    std::string change;             // what to change: flag, parameter, sharing, module option
    std::vector<Figure> predicted;  // the effect predicted for that change
    std::string assumption;         // what the prediction takes for granted
    std::vector<IdleCurvePoint> curve;      // sq_idle_too_long only
    std::vector<Alternative> alternatives;  // sq_thread_overpriced, single_sqe_per_enter
};

struct Advice {
    double window_seconds = 0;    // time between the two snapshots compared, 0 = no advice yet
    bool gaps_available = false;  // the work-gap probe ran (deep tier), so idle curves exist
    std::vector<Finding> findings;
    std::vector<std::string> notes;  // what could not be judged, and why
};

}  // namespace iouscope
