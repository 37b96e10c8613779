#include "load/ring_spec.hpp"

#include <gtest/gtest.h>

using namespace iouscope::load;
using namespace std::chrono;

namespace {

template <typename T>
const T& ok(const ParseResult<T>& r) {
    if (auto* e = std::get_if<ParseError>(&r)) ADD_FAILURE() << e->message;
    return std::get<T>(r);
}

template <typename T>
std::string err(const ParseResult<T>& r) {
    auto* e = std::get_if<ParseError>(&r);
    return e ? e->message : std::string("<no error>");
}

}  // namespace

TEST(RingSpec, ParsesModeAndKeys) {
    auto s = ok(parse_ring_spec("sqpoll,count=100,rate=50,idle=5,cpu=1,depth=128,batch=8"));
    EXPECT_EQ(s.mode, RingMode::Sqpoll);
    EXPECT_EQ(s.count, 100u);
    EXPECT_EQ(s.rate, 50u);
    EXPECT_EQ(s.idle_ms, 5u);
    EXPECT_EQ(s.cpu, std::optional<unsigned>(1));
    EXPECT_EQ(s.depth, 128u);
    EXPECT_EQ(s.batch, 8u);
    EXPECT_EQ(ok(parse_ring_spec("plain")).mode, RingMode::Plain);
    EXPECT_EQ(ok(parse_ring_spec("sqpoll+iopoll")).mode, RingMode::SqpollIopoll);
}

TEST(RingSpec, BatchIsClampedToDepth) {
    EXPECT_EQ(ok(parse_ring_spec("plain,depth=4,batch=32")).batch, 4u);
}

TEST(RingSpec, RejectsBadSpecsNamingTheValue) {
    EXPECT_NE(err(parse_ring_spec("turbo")).find("turbo"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,count=abc")).find("abc"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,colour=red")).find("colour"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,count=-1")).find("-1"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,count=1,count=2")), "<no error>");
    EXPECT_NE(err(parse_ring_spec("plain,")), "<no error>");
    EXPECT_NE(err(parse_ring_spec("plain,depth=0")), "<no error>");
    EXPECT_NE(err(parse_ring_spec("plain,idle=5")), "<no error>");  // idle needs sqpoll
}

TEST(RingSpec, ReplicasExpandAndShareIndexesTheExpandedList) {
    auto rings = ok(expand_ring_specs({"sqpoll,idle=7,n=2", "sqpoll,share=1"}));
    ASSERT_EQ(rings.size(), 3u);
    EXPECT_EQ(rings[2].share, std::optional<std::size_t>(1));
    // A shared ring takes its owner's idle setting: the kernel uses the maximum over rings.
    EXPECT_EQ(rings[2].idle_ms, 7u);
    for (const auto& r : rings) EXPECT_EQ(r.replicas, 1u);
}

TEST(RingSpec, ShareMustReferToAnEarlierSqpollRing) {
    EXPECT_NE(err(expand_ring_specs({"sqpoll,share=0"})), "<no error>");
    EXPECT_NE(err(expand_ring_specs({"plain", "sqpoll,share=0"})), "<no error>");
    EXPECT_NE(err(expand_ring_specs({"sqpoll", "sqpoll,share=5"})), "<no error>");
    EXPECT_NE(err(expand_ring_specs({"sqpoll", "plain,share=0"})), "<no error>");
}

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
    raw.op = "write";
    EXPECT_NE(err(build_config(raw)).find("write"), std::string::npos);
    raw.op.reset();
    raw.pause_every = "1s";
    EXPECT_NE(err(build_config(raw)), "<no error>");  // --pause-every without --pause-for
}

TEST(RingSpec, SeedsFlagsParseAndFollowTheirPatchesRules) {
    auto s = ok(parse_ring_spec("sqpoll,idle_ns=50000,percpu,cpu=1,stats"));
    EXPECT_EQ(s.idle_ns, std::optional<std::uint32_t>(50000));
    EXPECT_TRUE(s.percpu);
    EXPECT_TRUE(s.stats);
    EXPECT_EQ(ok(parse_ring_spec("sqpoll,idle_ns=4294967295")).idle_ns,
              std::optional<std::uint32_t>(4294967295u));
    EXPECT_FALSE(ok(parse_ring_spec("sqpoll")).percpu);
    // A shared ring takes the owner's idle in ns, or the kernel would count its 0 as one second.
    auto rings = ok(expand_ring_specs({"sqpoll,idle_ns=50000", "sqpoll,share=0,stats"}));
    EXPECT_EQ(rings[1].idle_ns, std::optional<std::uint32_t>(50000));
    EXPECT_TRUE(rings[1].stats);

    EXPECT_NE(err(parse_ring_spec("sqpoll,idle_ns=4294967296")).find("4294967296"),
              std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,idle_ns=1000")).find("idle_ns"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll,idle=1,idle_ns=1000")).find("idle="), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll,percpu")).find("cpu=N"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,stats")).find("sqpoll"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll,stats,stats")).find("more than once"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll,turbo")).find("percpu, stats"), std::string::npos);
}
