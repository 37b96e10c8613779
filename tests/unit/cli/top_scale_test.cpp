// `iouscope top` at 1,000 SQ threads and 10,000 rings: the first rows by the sort order, one
// line for the rest with its sums exact, and a screen that holds what fits around the selection.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/top_view.hpp"

using namespace iouscope;
using namespace iouscope::top;

namespace {

// Thread i (tid 1000 + i) has CPU i/1000 (spin i/4000) and i SQE/s, and one SQPOLL ring with as
// many; thread 999 (the busiest) also serves `shared` more rings, ring k with k SQE/s. Then `plain`
// rings without an SQ thread.
Snapshot many(int threads, int shared, int plain) {
    Snapshot s;
    s.hostname = "big";
    s.seq = 7;
    for (int i = 0; i < threads; ++i) {
        ThreadSnapshot t;
        t.tid = 1000 + i;
        t.pid = 50;
        t.comm = "db";
        t.cpu_util = i / 1000.0;
        t.spin_util = i / 4000.0;
        t.sqe_rate = i;
        t.rings = 1 + (i == threads - 1 ? shared : 0);
        s.threads.push_back(t);
        RingSnapshot r;
        r.id = "50:" + std::to_string(10 + i);
        r.mode = "sqpoll";
        r.sq_thread = t.tid;
        r.sqe_rate = r.cqe_rate = i;
        s.rings.push_back(r);
    }
    for (int k = 0; k < shared; ++k) {
        RingSnapshot r;
        r.id = "60:" + std::to_string(k);
        r.mode = "sqpoll";
        r.sq_thread = 1000 + threads - 1;
        r.sqe_rate = r.cqe_rate = k;
        r.sq_backlog = 1;
        s.rings.push_back(r);
    }
    for (int k = 0; k < plain; ++k) {
        RingSnapshot r;
        r.id = "70:" + std::to_string(k);
        r.mode = "plain";
        r.sqe_rate = 1;
        s.rings.push_back(r);
    }
    return s;
}

std::string trimmed(std::string l) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    return l;
}

// The tids of the thread rows, in order.
std::vector<int> tids(const std::vector<std::string>& lines) {
    std::vector<int> out;
    for (std::size_t i = 4; i < lines.size(); ++i) {
        const auto f = lines[i].find_first_not_of(' ');
        if (f != std::string::npos && std::isdigit(static_cast<unsigned char>(lines[i][f])))
            out.push_back(std::stoi(lines[i].substr(f)));
    }
    return out;
}

ViewState batch(int limit, int ring_limit) {
    ViewState v;
    v.expand_all = true;
    v.limit = limit;
    v.ring_limit = ring_limit;
    return v;
}

}  // namespace

TEST(TopScale, BatchListsTheFirstThreadsAndOneLineSumsUpTheRestExactly) {
    const auto s = many(1000, 0, 10000);
    const auto lines = render(s, batch(20, 5), History{}, 160, 0, false);
    EXPECT_EQ(trimmed(lines.at(1)).rfind("SQ threads 1,000  rings 11,000  SQE/s ", 0), 0u)
        << lines.at(1);
    std::vector<int> want;
    for (int i = 999; i >= 980; --i) want.push_back(1000 + i);
    EXPECT_EQ(tids(lines), want);
    // Header (3), titles, 20 threads with one ring each, the rest.
    ASSERT_EQ(lines.size(), 3u + 1 + 20 * 2 + 1);
    // Threads 0..979: sum(i) = 479,710, so CPU 479.71 cores, spin 119.93, SQE/s 479.7k, and
    // one ring each.
    EXPECT_EQ(trimmed(lines.back()),
              "... and 980 more SQ threads: CPU 479.71 cores (spin 119.93), SQE/s 479.7k, "
              "980 rings");
    EXPECT_EQ(trimmed(lines.at(5)).rfind("   + ring 50:1009 ", 0), 0u) << lines.at(5);
}

TEST(TopScale, NoLimitListsEveryThreadAndNoRestLine) {
    const auto s = many(1000, 0, 100);
    const auto lines = render(s, batch(0, 0), History{}, 160, 0, false);
    EXPECT_EQ(tids(lines).size(), 1000u);
    EXPECT_EQ(lines.size(), 3u + 1 + 1000 * 2);
    for (const auto& l : lines) EXPECT_EQ(l.find("more SQ thread"), std::string::npos) << l;
}

TEST(TopScale, AThreadListsItsBusiestRingsAndSumsUpTheRest) {
    const auto s = many(3, 1000, 0);  // thread 1002 serves 1,001 rings
    const auto lines = render(s, batch(20, 5), History{}, 160, 0, false);
    std::vector<std::string> rings;
    std::string rest;
    for (std::size_t i = 5; i < lines.size() && lines[i].rfind("   +", 0) == 0; ++i) {
        if (lines[i].find("more rings") != std::string::npos)
            rest = trimmed(lines[i]);
        else
            rings.push_back(lines[i].substr(10, 13));
    }
    EXPECT_EQ(rings, (std::vector<std::string>{"60:999       ", "60:998       ", "60:997       ",
                                               "60:996       ", "60:995       "}));
    // The other 996: shared rings 0..994 (sum 494,515) and the thread's own ring (2 SQE/s),
    // each of the shared ones with a backlog of 1.
    EXPECT_EQ(rest, "   + ... and 996 more rings: SQE/s 494.5k  CQE/s 494.5k  backlog 995");
    // Three threads: none left over, so no line for the rest.
    EXPECT_EQ(tids(lines), (std::vector<int>{1002, 1001, 1000}));
    EXPECT_EQ(trimmed(lines.back()).rfind("   + ring 50:10 ", 0), 0u) << lines.back();
}

TEST(TopScale, TheScreenHoldsWhatFitsAroundTheSelectionAndSaysWhatIsAbove) {
    const auto s = many(1000, 0, 10000);
    ViewState v;
    v.selected = 500;
    const auto screen = render_screen(s, v, History{}, 120, 30, false);
    ASSERT_EQ(screen.lines.size(), 30u);
    // Header, titles, 24 rows, the rest, the status line.
    const auto rows = tids(screen.lines);
    ASSERT_EQ(rows.size(), 24u);
    EXPECT_EQ(screen.first + 23, 500);  // scrolled just far enough
    EXPECT_EQ(rows.back(), 1000 + 999 - 500);
    ASSERT_GE(screen.selected_line, 0);
    EXPECT_EQ(
        tids({"", "", "", "", screen.lines.at(static_cast<std::size_t>(screen.selected_line))}),
        (std::vector<int>{1499}));
    EXPECT_EQ(trimmed(screen.lines.at(28)).rfind("... and 976 more SQ threads (477 above): ", 0),
              0u)
        << screen.lines.at(28);
    EXPECT_EQ(screen.lines.back().rfind("q quit", 0), 0u);

    // The next frame starts where this one did: one row up keeps the rows in place.
    v.first = screen.first;
    v.selected = 499;
    const auto next = render_screen(s, v, History{}, 120, 30, false);
    EXPECT_EQ(next.first, screen.first);
    EXPECT_EQ(next.selected_line, screen.selected_line - 1);
    // --limit holds the screen to fewer rows.
    v = ViewState{};
    v.limit = 10;
    EXPECT_EQ(tids(render(s, v, History{}, 120, 30, false)).size(), 10u);
}

TEST(TopScale, AScreenThatHoldsEverythingHasNoRestLine) {
    const auto s = many(10, 0, 10000);
    const auto screen = render_screen(s, ViewState{}, History{}, 120, 30, false);
    EXPECT_EQ(tids(screen.lines).size(), 10u);
    for (const auto& l : screen.lines) EXPECT_EQ(l.find("more SQ thread"), std::string::npos);
    EXPECT_EQ(screen.selected_line, 4);
}

TEST(TopScale, PollingViewListsTheBusiestIopollRingsAndSumsUpTheRest) {
    Snapshot s;
    for (int k = 0; k < 5000; ++k) {
        RingSnapshot r;
        r.id = "80:" + std::to_string(k);
        r.mode = k % 2 ? "iopoll" : "both";
        r.cqe_rate = k;
        s.rings.push_back(r);
    }
    ViewState v;
    v.view = View::polling;
    v.limit = 20;
    const auto lines = render(s, v, History{}, 160, 0, false);
    std::vector<std::string> ids;
    std::string rest;
    for (const auto& l : lines) {
        if (l.rfind("80:", 0) == 0) ids.push_back(l.substr(0, l.find(' ')));
        if (l.rfind("... and", 0) == 0) rest = trimmed(l);
    }
    ASSERT_EQ(ids.size(), 20u);
    EXPECT_EQ(ids.front(), "80:4999");
    EXPECT_EQ(ids.back(), "80:4980");
    EXPECT_EQ(rest, "... and 4,980 more IOPOLL rings: CQE/s 12.4M");  // sum 0..4979 = 12,397,710

    // On a screen: as many as fit, the rest line and the device table below them.
    v.limit = 0;
    const auto screen = render(s, v, History{}, 160, 24, false);
    ASSERT_EQ(screen.size(), 24u);
    bool devices = false, more = false;
    for (const auto& l : screen) {
        devices = devices || l.rfind("DEVICE", 0) == 0;
        more = more || l.rfind("... and ", 0) == 0;
    }
    EXPECT_TRUE(devices);
    EXPECT_TRUE(more);
}

TEST(TopScale, Thousands) {
    EXPECT_EQ(thousands(0), "0");
    EXPECT_EQ(thousands(999), "999");
    EXPECT_EQ(thousands(9950), "9,950");
    EXPECT_EQ(thousands(1234567), "1,234,567");
}
