// The requests view of `iouscope top` (cli/top_requests.cpp), from fixed snapshots.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/top_view.hpp"

using namespace iouscope;
using namespace iouscope::top;

namespace {

// A plain ring with the request tier's counts: `submitted` NOPs (opcode 0) and `reads` reads
// (opcode 22), `punted` of the NOPs to io-wq, `stuck` requests stuck.
RingSnapshot ring(const std::string& id, std::uint32_t pid, double rate, std::uint64_t submitted,
                  std::uint64_t reads, std::uint64_t punted, std::uint64_t stuck) {
    RingSnapshot r;
    r.id = id;
    r.pid = pid;
    r.comm = "db";
    r.mode = "plain";
    r.sqe_rate = rate;
    r.requests.has_requests = r.requests.timed = true;
    RequestOpSnapshot nop, read;
    nop.opcode = 0;
    nop.submitted = submitted;
    nop.punted = punted;
    read.opcode = 22;
    read.submitted = reads;
    r.requests.ops = {nop, read};
    r.requests.stuck = r.requests.in_flight = stuck;
    r.requests.oldest_age_seconds = stuck ? 12.5 : 0;
    r.requests.has_enters = true;
    r.requests.enters = 100;
    r.requests.enter_sqes = 400;
    return r;
}

Snapshot snapshot() {
    Snapshot s;
    s.hostname = "db1";
    auto names = std::make_shared<std::vector<std::string>>(64);
    (*names)[0] = "nop";
    (*names)[22] = "read";
    s.opcode_names = names;
    s.rings = {ring("10:3", 10, 5000, 900, 100, 450, 0), ring("10:4", 10, 20, 10, 0, 0, 2),
               ring("11:3", 11, 80000, 1000, 0, 0, 0)};
    IowqSnapshot w;
    w.pid = 10;
    w.workers = {3, 4};
    s.iowq = {w};
    return s;
}

std::vector<std::string> body(const Snapshot& s, ViewState v, int height = 0) {
    v.view = View::requests;
    return render(s, v, History{}, 160, height, false);
}

std::string line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
    for (const auto& l : lines)
        if (l.rfind(prefix, 0) == 0) return l.substr(0, l.find_last_not_of(' ') + 1);
    return {};
}

}  // namespace

// Stuck requests first, then the busiest; each ring's punts, workers, SQEs per enter, opcode mix.
TEST(TopRequests, StuckRingsFirstThenTheBusiestWithTheirFigures) {
    const auto lines = body(snapshot(), ViewState{});
    std::vector<std::string> order;
    for (const auto& l : lines)
        for (const char* id : {"10:3", "10:4", "11:3"})
            if (l.rfind(id, 0) == 0) order.push_back(id);
    EXPECT_EQ(order, (std::vector<std::string>{"10:4", "11:3", "10:3"}));
    const std::string busy = line_starting(lines, "10:3");
    EXPECT_NE(busy.find(" 45.0 "), std::string::npos) << busy;  // 450 of 1,000 punted
    EXPECT_NE(busy.find("    7 "), std::string::npos) << busy;  // pid 10's 7 workers
    EXPECT_NE(busy.find(" 4.0 "), std::string::npos) << busy;   // 400 SQEs in 100 calls
    EXPECT_NE(busy.find("nop 90% read 10%"), std::string::npos) << busy;
    const std::string stuck = line_starting(lines, "10:4");
    EXPECT_NE(stuck.find(" 2 "), std::string::npos) << stuck;
    EXPECT_NE(stuck.find("12.5"), std::string::npos) << stuck;
    EXPECT_NE(line_starting(lines, "11:3").find("    - "), std::string::npos);  // no workers
}

// At 10,000 rings the limit lists the first and one line sums up the rest.
TEST(TopRequests, TheLimitListsTheFirstAndALineForTheRest) {
    Snapshot s = snapshot();
    for (int i = 0; i < 10000; ++i)
        s.rings.push_back(ring("20:" + std::to_string(i), 20, 1, 1, 0, 0, i == 9999 ? 1 : 0));
    ViewState v;
    v.limit = 5;
    const auto lines = body(s, v);
    int rows = 0;
    for (const auto& l : lines)
        rows += l.rfind("10:", 0) == 0 || l.rfind("11:", 0) == 0 || l.rfind("20:", 0) == 0;
    EXPECT_EQ(rows, 5);
    EXPECT_FALSE(line_starting(lines, "20:9999").empty()) << "its stuck request puts it in front";
    EXPECT_FALSE(line_starting(lines, "... and 9,998 more rings").empty());
    // On a screen of 20 lines, what fits: the header, the rows, the rest, the footnote.
    v.limit = 0;
    const auto screen = body(s, v, 20);
    EXPECT_EQ(screen.size(), 20u);
    EXPECT_FALSE(line_starting(screen, "... and").empty());
}

TEST(TopRequests, WithoutTheRequestTierItSaysSo) {
    Snapshot s = snapshot();
    for (auto& r : s.rings) r.requests = {};
    const auto lines = body(s, ViewState{});
    EXPECT_FALSE(line_starting(lines, "no ring's requests are counted").empty());
}
