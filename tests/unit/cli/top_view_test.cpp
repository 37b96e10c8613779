#include "cli/top_view.hpp"

#include <gtest/gtest.h>

using namespace iouscope;
using namespace iouscope::top;

namespace {

ThreadSnapshot thread(std::int32_t tid, const std::string& comm, double cpu, double spin,
                      double sqe_rate) {
    ThreadSnapshot t;
    t.tid = tid;
    t.pid = static_cast<std::uint32_t>(tid - 1);
    t.comm = comm;
    t.cpu_util = cpu;
    t.spin_util = spin;
    t.work_util = cpu - spin;
    t.sqe_rate = sqe_rate;
    t.rings = 1;
    t.work_source = WorkSource::kernel;
    return t;
}

Snapshot fixture() {
    Snapshot s;
    s.hostname = "db1";
    s.kernel = "6.18.0";
    s.seq = 5;
    s.threads = {thread(100, "postgres", 0.98, 0.90, 1500), thread(200, "fio", 0.40, 0.10, 90000),
                 thread(300, "scylla", 0.70, 0.65, 20)};
    RingSnapshot r;
    r.id = "199:7";
    r.mode = "sqpoll";
    r.sq_thread = 200;
    r.sqe_rate = 90000;
    r.sqthread_share = 1;
    s.rings.push_back(r);
    RingSnapshot io = r;
    io.id = "299:4";
    io.mode = "iopoll";
    io.sq_thread = -1;
    io.comm = "nvmebench";
    s.rings.push_back(io);
    s.probes = {{"iter_rings", "iter", true, ""}, {"sched_switch", "tp_btf", true, ""}};
    return s;
}

std::vector<std::int32_t> order(const Snapshot& s, const ViewState& v) {
    std::vector<std::int32_t> out;
    for (const auto* t : visible_threads(s, v)) out.push_back(t->tid);
    return out;
}

// The data line of a thread: the line that starts with its tid after padding.
std::string line_of(const std::vector<std::string>& lines, const std::string& tid) {
    for (const auto& l : lines) {
        auto first = l.find_first_not_of(' ');
        if (first != std::string::npos && l.compare(first, tid.size() + 1, tid + " ") == 0)
            return l;
    }
    return "";
}

}  // namespace

TEST(TopView, SortsByEveryNumericColumnBothWays) {
    auto s = fixture();
    ViewState v;
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{100, 300, 200}));  // cpu desc
    v.sort = Column::spin;
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{100, 300, 200}));
    v.sort = Column::sqes;
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{200, 100, 300}));
    v.descending = false;
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{300, 100, 200}));
    v.sort = Column::comm;
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{200, 100, 300}));
}

TEST(TopView, FiltersByCommPidOrTid) {
    auto s = fixture();
    ViewState v;
    v.filter = "gres";
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{100}));
    v.filter = "199";  // pid of tid 200
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{200}));
    v.filter = "300";
    EXPECT_EQ(order(s, v), (std::vector<std::int32_t>{300}));
    v.filter = "nothing";
    auto lines = render(s, v, History{}, 120, 0, false);
    bool said = false;
    for (const auto& l : lines) said = said || l.find("no SQ thread matches the filter") == 0;
    EXPECT_TRUE(said);
}

TEST(TopView, WideScreenShowsEveryColumnWithValues) {
    auto s = fixture();
    ViewState v;
    auto lines = render(s, v, History{}, 160, 0, false);
    std::string head = lines.at(3);
    for (const auto& c : thread_columns())
        EXPECT_NE(head.find(c.title), std::string::npos) << c.title;
    std::string row = line_of(lines, "100");
    ASSERT_FALSE(row.empty());
    EXPECT_NE(row.find("postgres"), std::string::npos);
    EXPECT_NE(row.find(" 98.0"), std::string::npos);
    EXPECT_NE(row.find(" 90.0"), std::string::npos);
    EXPECT_NE(row.find("1.5k"), std::string::npos);
    EXPECT_NE(lines.at(1).find("SQ threads 3"), std::string::npos);
}

TEST(TopView, TheHeaderSaysWhenTheSchedulerGateHasTheSchedProgramsOff) {
    auto s = fixture();
    ViewState v;
    EXPECT_EQ(render(s, v, History{}, 160, 0, false).at(2).find("sched gated"), std::string::npos);
    s.probes[1].gated = true;
    EXPECT_NE(
        render(s, v, History{}, 160, 0, false).at(2).find("probes 2/2 (iter,tp_btf; sched gated)"),
        std::string::npos);
}

TEST(TopView, NarrowScreensDropLowPriorityColumnsAndNeverOverflow) {
    auto s = fixture();
    ViewState v;
    for (int width : {40, 60, 80, 100}) {
        auto lines = render(s, v, History{}, width, 24, false);
        ASSERT_EQ(lines.size(), 24u) << width;
        for (const auto& l : lines) EXPECT_EQ(l.size(), static_cast<std::size_t>(width)) << l;
        // The essentials survive even at 40 columns.
        EXPECT_NE(lines.at(3).find("TID"), std::string::npos) << width;
        EXPECT_NE(lines.at(3).find("CPU%"), std::string::npos) << width;
    }
    auto at80 = render(s, v, History{}, 80, 24, false);
    EXPECT_EQ(at80.at(3).find("P50"), std::string::npos);  // dropped first
    EXPECT_NE(at80.at(3).find("SPIN%"), std::string::npos);
}

TEST(TopView, ShortScreensTruncateAndKeepTheStatusLine) {
    auto s = fixture();
    ViewState v;
    auto lines = render(s, v, History{}, 80, 6, false);
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines.back().rfind("q quit", 0), 0u);
}

TEST(TopView, ExpandedThreadListsItsRings) {
    auto s = fixture();
    ViewState v;
    v.expanded.insert(200);
    auto lines = render(s, v, History{}, 120, 0, false);
    bool found = false;
    for (const auto& l : lines) found = found || l.find("+ ring 199:7") != std::string::npos;
    EXPECT_TRUE(found);
}

TEST(TopView, PollingViewListsIopollRings) {
    auto s = fixture();
    ViewState v;
    v.view = View::polling;
    auto lines = render(s, v, History{}, 120, 0, false);
    bool found = false;
    for (const auto& l : lines) found = found || l.rfind("299:4", 0) == 0;
    EXPECT_TRUE(found);
}

TEST(TopView, PollingViewShowsPollEfficiencyAndTheNoPollQueuesWarning) {
    auto s = fixture();
    IopollSnapshot io;
    io.caller = "app";
    io.calls_rate = 250000;
    io.empty_ratio = 0.75;
    io.completions_per_call = 0.25;
    s.rings[1].iopoll.push_back(io);
    DeviceSnapshot good, bad;
    good.name = "nvme0n1";
    good.completions_rate = 9500;
    good.polled_ratio = 1;
    good.polls_per_completion = 3.5;
    bad.name = "nvme1n1";
    bad.completions_rate = 2400;
    bad.iopoll_without_poll_queues = true;
    s.devices = {good, bad};
    ViewState v;
    v.view = View::polling;
    auto lines = render(s, v, History{}, 140, 0, false);
    std::string ring, dev0, dev1;
    for (const auto& l : lines) {
        if (l.rfind("299:4", 0) == 0) ring = l;
        if (l.rfind("nvme0n1", 0) == 0) dev0 = l;
        if (l.rfind("nvme1n1", 0) == 0) dev1 = l;
    }
    EXPECT_NE(ring.find("250.0k"), std::string::npos) << ring;
    EXPECT_NE(ring.find("75.0"), std::string::npos) << ring;
    EXPECT_NE(ring.find("0.25"), std::string::npos) << ring;
    EXPECT_NE(dev0.find("100.0"), std::string::npos) << dev0;
    EXPECT_NE(dev0.find("3.50"), std::string::npos) << dev0;
    EXPECT_EQ(dev0.find("NO POLL QUEUES"), std::string::npos);
    EXPECT_NE(dev1.find("NO POLL QUEUES"), std::string::npos) << dev1;
}

TEST(TopView, PollingViewTablesKeepTheirColumns) {
    auto s = fixture();
    DeviceSnapshot bad;
    bad.name = "nvme1n1";
    bad.iopoll_without_poll_queues = true;
    s.devices = {bad};
    ViewState v;
    v.view = View::polling;
    const auto lines = render(s, v, History{}, 200, 0, false);
    auto line_starting = [&](const std::string& prefix) {
        for (const auto& l : lines)
            if (l.rfind(prefix, 0) == 0) return l.substr(0, l.find_last_not_of(' ') + 1);
        return std::string();
    };
    EXPECT_EQ(line_starting("RING"),
              "RING           COMM         MODE     CQE/s CALLER     POLLS/s EMPTY% CQE/POLL "
              "BACKLOG");
    EXPECT_EQ(line_starting("DEVICE"),
              "DEVICE       CMPL/s POLLED% POLLS/CMPL      P50      P99  NOTE");
    EXPECT_NE(line_starting("nvme1n1").find("0.00        -        -  NO POLL QUEUES"),
              std::string::npos)
        << line_starting("nvme1n1");
}

TEST(TopView, HistoryBuildsASparkline) {
    History h;
    auto s = fixture();
    for (int i = 0; i < 3; ++i) {
        s.seq = 10 + i;
        s.threads[0].cpu_util = i / 2.0;
        h.add(s);
    }
    ASSERT_NE(h.cpu(100), nullptr);
    EXPECT_EQ(h.cpu(100)->size(), 3u);
    EXPECT_EQ(sparkline(*h.cpu(100), 8, false), " +@");  // 0, 0.5, 1 of a CPU
    EXPECT_EQ(sparkline(*h.cpu(100), 8, true), " \u2584\u2588");
    // A repeated snapshot is not a new point.
    h.add(s);
    EXPECT_EQ(h.cpu(100)->size(), 3u);
}

TEST(TopView, Formatting) {
    EXPECT_EQ(human_rate(999), "999");
    EXPECT_EQ(human_rate(1234), "1.2k");
    EXPECT_EQ(human_rate(2.5e6), "2.5M");
    EXPECT_EQ(human_rate(0.5), "0.5");
    EXPECT_EQ(human_seconds(-1), "-");
    EXPECT_EQ(human_seconds(850e-9), "850ns");
    EXPECT_EQ(human_seconds(12.3e-6), "12.3us");
    EXPECT_EQ(human_seconds(1.2e-3), "1.2ms");
    EXPECT_EQ(field_safe("a b\nc"), "a_b?c");
}

TEST(TopView, UnicodeSparklineIsPaddedByDisplayWidth) {
    auto s = fixture();
    History h;
    for (int i = 0; i < 40; ++i) {
        s.seq = 100 + i;
        h.add(s);
    }
    auto lines = render(s, ViewState{}, h, 100, 0, true);
    for (const auto& l : lines) {
        std::size_t cols = 0;
        for (char c : l) cols += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
        EXPECT_EQ(cols, 100u) << l;
    }
}

TEST(TopContainers, TheColumnShowsTheShortIdAndTheFilterFindsContainersAndPods) {
    EXPECT_EQ(short_container("containerd://" + std::string(64, 'a')), std::string(12, 'a'));
    EXPECT_EQ(short_container(std::string(64, 'b')), std::string(12, 'b'));
    EXPECT_EQ(short_container(""), "-");
    ThreadSnapshot t;
    t.tid = 7;
    t.pid = 6;
    t.comm = "db";
    t.cgroup = {"/kubepods/pod1/x", "cri-o://" + std::string(64, 'c'), "0a1b2c3d-4e5f"};
    EXPECT_TRUE(thread_matches(t, "cccccccccccc"));
    EXPECT_TRUE(thread_matches(t, "cri-o://"));
    EXPECT_TRUE(thread_matches(t, "0a1b2c3d"));
    EXPECT_FALSE(thread_matches(t, "4e5f"));  // a pod UID matches from its start only
    EXPECT_TRUE(thread_matches(t, "6"));
    EXPECT_FALSE(thread_matches(t, "dd"));
}

// Seeds patch 000: a per-CPU shared thread shows neither its creator's pid, comm nor container,
// and a filter on the creator does not find it; its tid and "percpu" do.
TEST(TopView, APerCpuSharedThreadIsShownAsNoTenants) {
    auto s = fixture();
    ThreadSnapshot& t = s.threads[0];  // tid 100, pid 99, postgres
    t.shared_percpu = true;
    t.sq_cpu = 3;
    t.cgroup = {"/kubepods/pod1/x", "cri-o://" + std::string(64, 'c'), "0a1b2c3d-4e5f"};
    const auto lines = render(s, ViewState{}, History{}, 200, 0, false);
    const std::string row = line_of(lines, "100");
    ASSERT_FALSE(row.empty());
    EXPECT_NE(row.find(" percpu cpu 3 "), std::string::npos) << row;
    EXPECT_EQ(row.find("postgres"), std::string::npos) << row;
    EXPECT_EQ(row.find("cccccccccccc"), std::string::npos) << row;
    EXPECT_FALSE(thread_matches(t, std::to_string(t.pid)));
    EXPECT_FALSE(thread_matches(t, "postgres"));
    EXPECT_FALSE(thread_matches(t, "cccccccccccc"));
    EXPECT_TRUE(thread_matches(t, "100"));
    EXPECT_TRUE(thread_matches(t, "percpu"));
}
