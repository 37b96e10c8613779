#include "cli/top_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cli/top_text.hpp"

namespace iouscope::top {

namespace text {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// Names are made ASCII by field_safe or replaced with U+FFFD by the exporter, and the sparkline's
// blocks are single-width.
std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

std::string pad(std::string s, int width, bool right) {
    if (width <= 0) return "";
    auto w = static_cast<std::size_t>(width);
    if (display_width(s) > w) {
        // Cut at a code point boundary after `width` code points.
        std::size_t seen = 0, i = 0;
        for (; i < s.size(); ++i) {
            if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == w) break;
        }
        s.resize(i);
    }
    std::string fill(w - display_width(s), ' ');
    return right ? fill + s : s + fill;
}

bool cgroup_matches(const CgroupLabels& c, const std::string& filter) {
    return c.container_id.find(filter) != std::string::npos || c.pod_uid.starts_with(filter);
}

}  // namespace text

using text::fmt;
using text::pad;

namespace {

double sort_value(const ThreadSnapshot& t, Column c) {
    switch (c) {
        case Column::tid:
            return t.tid;
        case Column::pid:
            return t.pid;
        case Column::cpu:
            return t.cpu_util;
        case Column::work:
            return t.work_util;
        case Column::spin:
            return t.spin_util;
        case Column::sleep:
            return t.sleep_util;
        case Column::sleeps:
            return t.sleep_rate;
        case Column::wakes:
            return t.wakeup_rate;
        case Column::p50:
            return t.wake_p50_seconds;
        case Column::p99:
            return t.wake_p99_seconds;
        case Column::rings:
            return static_cast<double>(t.rings);
        case Column::sqes:
            return t.sqe_rate;
        case Column::fairness:
            return t.fairness;
        case Column::comm:
        case Column::container:
        case Column::history:
            return t.cpu_util;
    }
    return 0;
}

}  // namespace

const std::vector<ColumnInfo>& thread_columns() {
    static const std::vector<ColumnInfo> cols = {
        {Column::tid, "TID", 7, 0, true},       {Column::pid, "PID", 7, 3, true},
        {Column::comm, "COMM", 12, 1, false},   {Column::container, "CONTAINER", 12, 5, false},
        {Column::cpu, "CPU%", 6, 0, true},      {Column::work, "WORK%", 6, 2, true},
        {Column::spin, "SPIN%", 6, 1, true},    {Column::sleep, "SLEEP%", 6, 4, true},
        {Column::sleeps, "SLP/s", 6, 5, true},  {Column::wakes, "WAKE/s", 6, 4, true},
        {Column::p50, "P50", 7, 6, true},       {Column::p99, "P99", 7, 5, true},
        {Column::rings, "RINGS", 5, 3, true},   {Column::sqes, "SQE/s", 7, 2, true},
        {Column::fairness, "FAIR", 5, 4, true}, {Column::history, "HISTORY", 8, 7, false},
    };
    return cols;
}

std::optional<Column> column_by_name(const std::string& name) {
    for (const auto& c : thread_columns())
        if (column_name(c.id) == name) return c.id;
    return std::nullopt;
}

std::string column_name(Column c) {
    static const char* names[] = {"tid",   "pid",   "comm",     "container", "cpu", "work",
                                  "spin",  "sleep", "sleeps",   "wakes",     "p50", "p99",
                                  "rings", "sqes",  "fairness", "history"};
    return names[static_cast<int>(c)];
}

void History::add(const Snapshot& s) {
    if (s.seq == last_seq_) return;
    last_seq_ = s.seq;
    std::map<std::int32_t, std::deque<double>> next;
    for (const auto& t : s.threads) {
        auto& d = next[t.tid];
        if (auto it = cpu_.find(t.tid); it != cpu_.end()) d = std::move(it->second);
        d.push_back(t.cpu_util);
        if (d.size() > kDepth) d.pop_front();
    }
    cpu_ = std::move(next);
}

const std::deque<double>* History::cpu(std::int32_t tid) const {
    auto it = cpu_.find(tid);
    return it == cpu_.end() ? nullptr : &it->second;
}

std::string short_container(const std::string& container_id) {
    if (container_id.empty()) return "-";
    const auto scheme = container_id.find("://");
    const auto id = scheme == std::string::npos ? container_id : container_id.substr(scheme + 3);
    return id.substr(0, 12);  // as docker ps and crictl ps show it
}

bool thread_matches(const ThreadSnapshot& t, const std::string& filter) {
    if (filter.empty() || std::to_string(t.tid) == filter) return true;
    // A per-CPU shared thread is no tenant's: found by its tid or as "percpu", not its creator.
    if (t.shared_percpu) return filter == "percpu";
    return std::to_string(t.pid) == filter || t.comm.find(filter) != std::string::npos ||
           text::cgroup_matches(t.cgroup, filter);
}

std::vector<const ThreadSnapshot*> visible_threads(const Snapshot& s, const ViewState& v) {
    std::vector<const ThreadSnapshot*> out;
    for (const auto& t : s.threads) {
        if (!thread_matches(t, v.filter)) continue;
        out.push_back(&t);
    }
    std::stable_sort(out.begin(), out.end(), [&](const ThreadSnapshot* a, const ThreadSnapshot* b) {
        if (v.sort == Column::comm) return v.descending ? a->comm > b->comm : a->comm < b->comm;
        if (v.sort == Column::container) {
            const auto &x = a->cgroup.container_id, &y = b->cgroup.container_id;
            return v.descending ? x > y : x < y;
        }
        double x = sort_value(*a, v.sort), y = sort_value(*b, v.sort);
        if (x == y) return a->tid < b->tid;
        return v.descending ? x > y : x < y;
    });
    return out;
}

std::string human_rate(double v) {
    if (v < 0) return "-";
    if (v < 1000) return fmt(v < 10 && v != std::floor(v) ? "%.1f" : "%.0f", v);
    if (v < 1e6) return fmt("%.1fk", v / 1e3);
    if (v < 1e9) return fmt("%.1fM", v / 1e6);
    return fmt("%.1fG", v / 1e9);
}

std::string thousands(std::size_t n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string human_seconds(double s) {
    if (s < 0) return "-";
    if (s < 1e-6) return fmt("%.0fns", s * 1e9);
    if (s < 1e-3) return fmt("%.1fus", s * 1e6);
    if (s < 1) return fmt("%.1fms", s * 1e3);
    return fmt("%.2fs", s);
}

std::string sparkline(const std::deque<double>& values, std::size_t width, bool utf8) {
    static const char* blocks[] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                   "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii[] = " .:-=+*#%@";
    std::string out;
    std::size_t n = std::min(width, values.size());
    for (std::size_t i = values.size() - n; i < values.size(); ++i) {
        double v = std::clamp(values[i], 0.0, 1.0);  // fraction of one CPU
        if (utf8)
            out += blocks[static_cast<int>(std::lround(v * 8))];
        else
            out += ascii[static_cast<int>(std::lround(v * 9))];
    }
    return out;
}

std::string field_safe(const std::string& comm) {
    std::string out = comm;
    for (char& c : out) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f)
            c = '?';
        else if (c == ' ')
            c = '_';
    }
    return out;
}

namespace {

std::string probe_tiers(const Snapshot& s, int& attached) {
    attached = 0;
    std::set<std::string> kinds;
    bool gated = false;
    for (const auto& p : s.probes)
        if (p.attached) {
            ++attached;
            kinds.insert(p.kind);
            gated = gated || p.gated;
        }
    std::string tiers;
    for (const auto& k : kinds) tiers += (tiers.empty() ? "" : ",") + k;
    // The scheduler gate: sleeps come from switch counts, wakers and wake latency stop.
    return gated ? tiers + "; sched gated" : tiers;
}

// Where, what is attached, totals.
std::vector<std::string> header_lines(const Snapshot& s, const ViewState& v) {
    char when[32] = "";
    std::time_t t = static_cast<std::time_t>(s.timestamp);
    std::tm tm{};
    if (localtime_r(&t, &tm)) std::strftime(when, sizeof when, "%H:%M:%S", &tm);
    double cpu = 0, work = 0, spin = 0, sqe_rate = 0, cqe_rate = 0;
    for (const auto& th : s.threads) {
        cpu += th.cpu_util;
        work += th.work_util;
        spin += th.spin_util;
    }
    for (const auto& r : s.rings) {
        sqe_rate += r.sqe_rate;
        cqe_rate += r.cqe_rate;
    }
    int attached = 0;
    const std::string tiers = probe_tiers(s, attached);
    return {"iouscope top - " + s.hostname + "  kernel " + s.kernel + "  " + when + "  every " +
                fmt("%.1fs", v.refresh_seconds) + (v.paused ? "  [PAUSED]" : ""),
            "SQ threads " + thousands(s.threads.size()) + "  rings " + thousands(s.rings.size()) +
                "  SQE/s " + human_rate(sqe_rate) + "  CQE/s " + human_rate(cqe_rate) +
                "  SQ CPU " + fmt("%.2f", cpu) + " cores (work " + fmt("%.2f", work) + ", spin " +
                fmt("%.2f", spin) + ")",
            "probes " + std::to_string(attached) + "/" + std::to_string(s.probes.size()) + " (" +
                tiers + ")  source " + v.source +
                (v.filter.empty() ? "" : "  filter \"" + v.filter + "\"") + "  sort " +
                column_name(v.sort) + (v.descending ? " desc" : " asc")};
}

const char* const kHelp[] = {
    "keys:  q quit   Tab threads/IOPOLL/requests view   Enter expand/collapse rings",
    "       Up/Down PgUp/PgDn Home/End select   < > sort column   r reverse sort   / filter "
    "(pid, comm, container, pod)",
    "       p pause   + - refresh interval   h or ? this help",
    "columns: CPU% = WORK% + SPIN% of one CPU over the last interval (~ = estimated",
    "       work), SLEEP% time asleep, SLP/s WAKE/s transitions, P50 P99 wake latency,",
    "       FAIR Jain's index over rings with demand, HISTORY CPU over time."};

// The help, below the column titles.
void insert_help(std::vector<std::string>& lines, int width) {
    std::size_t at = std::min<std::size_t>(4, lines.size());
    std::vector<std::string> overlay;
    for (const char* l : kHelp) overlay.push_back(pad(l, width, false));
    lines.insert(lines.begin() + static_cast<long>(at), overlay.begin(), overlay.end());
}

// Fits the lines to the screen's height, the status line last.
void fit_with_status(std::vector<std::string>& lines, const ViewState& v, int width, int height) {
    std::string status = v.editing ? "filter: " + v.editing_filter + "_"
                                   : "q quit  Tab view  Enter expand  <> sort  / filter  "
                                     "p pause  +- interval  h help";
    if (static_cast<int>(lines.size()) > height - 1)
        lines.resize(static_cast<std::size_t>(std::max(height - 1, 0)));
    while (static_cast<int>(lines.size()) < height - 1) lines.push_back(pad("", width, false));
    lines.push_back(pad(status, width, false));
}

}  // namespace

Screen render_screen(const Snapshot& s, const ViewState& v, const History& h, int width, int height,
                     bool utf8) {
    width = std::max(width, 20);
    Screen out;
    out.lines = header_lines(s, v);
    const int help_lines = v.help ? static_cast<int>(std::size(kHelp)) : 0;
    // The body's lines: all it has in batch mode; on a screen, what the header, the help and
    // the status line leave.
    const int space =
        height > 0 ? std::max(height - 1 - static_cast<int>(out.lines.size()) - help_lines, 1) : -1;
    if (v.view == View::threads) {
        auto body = text::thread_body(s, v, h, width, space, utf8);
        out.lines.insert(out.lines.end(), body.lines.begin(), body.lines.end());
        if (body.selected_line >= 0)
            out.selected_line = 3 + body.selected_line + (body.selected_line > 0 ? help_lines : 0);
        out.selected = body.selected;
        out.first = body.first;
    } else {
        const auto body = v.view == View::polling ? text::polling_body(s, v, space)
                                                  : text::requests_body(s, v, space);
        out.lines.insert(out.lines.end(), body.begin(), body.end());
    }
    for (auto& l : out.lines) l = pad(std::move(l), width, false);
    if (v.help) insert_help(out.lines, width);
    if (height > 0) fit_with_status(out.lines, v, width, height);
    if (out.selected_line >= static_cast<int>(out.lines.size()) - (height > 0 ? 1 : 0))
        out.selected_line = -1;
    return out;
}

std::vector<std::string> render(const Snapshot& s, const ViewState& v, const History& h, int width,
                                int height, bool utf8) {
    return render_screen(s, v, h, width, height, utf8).lines;
}

}  // namespace iouscope::top
