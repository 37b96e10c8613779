#include "daemon/flags.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace iouscope;

namespace {

FlagsResult parse(std::vector<const char*> args) {
    args.insert(args.begin(), "iouscoped");
    return parse_daemon_flags(static_cast<int>(args.size()), args.data());
}

void expect_error(std::vector<const char*> args, const std::string& needle) {
    auto r = parse(args);
    EXPECT_FALSE(r.config.has_value());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
}

}  // namespace

TEST(DaemonFlags, DefaultsAreLoopbackAndOneSecond) {
    auto r = parse({});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->listen_address, "127.0.0.1:10464");
    EXPECT_EQ(r.config->telemetry_path, "/metrics");
    EXPECT_EQ(r.config->interval, std::chrono::seconds(1));
}

TEST(DaemonFlags, AcceptsNodeExporterSpellings) {
    auto r = parse({"--web.listen-address=[::1]:9999", "--sample.interval", "250ms",
                    "--log.level=debug", "--web.telemetry-path=/m"});
    ASSERT_TRUE(r.config.has_value()) << r.output;
    EXPECT_EQ(r.config->listen_address, "[::1]:9999");
    EXPECT_EQ(r.config->interval, std::chrono::milliseconds(250));
    EXPECT_EQ(r.config->log_level, "debug");
    EXPECT_EQ(r.config->telemetry_path, "/m");
    EXPECT_TRUE(parse({"--web.listen-address=:10464"}).config.has_value());
}

TEST(DaemonFlags, UnknownFlagIsAnError) {
    expect_error({"--bogus"}, "--bogus");
}

TEST(DaemonFlags, BadAddresses) {
    expect_error({"--web.listen-address=localhost"}, "no port");
    expect_error({"--web.listen-address=127.0.0.1:0"}, "port must be 1-65535");
    expect_error({"--web.listen-address=127.0.0.1:70000"}, "port must be 1-65535");
    expect_error({"--web.listen-address=127.0.0.1:http"}, "port must be 1-65535");
    expect_error({"--web.listen-address=999.1.1.1:80"}, "host must be");
    expect_error({"--web.listen-address=::1:80"}, "host must be");
}

TEST(DaemonFlags, BadIntervals) {
    expect_error({"--sample.interval=soon"}, "not a duration");
    expect_error({"--sample.interval=1ms"}, "between 10ms and 1h");
    expect_error({"--sample.interval=2h"}, "between 10ms and 1h");
    expect_error({"--sample.interval"}, "sample.interval");
}

TEST(DaemonFlags, BadLogLevelAndPath) {
    expect_error({"--log.level=loud"}, "--log.level");
    expect_error({"--web.telemetry-path=metrics"}, "must start with '/'");
}

TEST(DaemonFlags, HelpIsCompleteAndExitsZero) {
    auto r = parse({"--help"});
    EXPECT_FALSE(r.config.has_value());
    EXPECT_EQ(r.exit_code, 0);
    for (const char* s : {"--web.listen-address", "--web.telemetry-path", "--sample.interval",
                          "--log.level", "--version", "EXIT STATUS", "EXAMPLES", "CAP_BPF"})
        EXPECT_NE(r.output.find(s), std::string::npos) << s;
}

TEST(DaemonFlags, AdviseWindow) {
    auto r = parse({});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->advise_window, std::chrono::seconds(60));
    r = parse({"--advise.window=0"});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->advise_window.count(), 0);
    r = parse({"--advise.window=5m"});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->advise_window, std::chrono::minutes(5));
    expect_error({"--advise.window=soon"}, "not a duration");
    expect_error({"--advise.window=2s"}, "between 5s and 1h");
    expect_error({"--advise.window=2h"}, "between 5s and 1h");
    expect_error({"--sample.interval=10s", "--advise.window=15s"}, "two samples");
}

TEST(DaemonFlags, GapSamplingDefaultsToSixSecondsInSixtyAndTakesOff) {
    auto r = parse({});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->gap_sampling.on, std::chrono::seconds(6));
    EXPECT_EQ(r.config->gap_sampling.period, std::chrono::seconds(60));
    r = parse({"--probes.gap-sampling=off"});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_FALSE(r.config->gap_sampling.enabled());
    r = parse({"--probes.gap-sampling", "10s/5m"});
    ASSERT_TRUE(r.config.has_value());
    EXPECT_EQ(r.config->gap_sampling.period, std::chrono::minutes(5));
    expect_error({"--probes.gap-sampling=2s/60s"}, "at least 3s");
    expect_error({"--probes.gap-sampling=6s"}, "ON/PERIOD");
}

TEST(DaemonFlags, SchedGateIsAutoByDefaultAndTakesOnlyAutoLazyOnOrOff) {
    const std::pair<std::vector<const char*>, SchedGateMode> cases[] = {
        {{}, SchedGateMode::automatic},
        {{"--probes.sched-gate=auto"}, SchedGateMode::automatic},
        {{"--probes.sched-gate=on"}, SchedGateMode::on},
        {{"--probes.sched-gate=lazy"}, SchedGateMode::lazy},
        {{"--probes.sched-gate=off"}, SchedGateMode::off}};
    for (const auto& [args, mode] : cases) {
        const auto r = parse(args);
        ASSERT_TRUE(r.config.has_value()) << ::testing::PrintToString(args);
        EXPECT_EQ(r.config->sched_gate, mode) << ::testing::PrintToString(args);
    }
    expect_error({"--probes.sched-gate=yes"}, "auto, lazy, on or off, got \"yes\"");
}

TEST(DaemonFlags, PlainRingsAreReadInFullEveryFiveSecondsByDefault) {
    auto r = parse({});
    ASSERT_TRUE(r.config);
    EXPECT_EQ(r.config->plain_interval, std::chrono::seconds(5));
    r = parse({"--rings.plain-interval=0"});
    ASSERT_TRUE(r.config);
    EXPECT_EQ(r.config->plain_interval.count(), 0);
    r = parse({"--rings.plain-interval=30s"});
    ASSERT_TRUE(r.config);
    EXPECT_EQ(r.config->plain_interval, std::chrono::seconds(30));
    expect_error({"--rings.plain-interval=often"}, "not a duration");
    expect_error({"--rings.plain-interval=2h"}, "at most 1h");
}

TEST(DaemonFlags, OnlyZeroSwitchesTheAdvisorOffNotZeroSeconds) {
    expect_error({"--advise.window=0s"}, "between 5s and 1h");
}
