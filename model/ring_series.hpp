#pragma once
// Which rings get series of their own: the cardinality policy every per-ring family follows
// (docs/ARCHITECTURE.md, "Cardinality").
//
// Every SQPOLL or IOPOLL ring keeps its series: an SQ thread's or a poller's numbers are what
// iouscope is for. Plain rings get series of their own up to a limit, held by the busiest: each
// ring's activity is its SQEs and CQEs, weighted down exponentially with kDecaySeconds. Free
// places go to the busiest rings waiting. A held ring keeps its place until it closes, or until
// a waiting ring more than twice as busy wants it and it has held it for kTenureSeconds; a ring
// that has done nothing since iouscope first read it, and was read again since (not carried by
// light walks, model/ring_carry.hpp), yields at once. So a series, once there, lives
// through several scrapes, and two rings of about the same activity never swap: scrapes do not
// see series flap. The rest are folded into their process (Snapshot::folded): how many there
// are, and the SQEs and CQEs they consumed and posted and their requests (by opcode, request
// tier: submitted, punted, completed per path) while folded.
//
// The snapshot keeps every ring (RingSnapshot::folded marks the folded ones): top and the JSON
// API still see them all; only the exposition folds.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/snapshot.hpp"

namespace iouscope {

class RingSeries {
public:
    static constexpr std::size_t kDefaultLimit = 500;
    static constexpr double kDecaySeconds = 300;  // activity's time constant
    static constexpr double kTenureSeconds = 60;  // a place is held this long at least
    static constexpr double kMargin = 2;  // a ring takes a place from one this much less busy

    // limit: plain rings with series of their own, at most; 0 = every ring.
    explicit RingSeries(std::size_t limit = kDefaultLimit) : limit_(limit) {}

    // Marks snap's folded rings and fills snap.folded and snap.ring_series_limit. Call once per
    // sample, in order: it keeps which rings hold a place and what the folds have counted.
    void apply(Snapshot& snap);

private:
    struct Ring {
        std::string id;  // with start, the ring's identity at this ctx
        double start = 0;
        std::uint64_t sqes = 0, cqes = 0;    // at the last sample
        std::uint64_t dsqes = 0, dcqes = 0;  // in the last interval
        // Requests by opcode (request tier), at the last sample and in the last interval.
        std::vector<FoldedOp> requests, drequests;
        double activity = 0;      // SQEs + CQEs, decayed by kDecaySeconds; 0: none since seen
        std::uint64_t reads = 0;  // samples that read it rather than carried it
        double at = 0;            // monotonic seconds activity was last brought to
        bool held = false;        // it has series of its own
        double held_since = 0;    // monotonic seconds it took its place
        std::uint64_t seen = 0;   // the sample that last saw it
    };
    struct Fold {
        std::string comm;
        std::uint64_t sqes = 0, cqes = 0;
        std::map<std::uint32_t, FoldedOp> requests;  // by opcode
        std::uint64_t seen = 0;
    };
    struct Plain {
        RingSnapshot* snap;
        Ring* ring;
    };
    void join(Snapshot& snap);
    void observe(Ring& s, bool fresh, const RingSnapshot& r, const Snapshot& snap) const;
    void allot(std::size_t held, double now);
    static bool known_idle(const Ring& r);
    static void observe_requests(Ring& s, bool at_start, const RingRequests& rq);
    void fold(Snapshot& snap);

    std::size_t limit_;
    std::uint64_t samples_ = 0;
    // Plain rings by ctx, ascending: each sample's rings are joined to them in one pass, and
    // at 10,000 rings that costs a tenth of a hash table's lookups.
    std::vector<std::pair<std::uint64_t, Ring>> rings_, rings_next_;
    std::vector<Plain> plain_;                // this sample's plain rings, in ctx order
    std::vector<Plain*> waiting_, yielding_;  // kept between samples for their capacity
    std::map<std::uint32_t, Fold> folds_;     // by pid
};

}  // namespace iouscope
