#pragma once
// The hand-made snapshots, threads, rings and work gaps the advisor's tests judge, and the
// look-ups of a finding and a figure (tests/unit/model/advisor*_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "iouscope/records.h"
#include "model/advisor.hpp"

namespace iouscope::test {

// Adds `n` gaps of `ns` each to a cumulative WorkGaps, bucketed as the BPF program does.
inline void add_gaps(WorkGaps& g, std::uint64_t ns, std::uint64_t n) {
    if (g.count.empty()) {
        g.count.assign(IOU_GAP_BUCKETS, 0);
        g.sum_ns.assign(IOU_GAP_BUCKETS, 0);
    }
    const auto b = gap_bucket_index(ns);
    g.count[b] += n;
    g.sum_ns[b] += ns * n;
}

// A bursty SQ thread: every 50 ms, 100 SQEs 50 us apart, then a 45.05 ms gap: 2000 SQEs/s.
inline WorkGaps bursty(double seconds) {
    WorkGaps g;
    const auto bursts = static_cast<std::uint64_t>(seconds * 20);
    add_gaps(g, 50'000, 99 * bursts);
    add_gaps(g, 45'050'000, bursts);
    g.open_gap_seconds = 0;
    return g;
}

inline ThreadSnapshot thread(std::int32_t tid, std::uint32_t pid, double cpu, double work,
                             double idle_s = 1.0) {
    ThreadSnapshot t;
    t.tid = tid;
    t.pid = pid;
    t.comm = "db";
    t.cpu_seconds = cpu;
    t.work_seconds = work;
    t.idle_setting_seconds = idle_s;
    return t;
}

inline RingSnapshot ring(const std::string& id, std::uint64_t ctx, std::int32_t tid,
                         std::uint64_t sqes) {
    RingSnapshot r;
    r.id = id;
    r.ctx = ctx;
    r.sq_thread = tid;
    r.mode = "sqpoll";
    r.sqes_total = sqes;
    return r;
}

inline Snapshot snap(double t) {
    Snapshot s;
    s.timestamp = t;
    s.hz = 250;
    return s;
}

inline const Finding* find(const Advice& a, const std::string& id) {
    for (const auto& f : a.findings)
        if (f.id == id) return &f;
    return nullptr;
}

inline double figure(const std::vector<Figure>& figs, const std::string& name) {
    for (const auto& f : figs)
        if (f.name == name) return f.value;
    ADD_FAILURE() << "no figure " << name;
    return NAN;
}

}  // namespace iouscope::test
