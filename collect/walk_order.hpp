#pragma once
// The order of the last full ring walk, kept in the walk_order map for light walks to follow
// (bpf/iouscope.bpf.c, walk_passes_over; model/ring_carry.hpp): one entry per io_uring file in
// the order the iterator met them, the ring's address with bit 0 set for a ring a light walk may
// pass over: a plain ring (neither SQPOLL nor IOPOLL) whose SQ head and CQ tail had not moved
// since the full walk before. A plain ring that did anything over the last period, or was born
// in it, is read by every walk: the counts it reaches before it closes are never lost to a
// carried record, which only an idle ring that wakes and closes within one period can lose.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "iouscope/records.h"

namespace iouscope {

class WalkOrder {
public:
    static constexpr std::uint64_t kPlain = 1;  // bit 0 of an entry

    // map_fd: the walk_order array, of capacity entries; -1 keeps the order here only (tests).
    WalkOrder(int map_fd, std::uint32_t capacity) : fd_(map_fd), capacity_(capacity) {}
    WalkOrder() = default;

    // After a complete full walk: its records, in the order walked, each plain ring marked if it
    // was idle since the full walk before. Rings past the capacity are
    // left out, and light walks read them in full. False when the map refused the order, which
    // is then empty.
    bool learn(std::span<const iou_ring_record> walked);
    // Rings announced by io_uring_create since: taken out of the order (every walk reads them in
    // full until the next full walk learns them), since a new ring can sit at a closed plain
    // ring's place and address.
    void forget(std::span<const iou_created_ring> created);
    // Nothing known: light walks read every ring (after an incomplete full walk).
    void clear() { known_ = 0; }

    // Entries of the order in use.
    std::uint32_t known() const { return known_; }
    std::span<const std::uint64_t> entries() const { return {entries_.data(), known_}; }
    // Entries sent to the map so far: only those that changed since the last full walk.
    std::uint64_t written() const { return written_; }

private:
    struct Counts {
        std::uint64_t ctx, born_ns;
        std::uint32_t sq_head, cq_tail;
    };
    bool write(std::uint32_t from, std::uint32_t n);
    bool idle(const iou_ring_record& r) const;
    int fd_ = -1;
    std::uint32_t capacity_ = 0, known_ = 0;
    std::uint64_t written_ = 0;
    std::vector<std::uint64_t> entries_;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> by_ctx_;  // (ctx, place), sorted
    std::vector<Counts> counts_;       // each ring's counts at the last full walk, by ctx
    std::vector<std::uint32_t> keys_;  // 0, 1, 2, ... for the batch
};

}  // namespace iouscope
