// The polling view of `iouscope top`: rings that poll, and NVMe passthrough devices.
#include <algorithm>
#include <span>

#include "cli/top_text.hpp"

namespace iouscope::top::text {

std::string table_row(std::span<const TableColumn> cols, const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cols.size() && i < cells.size(); ++i)
        // Width 0: the last column, as long as its text.
        line += (i ? " " : "") +
                (cols[i].width ? pad(cells[i], cols[i].width, cols[i].numeric) : cells[i]);
    return line;
}

std::string table_head(std::span<const TableColumn> cols) {
    std::vector<std::string> titles;
    for (const auto& c : cols) titles.emplace_back(c.title);
    return table_row(cols, titles);
}

bool ring_matches(const RingSnapshot& r, const std::string& filter) {
    return filter.empty() || std::to_string(r.pid) == filter ||
           r.comm.find(filter) != std::string::npos || cgroup_matches(r.cgroup, filter);
}

namespace {

constexpr TableColumn kIopollColumns[] = {
    {"RING", 14, false}, {"COMM", 12, false},   {"MODE", 6, false},
    {"CQE/s", 7, true},  {"CALLER", 9, false},  {"POLLS/s", 8, true},
    {"EMPTY%", 6, true}, {"CQE/POLL", 8, true}, {"BACKLOG", 7, true}};
constexpr TableColumn kDeviceColumns[] = {
    {"DEVICE", 10, false}, {"CMPL/s", 8, true}, {"POLLED%", 7, true}, {"POLLS/CMPL", 10, true},
    {"P50", 8, true},      {"P99", 8, true},    {" NOTE", 0, false}};

// A ring's lines: one per caller of io_do_iopoll where the deep tier measures it, else one.
void add_ring(const RingSnapshot& r, std::vector<std::string>& out) {
    std::vector<std::string> cells{r.id, field_safe(r.comm), r.mode, human_rate(r.cqe_rate)};
    const std::string backlog = std::to_string(r.sq_backlog);
    if (r.iopoll.empty()) {
        auto row = cells;
        row.insert(row.end(), {"-", "-", "-", "-", backlog});
        out.push_back(table_row(kIopollColumns, row));
    }
    for (const auto& io : r.iopoll) {
        auto row = cells;
        row.insert(row.end(),
                   {io.caller, human_rate(io.calls_rate), fmt("%.1f", io.empty_ratio * 100),
                    fmt("%.2f", io.completions_per_call), backlog});
        out.push_back(table_row(kIopollColumns, row));
    }
}

int lines_of(const RingSnapshot& r) {
    return std::max<int>(1, static_cast<int>(r.iopoll.size()));
}

// How many of the rings (the busiest first) are listed: at most `limit` (0 = all) and, where
// `space` bounds the lines (>= 0), what fits in it with a line for the rest.
std::size_t how_many(std::span<const RingSnapshot* const> rings, int limit, int space) {
    std::size_t n =
        limit > 0 ? std::min(rings.size(), static_cast<std::size_t>(limit)) : rings.size();
    if (space < 0) return n;
    int total = 0;
    for (const auto* r : rings) total += lines_of(*r);
    if (n == rings.size() && total <= space) return n;
    int used = 0;
    std::size_t fits = 0;
    while (fits < n && used + lines_of(*rings[fits]) <= space - 1) used += lines_of(*rings[fits++]);
    return fits;
}

// Rings that poll, the most completions first, with io_do_iopoll efficiency where the deep tier
// measures it. Sets any_deep when some ring has those figures.
std::vector<std::string> iopoll_lines(const Snapshot& s, const ViewState& v, int space,
                                      bool& any_deep) {
    std::vector<const RingSnapshot*> rings;
    for (const auto& r : s.rings)
        if ((r.mode == "iopoll" || r.mode == "both") && ring_matches(r, v.filter)) {
            rings.push_back(&r);
            any_deep = any_deep || !r.iopoll.empty();
        }
    std::stable_sort(rings.begin(), rings.end(),
                     [](const auto* a, const auto* b) { return a->cqe_rate > b->cqe_rate; });
    std::vector<std::string> out{table_head(kIopollColumns)};
    if (rings.empty()) out.push_back("no IOPOLL ring is open");
    const std::size_t shown = how_many(rings, v.limit, space < 0 ? -1 : std::max(space - 1, 0));
    for (std::size_t i = 0; i < shown; ++i) add_ring(*rings[i], out);
    if (shown < rings.size()) {
        double cqe = 0;
        for (std::size_t i = shown; i < rings.size(); ++i) cqe += rings[i]->cqe_rate;
        const std::size_t rest = rings.size() - shown;
        out.push_back("... and " + thousands(rest) + " more IOPOLL ring" + (rest == 1 ? "" : "s") +
                      ": CQE/s " + human_rate(cqe));
    }
    return out;
}

// NVMe passthrough completions per namespace.
std::vector<std::string> device_lines(const Snapshot& s, const ViewState& v) {
    std::vector<std::string> out{table_head(kDeviceColumns)};
    for (const auto& d : s.devices) {
        if (!v.filter.empty() && d.name.find(v.filter) == std::string::npos) continue;
        out.push_back(
            table_row(kDeviceColumns,
                      {d.name, human_rate(d.completions_rate), fmt("%.1f", d.polled_ratio * 100),
                       fmt("%.2f", d.polls_per_completion), human_seconds(d.latency_p50_seconds),
                       human_seconds(d.latency_p99_seconds),
                       d.iopoll_without_poll_queues
                           ? " NO POLL QUEUES: polled I/O completes by IRQ; set nvme poll_queues"
                           : ""}));
    }
    if (s.devices.empty()) out.push_back("no NVMe passthrough completions seen");
    return out;
}

}  // namespace

std::vector<std::string> polling_body(const Snapshot& s, const ViewState& v, int space) {
    // The devices (a few namespaces) and the note are listed whole; the rings get what is left.
    auto below = device_lines(s, v);
    below.insert(below.begin(), "");
    const bool deep_attached = std::any_of(s.probes.begin(), s.probes.end(), [](const auto& p) {
        return p.attached && (p.probe == "io_do_iopoll" || p.probe == "nvme_uring_cmd_end_io");
    });
    bool any_deep = false;
    auto out = iopoll_lines(
        s, v, space < 0 ? -1 : std::max(space - static_cast<int>(below.size()) - 3, 1), any_deep);
    out.insert(out.end(), below.begin(), below.end());
    if (!deep_attached && !any_deep)
        out.insert(out.end(), {"",
                               "Poll efficiency and NVMe completions come from the deep tier "
                               "(iouscoped --probes.deep), which is",
                               "not attached here: only ring counters are shown."});
    return out;
}

}  // namespace iouscope::top::text
