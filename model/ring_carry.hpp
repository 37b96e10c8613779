#pragma once
// Light walks: plain rings read in full only every so often (docs/ARCHITECTURE.md, "Light walks").
//
// A plain ring (neither SQPOLL nor IOPOLL) has no SQ thread and nothing polled: its counters feed
// per-ring series that Prometheus scrapes every 15 s or more, and the folds. Reading it costs the
// walk a cold load of its io_ring_ctx, nearly half of the walk's time at 10,000 idle rings. So
// between full walks, at most `period` apart, a walk is light: the BPF program passes over the
// plain rings the last full walk found idle (collect/walk_order.hpp) and RingCarry appends their
// last records, as if read again. A ring born since, a plain ring that was busy, and SQPOLL and
// IOPOLL rings are read by every walk. What an idle ring did after the full walk shows at the
// next one; a carried ring that closed is kept until then.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/aggregator.hpp"

namespace iouscope {

class RingCarry {
public:
    // period_ns: full walks at most this far apart, 0 for every walk full. interval_ns: the
    // sampling interval; a full walk is due within half of it of its time, whatever the jitter.
    RingCarry(std::uint64_t period_ns, std::uint64_t interval_ns)
        : period_(period_ns), slack_(interval_ns / 2) {}
    RingCarry() = default;

    // Whether the walk about to start at mono_ns may pass over the plain rings it knows: a full
    // walk was complete less than the period ago, and the last sample kept was complete. The
    // first two walks are full, so that every ring there at the start is read twice before any
    // is carried: a ring read once and carried was not seen doing nothing (RingSeries).
    bool light(std::uint64_t mono_ns) const;

    // After the walk into raw.rings: where it was light (raw.light_walk), appends the latest
    // record of every plain ring it passed over, and counts them in raw.carried.
    void splice(RawSample& raw);

    // Once the sample is aggregated: keeps its records for the next light walk. The buffers
    // swap; raw.rings is left with an older one, to be cleared and reused.
    void keep(RawSample& raw);

private:
    std::uint64_t period_ = 0, slack_ = 0;
    std::uint64_t last_full_ns_ = 0;
    int fulls_ = 0;      // complete full walks, up to 2
    bool have_ = false;  // prev_ is a complete sample's
    RingRecords prev_;
    std::vector<std::uint64_t> seen_;                               // the walk's rings, sorted
    std::vector<std::pair<std::uint32_t, std::uint32_t>> holders_;  // their (pid, fd), sorted
};

}  // namespace iouscope
