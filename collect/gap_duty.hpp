#pragma once
// Duty-cycled work gaps. Where the only source of the advisor's gap histogram is a per-SQE
// tracepoint, its program is attached for an on-window out of every period, from a thread of its
// own so the schedule does not depend on --sample.interval, and detached the rest of the time,
// when the tracepoint costs nothing. The estimator is in include/uringscope/gap_sampling.h, the
// accounting of recorded time in model/gap_sampling.hpp.
#include <linux/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/gap_sampling.hpp"
#include "model/snapshot.hpp"

struct bpf_program;

namespace uringscope {

class AttachedProbe;

// Attaches `programs` for cfg.on every cfg.period, first at construction; writes each window's
// bounds to the BPF globals (start first, then end: see bpf/uringscope.bpf.c); detaches on
// destruction. The programs and globals must outlive it.
class GapDutyCycle {
public:
    GapDutyCycle(std::vector<bpf_program*> programs, volatile __u64* start_ns,
                 volatile __u64* end_ns, GapSamplingConfig cfg);
    ~GapDutyCycle();
    GapDutyCycle(const GapDutyCycle&) = delete;
    GapDutyCycle& operator=(const GapDutyCycle&) = delete;
    GapSampling state(std::uint64_t now_ns) const;

private:
    void run(std::stop_token stop);
    bool attach();
    std::vector<bpf_program*> programs_;
    volatile __u64* start_ns_;
    volatile __u64* end_ns_;
    GapSamplingConfig cfg_;
    mutable std::mutex mu_;
    GapWindowLedger ledger_;
    std::uint64_t attach_failures_ = 0;
    std::vector<std::unique_ptr<AttachedProbe>> links_;  // only the duty thread touches them
    std::jthread thread_;                                // last: stops before the rest goes
};

}  // namespace uringscope
