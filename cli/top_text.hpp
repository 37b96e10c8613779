#pragma once
// What the parts of top's view share (cli/top_view, cli/top_threads, cli/top_polling,
// cli/top_requests): text helpers and the three views' bodies, which render() puts under the
// header. Internal to the view.
#include <span>
#include <string>
#include <vector>

#include "cli/top_view.hpp"

namespace iouscope::top::text {

std::string fmt(const char* f, double v);  // snprintf of one double
// Display width of UTF-8 text: one column per code point.
std::size_t display_width(const std::string& s);
// Cuts or pads to exactly `width` columns, padding on the left when `right`-aligned.
std::string pad(std::string s, int width, bool right);
// The part of the filter that threads and rings share: part of the container id, or the start
// of the pod UID.
bool cgroup_matches(const CgroupLabels& c, const std::string& filter);
// The filter for rings: the owner's pid exactly, part of its comm, or its container or pod.
bool ring_matches(const RingSnapshot& r, const std::string& filter);

// A fixed-width table: titles and widths declared once per table.
struct TableColumn {
    const char* title;
    int width;  // 0: the last column, as long as its text
    bool numeric;
};
std::string table_row(std::span<const TableColumn> cols, const std::vector<std::string>& cells);
std::string table_head(std::span<const TableColumn> cols);

// A view's lines below the header. `space` is how many lines it may take, -1 for no bound (batch
// mode); a line sums up the rows that the limit or the space leaves out.
struct Body {
    std::vector<std::string> lines;
    int selected_line = -1;  // index into lines of the selected thread row
    int selected = 0;        // the selected row, within the rows there are
    int first = 0;           // the first row shown
};
// The threads view: column titles, then one line per thread, each followed by its rings when
// expanded (the busiest first, at most ViewState::ring_limit).
Body thread_body(const Snapshot& s, const ViewState& v, const History& h, int width, int space,
                 bool utf8);
// The polling view: rings that poll, the busiest first, then NVMe devices.
std::vector<std::string> polling_body(const Snapshot& s, const ViewState& v, int space);
// The requests view (request tier): rings with requests counted, those with stuck requests
// first, then the busiest; a line sums up the rest.
std::vector<std::string> requests_body(const Snapshot& s, const ViewState& v, int space);

}  // namespace iouscope::top::text
