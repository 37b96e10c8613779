#pragma once
// Arithmetic the aggregator relies on, kept free of BPF and I/O so it is unit-tested exactly.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace iouscope {

// Extends a kernel counter that wraps at 2^32 (ctx->cached_sq_head, cached_cq_tail) into a 64-bit
// cumulative total. The first observation is taken as the count since the ring was created, which
// it is for these counters; after that each step adds the unsigned 32-bit difference. Correct as
// long as fewer than 2^32 events happen between two observations.
class WrappingCounter32 {
public:
    // Whether raw can be this counter's next value. A counter that went backwards belongs to
    // another ring (a closed ring's address reused), unless a wrap is proven: the old value was
    // in the top quarter of the range and the new one is in the bottom quarter, a forward step
    // below 2^31. Anything else would be a step no ring can make between two samples.
    bool continues(std::uint32_t raw) const;
    std::uint64_t observe(std::uint32_t raw);
    std::uint64_t total() const { return total_; }

private:
    std::optional<std::uint32_t> last_;
    std::uint64_t total_ = 0;
};

// Jain's fairness index (sum x)^2 / (n * sum x^2) over the given allocations: 1 when all are
// equal, 1/n when one takes everything. By convention 1 for an empty set or all-zero allocations
// (nobody got more than anybody else).
double jain_fairness(std::span<const double> allocations);

// How an SQ thread's CPU time over an interval divides between useful work and idle spinning.
struct CpuSplit {
    std::uint64_t work_ns = 0;
    std::uint64_t spin_ns = 0;
};

// From the kernel's own work-time counter: work is bounded by CPU (the two counters are updated
// at different moments), spin is the rest.
CpuSplit split_with_work_time(std::uint64_t cpu_ns, std::uint64_t work_ns);

// Estimate for kernels without a per-thread work time. The SQ thread spins for sq_thread_idle
// before every sleep, so each sleep implies at least that much spin; an interval in which none of
// its rings made progress was spent entirely spinning.
CpuSplit estimate_split(std::uint64_t cpu_ns, std::uint64_t sleeps, std::uint64_t idle_ns,
                        bool made_progress);

// Converts a log2 histogram (bucket i counts values in [2^i, 2^(i+1)), the last bucket open) into
// cumulative counts at the upper bounds 2^(i+1) for i in [first, last bucket), plus the total.
struct CumulativeBuckets {
    std::vector<double> upper_bounds;       // in the source unit
    std::vector<std::uint64_t> cumulative;  // same length as upper_bounds
    std::uint64_t count = 0;                // everything, i.e. the +Inf bucket
};
CumulativeBuckets log2_to_cumulative(std::span<const std::uint64_t> hist, std::size_t first);

// Value at quantile q (0..1) of a log2 histogram, interpolated inside the bucket; nullopt if empty.
std::optional<double> log2_quantile(std::span<const std::uint64_t> hist, double q);

}  // namespace iouscope
