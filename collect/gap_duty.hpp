#pragma once
// Duty-cycled work gaps. Where the only source of the advisor's gap histogram is a per-SQE
// tracepoint, its program is attached for an on-window out of every period, from a thread of its
// own so the schedule does not depend on --sample.interval, and detached the rest of the time,
// when the tracepoint costs nothing. The estimator is in include/iouscope/gap_sampling.h, the
// accounting of recorded time in model/gap_sampling.hpp.
#include <linux/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/gap_sampling.hpp"
#include "model/snapshot.hpp"

struct bpf_program;

namespace iouscope {

class AttachedProbe;

// What a window asks of the rest of the daemon, to close early.
struct GapDutyHooks {
    std::function<std::uint64_t()> gaps_recorded;  // every thread's gap counts, summed
    std::function<bool()> nothing_to_record;       // true once a walk found no SQPOLL ring
};

// Attaches `programs` for cfg.on every cfg.period, first at construction; writes each window's
// bounds to the BPF globals (start first, then end: see bpf/common.bpf.h); detaches on
// destruction. A window closes early once it has recorded kMinRecordedPerWindow and
// cfg.enough_gaps gaps, or as soon as there is nothing to record: the per-SQE tracepoint costs
// every ring's submissions, and the program records only SQ threads'. The programs and globals
// must outlive it.
class GapDutyCycle {
public:
    GapDutyCycle(std::vector<bpf_program*> programs, volatile __u64* start_ns,
                 volatile __u64* end_ns, GapSamplingConfig cfg, GapDutyHooks hooks);
    ~GapDutyCycle();
    GapDutyCycle(const GapDutyCycle&) = delete;
    GapDutyCycle& operator=(const GapDutyCycle&) = delete;
    GapSampling state(std::uint64_t now_ns) const;

private:
    using Clock = std::chrono::steady_clock;
    void run(std::stop_token stop);
    bool attach();
    void open_window(std::stop_token stop);
    bool enough_recorded(std::uint64_t base) const;
    void close_early(std::stop_token stop);
    void sleep_until(std::stop_token stop, Clock::time_point t);
    std::vector<bpf_program*> programs_;
    volatile __u64* start_ns_;
    volatile __u64* end_ns_;
    GapSamplingConfig cfg_;
    GapDutyHooks hooks_;
    std::mutex sleep_mu_;  // only for sleep_cv_, which wakes on stop alone
    std::condition_variable_any sleep_cv_;
    mutable std::mutex mu_;
    GapWindowLedger ledger_;
    std::uint64_t attach_failures_ = 0;
    std::vector<std::unique_ptr<AttachedProbe>> links_;  // only the duty thread touches them
    std::jthread thread_;                                // last: stops before the rest goes
};

}  // namespace iouscope
