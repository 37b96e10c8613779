#include "exporters/json_exporter.hpp"

#include <gtest/gtest.h>

using namespace iouscope;

namespace {

Snapshot sample_snapshot() {
    Snapshot s;
    s.hostname = "db1";
    s.kernel = "6.18.0";
    s.seq = 7;
    s.interval_seconds = 1;
    ThreadSnapshot t;
    t.tid = 42;
    t.pid = 41;
    t.comm = "post\"gres\xff";
    t.cpu_seconds = 3.5;
    t.work_source = WorkSource::kernel;
    t.wake_latency.upper_bounds_s = {1e-6};
    t.wake_latency.cumulative = {2};
    t.wake_latency.count = 3;
    t.wakers.push_back({41, "postgres", 9, "task"});
    t.wake_p99_seconds = 2e-5;
    s.threads.push_back(t);
    RingSnapshot r;
    r.id = "41:5";
    r.mode = "sqpoll";
    r.sq_thread = 42;
    r.sqes_total = 1ull << 40;
    s.rings.push_back(r);
    s.probes.push_back({"sched_switch", "tp_btf", false, "kernel lacks it"});
    s.rings_created_by_mode.emplace_back("sqpoll", 4);
    return s;
}

}  // namespace

TEST(Json, RoundTripKeepsEveryField) {
    auto in = sample_snapshot();
    auto out = snapshot_from_json(snapshot_to_json(in));
    EXPECT_EQ(out.hostname, "db1");
    EXPECT_EQ(out.seq, 7u);
    ASSERT_EQ(out.threads.size(), 1u);
    EXPECT_EQ(out.threads[0].tid, 42);
    EXPECT_DOUBLE_EQ(out.threads[0].cpu_seconds, 3.5);
    EXPECT_EQ(out.threads[0].work_source, WorkSource::kernel);
    EXPECT_EQ(out.threads[0].wake_latency.count, 3u);
    EXPECT_EQ(out.threads[0].wakers.at(0).wakeups, 9u);
    EXPECT_DOUBLE_EQ(out.threads[0].wake_p99_seconds, 2e-5);
    ASSERT_EQ(out.rings.size(), 1u);
    EXPECT_EQ(out.rings[0].sqes_total, 1ull << 40);
    EXPECT_EQ(out.probes.at(0).reason, "kernel lacks it");
    EXPECT_EQ(out.rings_created_by_mode.at(0).second, 4u);
}

// top's requests view and `iouscope advise --daemon` name opcodes from the daemon's JSON.
TEST(Json, OpcodeNamesRoundTrip) {
    auto in = sample_snapshot();
    EXPECT_FALSE(snapshot_from_json(snapshot_to_json(in)).opcode_names);
    in.opcode_names =
        std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"nop", "readv"});
    const auto out = snapshot_from_json(snapshot_to_json(in));
    ASSERT_TRUE(out.opcode_names);
    EXPECT_EQ(*out.opcode_names, (std::vector<std::string>{"nop", "readv"}));
}

// The advisor of `iouscope advise --daemon` reads the sampled gaps' recorded time back.
TEST(Json, GapSamplingRoundTripsAndIsAbsentWhereEveryGapIsRecorded) {
    auto in = sample_snapshot();
    EXPECT_FALSE(snapshot_from_json(snapshot_to_json(in)).gap_sampling);
    EXPECT_DOUBLE_EQ(snapshot_from_json(snapshot_to_json(in)).threads[0].gaps.recorded_seconds, -1);
    in.gap_sampling = GapSampling{6, 60, 2.147, 38.5, 51.5, 10, 3, 1, true};
    in.threads[0].gaps.recorded_seconds = 38.5;
    const auto out = snapshot_from_json(snapshot_to_json(in));
    ASSERT_TRUE(out.gap_sampling);
    EXPECT_DOUBLE_EQ(out.gap_sampling->recorded_seconds, 38.5);
    EXPECT_DOUBLE_EQ(out.gap_sampling->attached_seconds, 51.5);
    EXPECT_EQ(out.gap_sampling->windows, 10u);
    EXPECT_EQ(out.gap_sampling->closed_early, 3u);
    EXPECT_EQ(out.gap_sampling->attach_failures, 1u);
    EXPECT_TRUE(out.gap_sampling->active);
    EXPECT_DOUBLE_EQ(out.threads[0].gaps.recorded_seconds, 38.5);
}

TEST(Json, InvalidUtf8InCommIsReplaced) {
    auto out = snapshot_from_json(snapshot_to_json(sample_snapshot()));
    EXPECT_EQ(out.threads[0].comm, "post\"gres\xef\xbf\xbd");
}

TEST(Json, RejectsWhatIsNotASnapshot) {
    EXPECT_THROW(snapshot_from_json("nope"), std::runtime_error);
    EXPECT_THROW(snapshot_from_json("{}"), std::runtime_error);
    EXPECT_THROW(snapshot_from_json(R"({"schema": 99})"), std::runtime_error);
    EXPECT_THROW(snapshot_from_json(R"({"schema": 1, "threads": 5})"), std::runtime_error);
}
