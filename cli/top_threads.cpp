// The threads view of `iouscope top`: the thread rows, their rings, and what fits.
#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>

#include "cli/top_text.hpp"

namespace iouscope::top::text {

namespace {

std::string pct(double fraction) {
    return fmt("%.1f", fraction * 100);
}

std::string cell(const ThreadSnapshot& t, Column c, int width, const History& h, bool utf8) {
    switch (c) {
        case Column::tid:
            return std::to_string(t.tid);
        case Column::pid:
            // A per-CPU shared thread serves several processes; its own pid is its creator's.
            return t.shared_percpu ? "percpu" : std::to_string(t.pid);
        case Column::comm:
            // Not its creator's comm: the thread serves every process's rings on that CPU.
            if (t.shared_percpu) return "cpu " + std::to_string(t.sq_cpu);
            return field_safe(t.comm);
        case Column::container:
            return short_container(t.shared_percpu ? std::string() : t.cgroup.container_id);
        case Column::cpu:
            return pct(t.cpu_util);
        case Column::work:
            return pct(t.work_util) + (t.work_source == WorkSource::estimate ? "~" : "");
        case Column::spin:
            return pct(t.spin_util);
        case Column::sleep:
            return pct(t.sleep_util);
        case Column::sleeps:
            return human_rate(t.sleep_rate);
        case Column::wakes:
            return human_rate(t.wakeup_rate);
        case Column::p50:
            return human_seconds(t.wake_p50_seconds);
        case Column::p99:
            return human_seconds(t.wake_p99_seconds);
        case Column::rings:
            return std::to_string(t.rings);
        case Column::sqes:
            return human_rate(t.sqe_rate);
        case Column::fairness:
            return fmt("%.2f", t.fairness);
        case Column::history: {
            const auto* d = h.cpu(t.tid);
            return d ? sparkline(*d, static_cast<std::size_t>(width), utf8) : std::string();
        }
    }
    return "";
}

using Layout = std::vector<std::pair<ColumnInfo, int>>;

// Picks the columns that fit in `width`, dropping the least important first, and gives the
// history column whatever is left.
Layout layout(int width) {
    auto cols = thread_columns();
    std::vector<ColumnInfo> by_prio = cols;
    std::stable_sort(by_prio.begin(), by_prio.end(),
                     [](const auto& a, const auto& b) { return a.priority < b.priority; });
    std::set<Column> chosen;
    int used = 0;
    for (const auto& c : by_prio) {
        int need = c.width + (chosen.empty() ? 0 : 1);
        if (used + need <= width) {
            chosen.insert(c.id);
            used += need;
        }
    }
    Layout out;
    for (const auto& c : cols)
        if (chosen.count(c.id)) out.emplace_back(c, c.width);
    if (!out.empty() && out.back().first.id == Column::history) out.back().second += width - used;
    return out;
}

std::string head_line(const Layout& cols, const ViewState& v) {
    std::string head;
    for (const auto& [c, w] : cols) {
        std::string title = c.title;
        if (c.id == v.sort) title += v.descending ? "v" : "^";
        head += (head.empty() ? "" : " ") + pad(title, w, c.numeric);
    }
    return head;
}

std::string row_line(const ThreadSnapshot& t, const Layout& cols, const History& h, bool utf8) {
    std::string line;
    for (const auto& [c, w] : cols) {
        std::string text = cell(t, c.id, w, h, utf8);
        line +=
            (line.empty() ? "" : " ") + (c.id == Column::history ? text : pad(text, w, c.numeric));
    }
    return line;
}

std::string ring_line(const RingSnapshot& r, int width) {
    std::string s = "   + ring " + pad(r.id, 13, false) + " " + pad(r.mode, 7, false) + " SQE/s " +
                    pad(human_rate(r.sqe_rate), 7, true) + "  CQE/s " +
                    pad(human_rate(r.cqe_rate), 7, true) + "  share " +
                    pad(fmt("%.0f%%", r.sqthread_share * 100), 4, true) + "  backlog " +
                    std::to_string(r.sq_backlog);
    return pad(s, width, false);
}

std::string plural(std::size_t n, const std::string& what) {
    return thousands(n) + " " + what + (n == 1 ? "" : "s");
}

// The rings a thread's list leaves out, summed up in the list's place.
std::string ring_rest_line(std::span<const RingSnapshot* const> rest) {
    double sqe = 0, cqe = 0;
    std::uint64_t backlog = 0;
    for (const auto* r : rest) {
        sqe += r->sqe_rate;
        cqe += r->cqe_rate;
        backlog += r->sq_backlog;
    }
    return "   + ... and " + plural(rest.size(), "more ring") + ": SQE/s " + human_rate(sqe) +
           "  CQE/s " + human_rate(cqe) + "  backlog " + std::to_string(backlog);
}

// The thread rows the list leaves out (`above` of them before the first shown), summed up.
std::string rest_line(std::span<const ThreadSnapshot* const> rows, std::size_t first,
                      std::size_t last) {
    double cpu = 0, spin = 0, sqe = 0;
    std::uint64_t rings = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i >= first && i < last) continue;
        cpu += rows[i]->cpu_util;
        spin += rows[i]->spin_util;
        sqe += rows[i]->sqe_rate;
        rings += rows[i]->rings;
    }
    const std::size_t hidden = rows.size() - (last - first);
    return "... and " + plural(hidden, "more SQ thread") +
           (first ? " (" + thousands(first) + " above)" : "") + ": CPU " + fmt("%.2f", cpu) +
           " cores (spin " + fmt("%.2f", spin) + "), SQE/s " + human_rate(sqe) + ", " +
           plural(rings, "ring");
}

// Each listed thread's rings, gathered in one pass over the rings however many threads there are:
// a lookup per row afterwards, not a scan of every ring per row.
using RingsOf = std::unordered_map<std::int32_t, std::vector<const RingSnapshot*>>;
RingsOf rings_of(const Snapshot& s, const ViewState& v) {
    RingsOf out;
    if (!v.expand_all && v.expanded.empty()) return out;
    for (const auto& r : s.rings)
        if (r.sq_thread >= 0 && (v.expand_all || v.expanded.count(r.sq_thread)))
            out[r.sq_thread].push_back(&r);
    return out;
}

struct Window {
    std::size_t first = 0, last = 0;
};

// The rows shown: at most `most`, and where `space` bounds the lines (>= 0), those that fit
// around the selected row, from `first` on when it is still on the screen. `cost(i)` is the
// lines row i takes. A line for the rest is kept free unless every row fits.
template <class Cost>
Window fit(std::size_t n, std::size_t sel, std::size_t first, std::size_t most, int space,
           const Cost& cost) {
    if (space < 0) return {0, most};
    if (most == n) {
        int total = 0;
        for (std::size_t i = 0; i < n && total <= space; ++i) total += cost(i);
        if (total <= space) return {0, n};
    }
    --space;  // the rest line
    first = std::min(first, sel);
    int used = 0;
    for (std::size_t i = first; i <= sel; ++i) used += cost(i);
    while (first < sel && (used > space || sel - first + 1 > most)) used -= cost(first++);
    std::size_t last = sel + 1;
    while (last < n && last - first < most && used + cost(last) <= space) used += cost(last++);
    while (first > 0 && last - first < most && used + cost(first - 1) <= space)
        used += cost(--first);
    return {first, last};
}

}  // namespace

Body thread_body(const Snapshot& s, const ViewState& v, const History& h, int width, int space,
                 bool utf8) {
    const auto cols = layout(width);
    Body b;
    b.lines.push_back(head_line(cols, v));
    const auto rows = visible_threads(s, v);
    if (rows.empty()) {
        b.lines.push_back(s.threads.empty() ? "no SQ threads: no SQPOLL ring is open"
                                            : "no SQ thread matches the filter");
        return b;
    }
    auto rings = rings_of(s, v);
    const auto ring_cap = [&](std::size_t n) {
        return v.ring_limit > 0 ? std::min(n, static_cast<std::size_t>(v.ring_limit)) : n;
    };
    const auto cost = [&](std::size_t i) {
        const auto it = rings.find(rows[i]->tid);
        const std::size_t n = it == rings.end() ? 0 : it->second.size();
        return static_cast<int>(1 + ring_cap(n) + (ring_cap(n) < n));
    };
    const std::size_t sel = std::clamp<std::size_t>(
        static_cast<std::size_t>(std::max(v.selected, 0)), 0, rows.size() - 1);
    const std::size_t most =
        v.limit > 0 ? std::min(rows.size(), static_cast<std::size_t>(v.limit)) : rows.size();
    const Window w = fit(rows.size(), sel, static_cast<std::size_t>(std::max(v.first, 0)), most,
                         space < 0 ? -1 : std::max(space - 1, 0), cost);
    b.selected = static_cast<int>(sel);
    b.first = static_cast<int>(w.first);
    for (std::size_t i = w.first; i < w.last; ++i) {
        if (i == sel) b.selected_line = static_cast<int>(b.lines.size());
        b.lines.push_back(row_line(*rows[i], cols, h, utf8));
        const auto it = rings.find(rows[i]->tid);
        if (it == rings.end()) continue;
        auto& list = it->second;
        std::stable_sort(list.begin(), list.end(),
                         [](const auto* a, const auto* b) { return a->sqe_rate > b->sqe_rate; });
        const std::size_t shown = ring_cap(list.size());
        for (std::size_t k = 0; k < shown; ++k) b.lines.push_back(ring_line(*list[k], width));
        if (shown < list.size()) b.lines.push_back(ring_rest_line(std::span(list).subspan(shown)));
    }
    if (w.last - w.first < rows.size()) b.lines.push_back(rest_line(rows, w.first, w.last));
    return b;
}

}  // namespace iouscope::top::text
