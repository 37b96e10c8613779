#pragma once
// Which rings get series of their own: the cardinality policy every per-ring family follows
// (docs/ARCHITECTURE.md, "Cardinality").
//
// Every SQPOLL or IOPOLL ring keeps its series: an SQ thread's or a poller's numbers are what
// iouscope is for. Plain rings get series of their own up to a limit, held by the rings that
// did something most recently; the rest are folded into their process (Snapshot::folded): how
// many there are, and the SQEs and CQEs they consumed and posted while folded. A held ring
// keeps its series until it closes, or until it has been idle for hold_seconds and a ring that
// was active in the last interval wants the place; a ring that never did anything since
// iouscope saw it yields its place to an active one at once. So a series, once there, stays
// through the windows of rate() and alerts, and a place changes hands at most once per ring per
// hold_seconds: no flapping between scrapes.
//
// The snapshot keeps every ring (RingSnapshot::folded marks the folded ones): top and the JSON
// API still see them all; only the exposition folds.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/snapshot.hpp"

namespace iouscope {

class RingSeries {
public:
    static constexpr std::size_t kDefaultLimit = 500;
    static constexpr double kHoldSeconds = 600;

    // limit: plain rings with series of their own, at most; 0 = every ring.
    explicit RingSeries(std::size_t limit = kDefaultLimit, double hold_seconds = kHoldSeconds)
        : limit_(limit), hold_(hold_seconds) {}

    // Marks snap's folded rings and fills snap.folded and snap.ring_series_limit. Call once per
    // sample, in order: it keeps which rings hold a place and what the folds have counted.
    void apply(Snapshot& snap);

private:
    struct Ring {
        std::string id;  // with start, the ring's identity at this ctx
        double start = 0;
        std::uint64_t sqes = 0, cqes = 0;    // at the last sample
        std::uint64_t dsqes = 0, dcqes = 0;  // in the last interval
        bool active = false;                 // it progressed in the last interval
        // Monotonic seconds of the last sample it progressed in; -infinity: not since iouscope
        // saw it.
        double last_active = -std::numeric_limits<double>::infinity();
        bool held = false;       // it has series of its own
        std::uint64_t seen = 0;  // the sample that last saw it
    };
    struct Fold {
        std::string comm;
        std::uint64_t sqes = 0, cqes = 0;
        std::uint64_t seen = 0;
    };
    struct Plain {
        RingSnapshot* snap;
        Ring* ring;
    };
    Ring& observe(const RingSnapshot& r, const Snapshot& snap);
    void allot(std::vector<Plain>& plain, std::size_t held, double now);
    void fold(Snapshot& snap, const std::vector<Plain>& plain);

    std::size_t limit_;
    double hold_;
    std::uint64_t samples_ = 0;
    std::unordered_map<std::uint64_t, Ring> rings_;  // plain rings, by ctx
    std::map<std::uint32_t, Fold> folds_;            // by pid
};

}  // namespace iouscope
