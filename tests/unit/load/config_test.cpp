// The run-wide options of iouscope-load (load/config.hpp): durations, hold, the whole command
// line's rules and the order they are checked in, and cpu= against the system's CPUs.
#include "load/config.hpp"

#include <gtest/gtest.h>

#include "parse_result.hpp"

using namespace iouscope::load;
using namespace iouscope::load::test;
using namespace std::chrono;

TEST(LoadDurations, UseTheProjectGrammar) {
    EXPECT_EQ(ok(parse_duration("500ms")), nanoseconds(milliseconds(500)));
    EXPECT_EQ(ok(parse_duration("1.5s")), nanoseconds(milliseconds(1500)));
    EXPECT_NE(err(parse_duration("10")).find("unit"), std::string::npos);
    EXPECT_NE(err(parse_duration("-1s")).find("negative"), std::string::npos);
    EXPECT_TRUE(ok(parse_hold("inf")).forever);
    EXPECT_EQ(ok(parse_hold("2s")).duration, nanoseconds(seconds(2)));
    EXPECT_NE(err(parse_hold("forever")), "<no error>");
}

TEST(LoadConfig, WholeCommandLineRules) {
    RawOptions raw;
    EXPECT_NE(err(build_config(raw)).find("--ring"), std::string::npos);
    raw.rings = {"plain"};
    // No count and no duration: the run would never end.
    EXPECT_NE(err(build_config(raw)), "<no error>");
    raw.duration = "1s";
    auto cfg = ok(build_config(raw));
    EXPECT_EQ(cfg.duration, std::optional<nanoseconds>(seconds(1)));
    raw.op = "read";
    EXPECT_NE(err(build_config(raw)).find("--file"), std::string::npos);
    raw.op = "wrote";
    EXPECT_NE(err(build_config(raw)).find("wrote"), std::string::npos);
    raw.op.reset();
    raw.pause_every = "1s";
    EXPECT_NE(err(build_config(raw)), "<no error>");  // --pause-every without --pause-for
}

TEST(LoadConfig, ReportsTheFirstBrokenRuleInAFixedOrder) {
    RawOptions raw;
    raw.rings = {"plain"};
    raw.op = "wrote";
    raw.duration = "soon";
    raw.cycles = "0";
    // --op is checked before --duration, --duration before --cycles.
    EXPECT_NE(err(build_config(raw)).find("--op"), std::string::npos);
    raw.op.reset();
    EXPECT_NE(err(build_config(raw)).find("--duration"), std::string::npos);
    raw.duration = "1s";
    EXPECT_NE(err(build_config(raw)).find("--cycles"), std::string::npos);
    raw.cycles = "3";
    raw.gap = "10ms";
    raw.hold = "inf";
    EXPECT_NE(err(build_config(raw)).find("--hold inf"), std::string::npos);
    raw.hold = "1s";
    const auto cfg = ok(build_config(raw));
    EXPECT_EQ(cfg.cycles, 3u);
    EXPECT_EQ(cfg.gap, nanoseconds(milliseconds(10)));
    EXPECT_EQ(cfg.hold.duration, nanoseconds(seconds(1)));
}

TEST(LoadConfig, PausesNeedBothLengthsAboveZero) {
    RawOptions raw;
    raw.rings = {"plain,count=1"};
    raw.pause_every = "2s";
    raw.pause_for = "0s";
    EXPECT_EQ(err(build_config(raw)), "--pause-for: \"0s\" must be greater than zero");
    raw.pause_for = "1s";
    const auto cfg = ok(build_config(raw));
    ASSERT_TRUE(cfg.pause.has_value());
    EXPECT_EQ(cfg.pause->every, nanoseconds(seconds(2)));
    EXPECT_EQ(cfg.pause->length, nanoseconds(seconds(1)));
}

TEST(LoadConfig, CpuMustExistOnThisSystem) {
    RawOptions raw;
    raw.rings = {"sqpoll,cpu=1,count=1", "sqpoll,cpu=3,count=1"};
    const auto cfg = ok(build_config(raw));
    EXPECT_EQ(check_cpus(cfg, 2), std::optional<std::string>(
                                      "ring 1: cpu=3 does not exist (this system has CPUs 0..1)"));
    EXPECT_EQ(check_cpus(cfg, 4), std::nullopt);
    EXPECT_EQ(check_cpus(cfg, -1), std::nullopt);  // sysconf could not tell
}

TEST(LoadConfig, PerRingOpOverridesTheRunsOp) {
    RawOptions raw;
    raw.rings = {"plain,count=1", "plain,count=1,op=read"};
    // A ring of its own with op=read needs --file as much as --op read does.
    EXPECT_EQ(err(build_config(raw)), "ring 1: op=read requires --file PATH");
    raw.file = "/dev/null";
    auto cfg = ok(build_config(raw));
    EXPECT_EQ(cfg.rings[0].op, std::optional<Op>(Op::Nop));  // --op's default filled in
    EXPECT_EQ(cfg.rings[1].op, std::optional<Op>(Op::Read));
    raw.rings = {"plain,count=1,op=nop,n=2", "plain,count=1"};
    raw.op = "read";
    cfg = ok(build_config(raw));
    ASSERT_EQ(cfg.rings.size(), 3u);
    EXPECT_EQ(ring_op(cfg.rings[0]), Op::Nop);
    EXPECT_EQ(ring_op(cfg.rings[1]), Op::Nop);
    EXPECT_EQ(ring_op(cfg.rings[2]), Op::Read);
    // --op read is checked as before, even when every ring overrides it.
    raw.file.reset();
    raw.rings = {"plain,count=1,op=nop"};
    EXPECT_EQ(err(build_config(raw)), "--op read requires --file PATH");
    // Writes need no --file (a scratch file of their own) and no IOPOLL ring, whose I/O is
    // O_DIRECT only, by op= or by --op.
    raw.op = "write";
    raw.rings = {"plain,count=1,async", "iopoll,count=1,op=nop"};
    cfg = ok(build_config(raw));
    EXPECT_EQ(ring_op(cfg.rings[0]), Op::Write);
    raw.rings = {"plain,count=1", "iopoll,count=1"};
    EXPECT_EQ(err(build_config(raw)),
              "ring 1: op=write needs a mode without iopoll (its writes are buffered, and an "
              "IOPOLL ring takes O_DIRECT I/O only)");
}

// direct is for writes and bufs= for reads, whether op= or --op says which.
TEST(LoadConfig, DirectNeedsWritesAndBufsNeedsReads) {
    RawOptions raw;
    raw.rings = {"plain,count=1,op=write,direct", "plain,count=1,op=read,bufs=4"};
    raw.file = "/dev/null";
    auto cfg = ok(build_config(raw));
    EXPECT_TRUE(cfg.rings[0].direct);
    EXPECT_EQ(cfg.rings[1].bufs, 4u);
    raw.rings = {"plain,count=1,direct"};
    EXPECT_EQ(err(build_config(raw)), "ring 0: direct needs op=write (reads are O_DIRECT already)");
    raw.op = "write";
    EXPECT_TRUE(ok(build_config(raw)).rings[0].direct);
    raw.rings = {"plain,count=1,bufs=2"};
    EXPECT_EQ(err(build_config(raw)),
              "ring 0: bufs= needs op=read (the reads select the provided buffers)");
}
