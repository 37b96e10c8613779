#pragma once
// The hand-made ring records and raw samples the aggregator's tests feed it
// (tests/unit/model/aggregator*_test.cpp).
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/aggregator.hpp"

namespace iouscope::test {

constexpr std::uint32_t kSqpoll = 2;

inline iou_ring_record ring(std::uint64_t ctx, std::uint32_t pid, std::uint32_t fd,
                            std::uint32_t flags, std::uint32_t head, std::int32_t tid = -1) {
    iou_ring_record r{};
    r.ctx = ctx;
    r.pid = pid;
    r.fd = fd;
    r.setup_flags = flags;
    r.sq_head = head;
    r.sq_tail = head;
    r.cq_tail = head;
    r.sq_entries = 64;
    r.caps = IOU_CAP_SQ_TAIL;
    r.sq_tid = tid;
    r.sq_cpu = -1;
    r.jiffies = 0;
    r.sq_thread_idle = 250;  // 1 s in jiffies at HZ=250
    std::strcpy(r.comm, "app");
    if (tid > 0) {
        r.caps |= IOU_CAP_SQ_THREAD;
        r.sqd = 0x5000;
    }
    return r;
}

inline RawSample sample(std::uint64_t t_ns, std::vector<iou_ring_record> rings) {
    RawSample s;
    s.mono_ns = t_ns;
    s.rings.assign(rings.begin(), rings.end());
    return s;
}

inline const RingSnapshot& find_ring(const Snapshot& s, const std::string& id) {
    for (const auto& r : s.rings)
        if (r.id == id) return r;
    throw std::runtime_error("no ring " + id);
}

constexpr std::uint64_t kSec = 1'000'000'000;

}  // namespace iouscope::test
