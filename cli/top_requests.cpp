// The requests view of `iouscope top` (request tier): per ring, its opcode mix, latency, punts,
// the process's io-wq workers, SQEs per io_uring_enter, CQ overflow and stuck requests.
#include <algorithm>
#include <map>

#include "cli/top_text.hpp"

namespace iouscope::top::text {

namespace {

constexpr TableColumn kColumns[] = {{"RING", 14, false}, {"COMM", 12, false},  {"REQ/s", 7, true},
                                    {"P50", 8, true},    {"P99", 8, true},     {"PUNT%", 6, true},
                                    {"WRK", 4, true},    {"SQE/ENT", 7, true}, {"OVFL", 6, true},
                                    {"STUCK", 5, true},  {"OLDEST", 8, true},  {" OPS", 0, false}};

// Quantile q of every completion the ring's histograms hold (all opcodes and paths, since
// iouscope attached): the upper bound of the bucket it falls in; -1 without completions.
double quantile(const RingRequests& r, double q) {
    LatencyHistogram all;
    for (const auto& op : r.ops)
        for (const auto& p : op.paths) {
            const auto& h = p.latency;
            if (h.count == 0) continue;
            if (all.upper_bounds_s.empty()) {
                all.upper_bounds_s = h.upper_bounds_s;
                all.cumulative.assign(h.cumulative.size(), 0);
            }
            if (h.cumulative.size() != all.cumulative.size()) continue;
            for (std::size_t i = 0; i < all.cumulative.size(); ++i)
                all.cumulative[i] += h.cumulative[i];
            all.count += h.count;
        }
    return bucket_quantile(all, q).value_or(-1);
}

// The opcodes by share of the ring's requests, the largest first, at most three.
std::string op_mix(const Snapshot& s, const RingRequests& r, std::uint64_t submitted) {
    std::vector<const RequestOpSnapshot*> ops;
    for (const auto& op : r.ops)
        if (op.submitted) ops.push_back(&op);
    std::stable_sort(ops.begin(), ops.end(),
                     [](const auto* a, const auto* b) { return a->submitted > b->submitted; });
    std::string out;
    for (std::size_t i = 0; i < ops.size() && i < 3; ++i)
        out += " " + opcode_name(s, ops[i]->opcode) + " " +
               fmt("%.0f%%",
                   100.0 * static_cast<double>(ops[i]->submitted) / static_cast<double>(submitted));
    return out.empty() ? " -" : out;
}

std::string ring_line(const Snapshot& s, const RingSnapshot& r,
                      const std::map<std::uint32_t, std::uint32_t>& workers) {
    const RingRequests& q = r.requests;
    std::uint64_t submitted = 0, punted = 0;
    for (const auto& op : q.ops) {
        submitted += op.submitted;
        punted += op.punted;
    }
    const auto w = workers.find(r.pid);
    return table_row(
        kColumns,
        {r.id, field_safe(r.comm), human_rate(r.sqe_rate), human_seconds(quantile(q, 0.5)),
         human_seconds(quantile(q, 0.99)),
         submitted
             ? fmt("%.1f", 100.0 * static_cast<double>(punted) / static_cast<double>(submitted))
             : "-",
         w == workers.end() ? "-" : std::to_string(w->second),
         q.has_enters && q.enters
             ? fmt("%.1f", static_cast<double>(q.enter_sqes) / static_cast<double>(q.enters))
             : "-",
         q.has_overflow ? thousands(q.overflow_cqes) : "-", std::to_string(q.stuck),
         q.in_flight ? human_seconds(q.oldest_age_seconds) : "-", op_mix(s, q, submitted)});
}

}  // namespace

std::vector<std::string> requests_body(const Snapshot& s, const ViewState& v, int space) {
    std::vector<const RingSnapshot*> rings;
    for (const auto& r : s.rings)
        if ((r.requests.has_requests || r.requests.overflow_cqes) && ring_matches(r, v.filter))
            rings.push_back(&r);
    // Stuck requests first: they are what the view is opened for; then the busiest.
    std::stable_sort(rings.begin(), rings.end(), [](const auto* a, const auto* b) {
        if (a->requests.stuck != b->requests.stuck) return a->requests.stuck > b->requests.stuck;
        return a->sqe_rate > b->sqe_rate;
    });
    std::map<std::uint32_t, std::uint32_t> workers;  // by pid, live io-wq workers
    for (const auto& w : s.iowq) workers[w.pid] = w.workers[0] + w.workers[1];
    std::vector<std::string> out{table_head(kColumns)};
    if (rings.empty()) {
        out.push_back(
            "no ring's requests are counted: the request tier is off (iouscoped "
            "--probes.requests) or no ring submits");
        return out;
    }
    // The titles, the rows, a line for the rest whenever the limit or the space leaves rings
    // out, and the footnote.
    std::size_t shown =
        v.limit > 0 ? std::min(rings.size(), static_cast<std::size_t>(v.limit)) : rings.size();
    const auto lines = [&](std::size_t n) { return 2 + n + (n < rings.size() ? 1 : 0); };
    if (space >= 0 && lines(shown) > static_cast<std::size_t>(space))
        shown = std::min(shown, static_cast<std::size_t>(std::max(space - 3, 0)));
    for (std::size_t i = 0; i < shown; ++i) out.push_back(ring_line(s, *rings[i], workers));
    if (shown < rings.size()) {
        double rate = 0;
        std::uint64_t stuck = 0;
        for (std::size_t i = shown; i < rings.size(); ++i) {
            rate += rings[i]->sqe_rate;
            stuck += rings[i]->requests.stuck;
        }
        const std::size_t rest = rings.size() - shown;
        out.push_back("... and " + thousands(rest) + " more ring" + (rest == 1 ? "" : "s") +
                      ": REQ/s " + human_rate(rate) + ", stuck " + thousands(stuck));
    }
    out.push_back(
        "P50, P99, PUNT%, SQE/ENT and OPS since iouscope attached; WRK: the "
        "process's io-wq workers");
    return out;
}

}  // namespace iouscope::top::text
