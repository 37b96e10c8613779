#pragma once
// What one submission costs a task that submits without SQPOLL, measured on this host: the price
// the advisor sets against an SQ thread's CPU (sq_thread_overpriced). Taken before any probe is
// attached, so the measuring ring is never one the daemon reports.
#include <optional>
#include <string>

#include "model/advisor.hpp"

namespace iouscope {

struct SubmitCost {
    double seconds = 0;  // CPU time of one io_uring_enter that submits and reaps one NOP
    std::string source;  // how it was measured, for the advice's assumption
};

// Empty, with `err` set, when io_uring cannot be used here (io_uring_disabled, seccomp).
std::optional<SubmitCost> measure_submit_cost(std::string& err);

// Sets the advisor's price of a submission from the measurement, and logs it; leaves the assumed
// price, with a warning, when it cannot be measured.
void measure_submit_cost(AdviseOptions& opts);

}  // namespace iouscope
