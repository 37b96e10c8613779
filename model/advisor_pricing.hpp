#pragma once
// What an SQ thread's SQEs would cost done each other way (model/advisor_pricing.cpp): without
// SQPOLL, at another sq_thread_idle, in batches, on a kernel with nanosecond idle. The prices
// sq_thread_overpriced weighs, and those sq_threads_should_share puts beside sharing. Internal
// to the advisor's files.
#include <vector>

#include "model/advisor_window.hpp"

namespace iouscope::advisor {

// One thread's window as the prices need it.
struct PriceContext {
    const ThreadWindow& tw;
    const Snapshot& to;
    const AdviseOptions& o;
    double window;
    double wake_s;
    bool measured_wake;
};

// Share of submissions that find the thread asleep, each waiting for its wakeup.
double wake_delay(double sqes, double wakeups_per_second, double wake_s);
double wake_delay(const PriceContext& c, double wakeups_per_second);

// The same SQEs without SQPOLL: the work moves to the submitter, which pays one system call per
// submission. The caller says what to change.
Alternative no_sqpoll_price(double work, double sqes, const AdviseOptions& o);

// The thread's ways of doing its SQEs, "now" first: now, no_sqpoll, sq_thread_idle,
// batch_submissions, idle_ns_kernel.
std::vector<Alternative> price_alternatives(const PriceContext& c);

// CPU plus the delay it adds per second, weighed by wake_weight.
double alternative_score(const Alternative& a, double sqes, const AdviseOptions& o);

}  // namespace iouscope::advisor
