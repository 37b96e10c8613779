#pragma once
// The families of findings make_advice runs (model/advisor.cpp), one file each: SQ thread idle
// and spin (advisor_idle_findings.cpp), price (advisor_overpriced.cpp), sharing and backlog
// (advisor_sharing.cpp), IOPOLL without poll queues (advisor_poll_queues.cpp), the request path
// (advisor_requests.cpp). Each appends its
// findings and notes to `out`. Internal to the advisor's files.
#include <optional>
#include <vector>

#include "model/advisor_window.hpp"

namespace iouscope::advisor {

// sq_spinning_without_work: an SQ thread that spins for next to no SQEs. True if it fired.
bool idle_ring_finding(const ThreadWindow& tw, const AdviseOptions& o, double window, Advice& out);

// sq_idle_too_long: a shorter sq_thread_idle saves CPU. Returns the thread's CPU at the
// recommended setting if it fired.
std::optional<double> idle_finding(const ThreadWindow& tw, const Snapshot& to,
                                   const AdviseOptions& o, double window, Advice& out);

// sq_thread_overpriced. `after_idle`: the thread's CPU once an sq_idle_too_long finding is
// applied, or its CPU now. A thread that sq_thread_idle alone brings within price_ratio of every
// alternative needs no second finding; one that stays far above them (20 SQEs/s at 6 ms of spin
// each) does. True if it fired.
bool price_finding(const ThreadWindow& tw, const Snapshot& to, const AdviseOptions& o,
                   double window, double after_idle, Advice& out);

// shared_thread_backlog: rings waiting for their turn on a saturated shared thread.
void backlog_findings(const ThreadWindow& tw, const FromIndex& from, const AdviseOptions& o,
                      double window, Advice& out);

// sq_threads_should_share: spinning SQ threads of one process that one thread could serve.
void share_findings(const std::vector<ThreadWindow>& windows, const AdviseOptions& o, Advice& out);

// iopoll_without_poll_queues: polled requests on a device that completes them by interrupt.
void poll_queue_findings(const Snapshot& from, const Snapshot& to, Advice& out);

// The request path's findings, per ring and opcode (advisor_requests.cpp): requests_forced_async,
// requests_punted_without_nowait, single_sqe_per_enter, cq_overflow, provided_buffers_ran_dry,
// requests_stuck.
void request_findings(const FromIndex& index, const Snapshot& from, const Snapshot& to,
                      const AdviseOptions& o, double window, Advice& out);

// A process's io-wq workers in a snapshot, null if it has none (advisor_iowq.cpp).
const IowqSnapshot* find_process(const Snapshot& s, std::uint32_t pid);

// iowq_workers_idle: io-wq workers far above the requests on io-wq (advisor_iowq.cpp).
void iowq_findings(const Snapshot& from, const Snapshot& to, const AdviseOptions& o, Advice& out);

}  // namespace iouscope::advisor
