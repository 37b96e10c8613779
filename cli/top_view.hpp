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

enum class View { threads, polling };

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
    int selected = 0;                 // index into the visible thread rows
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

// Formatting helpers, exposed for tests.
std::string human_rate(double per_second);  // 999, 1.23k, 45.6M
std::string human_seconds(double seconds);  // 850ns, 12.3us, 1.20ms, 1.05s, "-" if < 0
std::string sparkline(const std::deque<double>& values, std::size_t width, bool utf8);
// Makes a process name safe for one whitespace-separated field: control characters become '?',
// spaces '_'.
std::string field_safe(const std::string& comm);
// A container id as `docker ps` and `crictl ps` show it: the first 12 hex digits; "-" for none.
std::string short_container(const std::string& container_id);

}  // namespace iouscope::top
