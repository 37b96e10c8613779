#pragma once
// What `iouscope top` shows, as plain lines of text: no terminal involved, so every layout
// decision (columns, sorting, filtering, narrow terminals) is unit-tested from fixed snapshots.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/snapshot.hpp"

namespace iouscope::top {

enum class View { threads, polling, requests };

// Sortable thread columns, in display order.
enum class Column {
    tid,
    pid,
    comm,
    container,
    cpu,
    work,
    spin,
    sleep,
    sleeps,
    wakes,
    p50,
    p99,
    rings,
    sqes,
    fairness,
    history
};

struct ColumnInfo {
    Column id;
    const char* title;
    int width;     // display width, the last column (history) stretches
    int priority;  // lower survives longer when the terminal is narrow
    bool numeric;  // right-aligned
};
const std::vector<ColumnInfo>& thread_columns();
// Parses a column name as given to --sort ("cpu", "spin", ...); nullopt if unknown.
std::optional<Column> column_by_name(const std::string& name);
std::string column_name(Column c);

struct ViewState {
    View view = View::threads;
    Column sort = Column::cpu;
    bool descending = true;
    std::string filter;               // substring of comm, or exact pid; empty = everything
    std::set<std::int32_t> expanded;  // SQ threads whose rings are listed
    bool expand_all = false;          // every SQ thread's rings are listed (batch mode)
    // Thread rows (IOPOLL rings in that view) listed at most, the first by the sort order, and
    // one line sums up the rest; 0 = no limit but the screen's height, where there is one.
    int limit = 0;
    int ring_limit = 0;  // rings listed under a thread, the busiest first; 0 = all
    int selected = 0;    // index into the visible thread rows
    int first = 0;       // the first row shown when the rows scroll (see Screen::first)
    bool paused = false;
    bool help = false;
    double refresh_seconds = 1.0;
    std::string source;          // "daemon http://..." or "in-process"
    std::string editing_filter;  // non-empty while the user types a filter ("/" pressed)
    bool editing = false;
};

// Per-thread CPU history for the sparkline; fed once per new snapshot.
class History {
public:
    static constexpr std::size_t kDepth = 64;
    void add(const Snapshot& s);
    const std::deque<double>* cpu(std::int32_t tid) const;

private:
    std::uint64_t last_seq_ = 0;
    std::map<std::int32_t, std::deque<double>> cpu_;
};

// Threads in display order after filtering and sorting.
std::vector<const ThreadSnapshot*> visible_threads(const Snapshot& s, const ViewState& v);
// The filter: a pid or tid exactly, part of the comm or container id, or the start of a pod UID.
bool thread_matches(const ThreadSnapshot& t, const std::string& filter);

// One full screen, exactly `height` lines of at most `width` columns (fewer lines if height <= 0
// means "unbounded", as batch mode wants). `utf8` allows block characters in sparklines.
std::vector<std::string> render(const Snapshot& s, const ViewState& v, const History& h, int width,
                                int height, bool utf8);

// render's lines, and where the selected thread row went: the interactive loop highlights it
// and keeps `first` and `selected` for the next frame, so the list scrolls to follow the selection.
struct Screen {
    std::vector<std::string> lines;
    int selected_line = -1;  // index into lines, -1 when no thread row is selected
    int selected = 0;        // ViewState::selected, within the rows there are
    int first = 0;           // the first thread row shown
};
Screen render_screen(const Snapshot& s, const ViewState& v, const History& h, int width, int height,
                     bool utf8);

// Formatting helpers, exposed for tests.
std::string human_rate(double per_second);  // 999, 1.23k, 45.6M
std::string thousands(std::size_t n);       // 9950 -> "9,950"
std::string human_seconds(double seconds);  // 850ns, 12.3us, 1.20ms, 1.05s, "-" if < 0
std::string sparkline(const std::deque<double>& values, std::size_t width, bool utf8);
// Makes a process name safe for one whitespace-separated field: control characters become '?',
// spaces '_'.
std::string field_safe(const std::string& comm);
// A container id as `docker ps` and `crictl ps` show it: the first 12 hex digits; "-" for none.
std::string short_container(const std::string& container_id);

}  // namespace iouscope::top
