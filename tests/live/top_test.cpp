// Live tests of `iouscope top`: batch output against a real daemon, and the interactive view
// driven inside tmux (send-keys, capture-pane).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/live/harness.hpp"

using namespace live;
using namespace std::chrono;

namespace {

std::string top_bin() {
    return build_dir() + "/iouscope";
}

std::string run_capture(const std::string& cmd) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
    return out;
}

std::vector<std::string> split_ws(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

class Top : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root to run the daemon";
        if (!std::filesystem::exists("/sys/kernel/btf/vmlinux")) GTEST_SKIP() << "no BTF";
        daemon_ = std::make_unique<Daemon>(std::vector<std::string>{"--sample.interval=250ms"});
        ASSERT_TRUE(daemon_->ready()) << daemon_->startup_log();
        base_ = daemon_->url().substr(0, daemon_->url().size() - std::string("/metrics").size());
        load_ = std::make_unique<Child>(
            std::vector<std::string>{build_dir() + "/iouscope-load", "--ring", "sqpoll,rate=2000",
                                     "--ring", "sqpoll,share=0,rate=500", "--duration", "20s"});
        auto setup = read_load_rings(*load_, "setup", "started", seconds(10));
        ASSERT_EQ(setup.size(), 2u);
        tid_ = std::to_string(setup[0].sq_thread);
        std::this_thread::sleep_for(milliseconds(700));  // a few samples with rates
    }
    std::unique_ptr<Daemon> daemon_;
    std::unique_ptr<Child> load_;
    std::string base_, tid_;
};

}  // namespace

TEST_F(Top, BatchOutputIsExactAndParseable) {
    Child top(
        {top_bin(), "top", "-b", "-n", "2", "-d", "0.3", "--width", "160", "--daemon", base_});
    std::string out = top.drain(seconds(20));
    ASSERT_EQ(top.wait(seconds(5)), std::optional<int>(0)) << out;
    // Two blocks, each ending with a blank line.
    std::vector<std::vector<std::string>> blocks(1);
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) {
            blocks.emplace_back();
            continue;
        }
        blocks.back().push_back(line);
    }
    blocks.pop_back();
    ASSERT_EQ(blocks.size(), 2u) << out;
    for (const auto& b : blocks) {
        ASSERT_GE(b.size(), 5u);
        EXPECT_EQ(b[0].rfind("iouscope top - ", 0), 0u);
        auto head = split_ws(b[3]);
        ASSERT_GE(head.size(), 14u) << b[3];
        EXPECT_EQ(head[0], "TID");
        std::size_t sqe_col = 0, rings_col = 0;
        for (std::size_t i = 0; i < head.size(); ++i) {
            if (head[i] == "SQE/s") sqe_col = i;
            if (head[i] == "RINGS") rings_col = i;
        }
        ASSERT_GT(sqe_col, 0u);
        bool found = false;
        int ring_lines = 0;
        for (std::size_t i = 4; i < b.size(); ++i) {
            auto f = split_ws(b[i]);
            if (f.size() > sqe_col && f[0] == tid_) {
                found = true;
                // 2500 SQE/s offered: printed as e.g. "2.5k".
                EXPECT_NE(f[sqe_col], "0") << b[i];
                EXPECT_NE(f[sqe_col].find('k'), std::string::npos) << b[i];
                EXPECT_EQ(f[rings_col], "2") << b[i];
            }
            if (f.size() > 1 && f[0] == "+" && f[1] == "ring") ++ring_lines;
        }
        EXPECT_TRUE(found) << "thread " << tid_ << " missing:\n" << out;
        EXPECT_GE(ring_lines, 2);
    }
}

TEST_F(Top, JsonLinesParseAsSnapshots) {
    Child top({top_bin(), "top", "--json", "-n", "2", "-d", "0.3", "--daemon", base_});
    std::string out = top.drain(seconds(20));
    ASSERT_EQ(top.wait(seconds(5)), std::optional<int>(0));
    int n = 0;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        ++n;
        EXPECT_EQ(line.front(), '{');
        EXPECT_NE(line.find("\"schema\":1"), std::string::npos);
        EXPECT_NE(line.find("\"tid\":" + tid_), std::string::npos);
    }
    EXPECT_EQ(n, 2);
}

TEST_F(Top, BadFlagsAndNoSourceAreClearErrors) {
    Child bad({top_bin(), "top", "--sort", "bogus"}, true);
    EXPECT_EQ(bad.wait(seconds(5)), std::optional<int>(2));
    EXPECT_NE(bad.drain(seconds(1)).find("unknown sort column \"bogus\""), std::string::npos);
    Child bad2({top_bin(), "top", "-d", "0"}, true);
    EXPECT_EQ(bad2.wait(seconds(5)), std::optional<int>(2));
    // No daemon on that port and no privilege to sample in-process.
    Child unpriv({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                  "--inh-caps=-all", "--bounding-set=-all", top_bin(), "top", "-b", "-n", "1",
                  "--daemon", "http://127.0.0.1:" + std::to_string(free_port())},
                 true);
    EXPECT_EQ(unpriv.wait(seconds(10)), std::optional<int>(1));
    EXPECT_NE(unpriv.drain(seconds(1)).find("Start iouscoped, or run iouscope top as root"),
              std::string::npos);
}

TEST_F(Top, InteractiveInTmuxSortsFiltersAndRestoresTheTerminal) {
    if (system("command -v tmux >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux not installed";
    const std::string sock = "iouscope-test-" + std::to_string(getpid());
    const std::string tmux = "tmux -L " + sock + " ";
    auto dir = std::filesystem::temp_directory_path() / sock;
    std::filesystem::create_directories(dir);
    auto pane = [&] { return run_capture(tmux + "capture-pane -p -t t"); };
    auto keys = [&](const std::string& k) { system((tmux + "send-keys -t t " + k).c_str()); };

    ASSERT_EQ(system((tmux + "new-session -d -s t -x 120 -y 30 'bash --norc --noprofile'").c_str()),
              0);
    std::string cmd = "stty -g > " + (dir / "before").string() + "; " + top_bin() +
                      " top -d 0.25 --daemon " + base_ + "; stty -g > " + (dir / "after").string() +
                      "; echo TOP-$((6*7))-EXITED";
    keys("'" + cmd + "' Enter");

    EXPECT_TRUE(eventually(seconds(10), [&] {
        auto p = pane();
        return p.find(tid_) != std::string::npos && p.find("sort cpu desc") != std::string::npos;
    })) << pane();
    // The thread's row carries a non-zero SQE/s in thousands.
    {
        auto p = pane();
        std::istringstream in(p);
        std::string line;
        bool ok = false;
        while (std::getline(in, line)) {
            auto f = split_ws(line);
            if (!f.empty() && f[0] == tid_)
                for (const auto& w : f) ok = ok || (w.size() > 1 && w.back() == 'k');
        }
        EXPECT_TRUE(ok) << p;
    }

    keys("'>'");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        return pane().find("sort work desc") != std::string::npos;
    })) << pane();
    keys("r");
    EXPECT_TRUE(
        eventually(seconds(5), [&] { return pane().find("sort work asc") != std::string::npos; }));

    keys("/ nomatch Enter");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        return pane().find("no SQ thread matches the filter") != std::string::npos;
    })) << pane();
    keys("/ BSpace BSpace BSpace BSpace BSpace BSpace BSpace " + tid_ + " Enter");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        auto p = pane();
        return p.find("filter \"" + tid_ + "\"") != std::string::npos &&
               p.find("no SQ thread matches") == std::string::npos;
    })) << pane();

    keys("Tab");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        return pane().find("no IOPOLL ring is open") != std::string::npos;
    })) << pane();
    // Then the requests view (no request tier here), and back to the threads.
    keys("Tab");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        auto p = pane();
        return p.find("REQ/s") != std::string::npos &&
               p.find("no ring's requests are counted") != std::string::npos;
    })) << pane();
    keys("Tab");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        auto p = pane();
        return p.find(tid_) != std::string::npos && p.find("REQ/s") == std::string::npos;
    })) << pane();

    keys("q");
    EXPECT_TRUE(eventually(seconds(5), [&] {
        return pane().find("TOP-42-EXITED") != std::string::npos;
    })) << pane();
    std::ifstream a(dir / "before"), b(dir / "after");
    std::string sa, sb;
    std::getline(a, sa);
    std::getline(b, sb);
    EXPECT_FALSE(sa.empty());
    EXPECT_EQ(sa, sb) << "terminal settings differ after quitting";
    system((tmux + "kill-server").c_str());
    std::filesystem::remove_all(dir);
}

// Beside 60 idle SQ threads and 500 plain rings, batch mode lists 20 threads, the load's busy one
// among them with its rings, and one line sums up the rest: as many as the header counts less
// the 20 listed.
TEST_F(Top, ManyThreadsListTwentyAndOneLineSumsUpTheRest) {
    Child idle({build_dir() + "/iouscope-load", "--ring", "sqpoll,count=1,n=60", "--ring",
                "plain,count=1,n=500", "--hold", "30s"});
    ASSERT_EQ(read_load_rings(idle, "ring", "done", seconds(20)).size(), 560u);
    std::vector<std::string> lines;
    std::size_t threads = 0;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        Child top({top_bin(), "top", "-b", "-n", "1", "--width", "160", "--daemon", base_});
        std::istringstream in(top.drain(seconds(10)));
        lines.clear();
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (top.wait(seconds(5)) != std::optional<int>(0) || lines.size() < 2) return false;
        const auto head = split_ws(lines[1]);  // SQ threads N  rings M ...
        if (head.size() < 3) return false;
        std::string n = head[2];
        std::erase(n, ',');
        threads = std::stoul(n);
        return threads >= 61;  // theirs and the fixture's one (its rings share it)
    })) << (lines.size() > 1 ? lines[1] : "no output");
    std::size_t rows = 0, ring_lines = 0;
    bool found = false;
    std::string rest;
    for (std::size_t i = 4; i < lines.size(); ++i) {
        const auto f = split_ws(lines[i]);
        if (f.empty()) continue;
        if (f[0] == "...") rest = lines[i];
        if (f[0] == "+") ++ring_lines;
        if (std::isdigit(static_cast<unsigned char>(f[0][0]))) ++rows;
        found = found || f[0] == tid_;
    }
    EXPECT_EQ(rows, 20u);
    EXPECT_GE(ring_lines, 20u);
    EXPECT_TRUE(found) << "thread " << tid_ << " is not among the busiest";
    EXPECT_EQ(rest.rfind("... and " + std::to_string(threads - 20) + " more SQ threads: ", 0), 0u)
        << rest;
}

// The requests view with the request tier on: the ring with a read that never completes comes
// first, with it counted stuck; the ring whose every NOP is forced to io-wq shows 100 % punted
// and its process's workers; both name their opcodes.
TEST(TopRequestsView, BatchListsStuckRingsFirstWithTheirPuntsAndOpcodes) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the daemon";
    Daemon d({"--sample.interval=250ms", "--probes.requests", "--requests.stuck-after=1s"});
    ASSERT_TRUE(d.ready()) << d.startup_log();
    REQUIRE_PROBE(d, probe_attached(d, "req_submit"), "req_submit");
    Child load({build_dir() + "/iouscope-load", "--ring", "plain,async,rate=2000", "--ring",
                "plain,stuck=1,rate=100", "--duration", "20s"});
    const auto rings = read_load_rings(load, "setup", "started", seconds(10));
    ASSERT_EQ(rings.size(), 2u);
    const std::string base = d.url().substr(0, d.url().size() - std::string("/metrics").size());
    std::string out;
    const auto line_of = [&](const LoadRing& r) {
        std::istringstream in(out);
        std::string line;
        while (std::getline(in, line))
            if (line.rfind(r.id() + " ", 0) == 0) return line;
        return std::string();
    };
    ASSERT_TRUE(eventually(seconds(10), [&] {
        out = run_capture(top_bin() + " top -b -n 1 --view requests --width 160 --daemon " + base);
        const auto stuck = split_ws(line_of(rings[1]));
        return stuck.size() > 9 && stuck[9] == "1";
    })) << out;
    const auto first_row = out.find(rings[1].id() + " ");
    EXPECT_LT(first_row, out.find(rings[0].id() + " ")) << out;
    const auto punts = split_ws(line_of(rings[0]));
    ASSERT_GT(punts.size(), 11u) << out;
    EXPECT_EQ(punts[5], "100.0") << out;
    EXPECT_NE(punts[6], "-") << out;  // the process's io-wq workers
    EXPECT_EQ(punts[11], "nop") << out;
    EXPECT_NE(line_of(rings[1]).find("read"), std::string::npos) << out;
    load.signal(SIGTERM);
    load.wait(seconds(10));
}
