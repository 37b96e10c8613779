#include "model/ring_carry.hpp"

#include <algorithm>

namespace iouscope {

bool RingCarry::light(std::uint64_t mono_ns) const {
    return period_ > 0 && have_ && fulls_ >= 2 && mono_ns >= last_full_ns_ &&
           mono_ns - last_full_ns_ + slack_ < period_;
}

void RingCarry::splice(RawSample& raw) {
    raw.carried = 0;
    if (!raw.light_walk) {
        if (raw.walk_complete) {
            last_full_ns_ = raw.mono_ns;
            fulls_ = std::min(fulls_ + 1, 2);
        }
        return;
    }
    // A ring the light walk read itself (born since the full walk, or after a run of closed
    // ones) is not carried: its own record is the newer. Nor is a ring whose holder's fd the
    // walk found holding another ring: it left that fd, closed most likely, and carried it
    // would put two rings under one pid:fd. Every other holder of a carried ring is carried,
    // as a full walk would list them.
    seen_.clear();
    holders_.clear();
    for (const auto& r : raw.rings) {
        seen_.push_back(r.ctx);
        holders_.emplace_back(r.pid, r.fd);
    }
    std::sort(seen_.begin(), seen_.end());
    std::sort(holders_.begin(), holders_.end());
    const std::size_t walked = raw.rings.size();
    raw.rings.reserve(walked + prev_.size());
    for (const auto& r : prev_)
        if (plain_ring(r.setup_flags) && !std::binary_search(seen_.begin(), seen_.end(), r.ctx) &&
            !std::binary_search(holders_.begin(), holders_.end(), std::pair{r.pid, r.fd}))
            raw.rings.push_back(r);
    raw.carried = raw.rings.size() - walked;
}

void RingCarry::keep(RawSample& raw) {
    prev_.swap(raw.rings);
    have_ = raw.walk_complete;
}

}  // namespace iouscope
