// The ring SPEC grammar of iouscope-load (load/ring_spec.hpp): modes, keys, the rules between
// them, n= expansion and share= references.
#include "load/ring_spec.hpp"

#include <gtest/gtest.h>

#include "parse_result.hpp"

using namespace iouscope::load;
using namespace iouscope::load::test;

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
    EXPECT_NE(err(parse_ring_spec("sqpoll,turbo")).find("percpu, stats, async"), std::string::npos);
}

TEST(RingSpec, OpAsyncOverflowAndStuckParse) {
    auto s = ok(parse_ring_spec("sqpoll,op=read,async,stuck=64"));
    EXPECT_EQ(s.op, std::optional<Op>(Op::Read));
    EXPECT_TRUE(s.async);
    EXPECT_EQ(s.stuck, 64u);  // + depth 64 = 128, the default CQ
    EXPECT_EQ(s.overflow, 0u);
    EXPECT_EQ(ok(parse_ring_spec("plain,op=nop")).op, std::optional<Op>(Op::Nop));
    EXPECT_EQ(ok(parse_ring_spec("plain,op=write,async")).op, std::optional<Op>(Op::Write));
    EXPECT_EQ(ok(parse_ring_spec("plain,overflow=1")).overflow, 1u);
    EXPECT_EQ(ok(parse_ring_spec("sqpoll,overflow=1000000")).overflow, 1000000u);
    EXPECT_EQ(ok(parse_ring_spec("plain,depth=4096,stuck=4096")).stuck, 4096u);
    // Unset until build_config() fills in --op; not async, no overflow, nothing stuck.
    const auto plain = ok(parse_ring_spec("plain"));
    EXPECT_FALSE(plain.op.has_value());
    EXPECT_FALSE(plain.async);
    EXPECT_EQ(plain.overflow, 0u);
    EXPECT_EQ(plain.stuck, 0u);
    // The CQ is twice the SQ, which is depth rounded up to a power of two.
    EXPECT_EQ(cq_entries_for(1), 2u);
    EXPECT_EQ(cq_entries_for(64), 128u);
    EXPECT_EQ(cq_entries_for(100), 256u);
    EXPECT_EQ(cq_entries_for(kMaxDepth), 65536u);
}

TEST(RingSpec, OpAsyncOverflowAndStuckRejectBadValues) {
    EXPECT_EQ(err(parse_ring_spec("plain,op=wrte")),
              "ring spec \"plain,op=wrte\": op: \"wrte\" is not an operation (expected nop, read "
              "or write)");
    EXPECT_NE(err(parse_ring_spec("plain,op=")).find("op"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,op=nop,op=read")).find("more than once"),
              std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,async,async")).find("more than once"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,async=1")).find("unknown key \"async\""),
              std::string::npos);
    EXPECT_EQ(err(parse_ring_spec("plain,overflow=0")),
              "ring spec \"plain,overflow=0\": overflow: \"0\" is out of range (1..1000000)");
    EXPECT_NE(err(parse_ring_spec("plain,overflow=1000001")).find("1..1000000"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,overflow=-5")).find("negative"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,overflow=lots")).find("\"lots\""), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,stuck=0")).find("1..4096"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,depth=8192,stuck=4097")).find("1..4096"),
              std::string::npos);
    // stuck + depth must fit the CQ (128 for depth 64), whichever key comes first.
    EXPECT_EQ(err(parse_ring_spec("plain,stuck=65")),
              "ring spec \"plain,stuck=65\": stuck=65 and blocked=0 with depth=64 do not fit the "
              "CQ: stuck + blocked + depth must be at most cq_entries, 128 here (cq=, or twice "
              "depth rounded up to a power of two); lower them or raise depth= or cq=");
    // A larger CQ makes the room.
    EXPECT_EQ(ok(parse_ring_spec("plain,stuck=65,cq=256")).stuck, 65u);
    // blocked= splices share the room, and only a plain ring's submitting thread takes them.
    EXPECT_EQ(ok(parse_ring_spec("plain,stuck=30,blocked=34")).blocked, 34u);
    EXPECT_NE(err(parse_ring_spec("plain,stuck=30,blocked=35")).find("stuck + blocked + depth"),
              std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll,blocked=1")).find("blocked= needs mode plain"),
              std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,blocked=0")).find("1..4096"), std::string::npos);
    EXPECT_EQ(ok(parse_ring_spec("plain,stuck=156,depth=100")).stuck, 156u);
    EXPECT_NE(err(parse_ring_spec("plain,stuck=200,depth=100")).find("cq_entries, 256"),
              std::string::npos);
    // Combinations whose ground truth would not be exact.
    EXPECT_NE(err(parse_ring_spec("plain,async,overflow=10")).find("async"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("iopoll,overflow=10")).find("iopoll"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("sqpoll+iopoll,stuck=1")).find("iopoll"), std::string::npos);
}

// cq= sizes the CQ; overflow=K is a burst K beyond the default CQ, so a larger CQ takes what it
// can of it. direct and bufs= are flags of writes and reads.
TEST(RingSpec, CqDirectAndBufs) {
    const auto big = ok(parse_ring_spec("plain,overflow=1000,cq=2048"));
    EXPECT_EQ(ring_cq_entries(big), 2048u);
    EXPECT_EQ(overflow_expected(big), 0u);  // 128 + 1000 fit
    EXPECT_EQ(overflow_expected(ok(parse_ring_spec("plain,overflow=1000"))), 1000u);
    EXPECT_EQ(overflow_expected(ok(parse_ring_spec("plain,overflow=1000,cq=1000"))), 104u);
    EXPECT_EQ(overflow_expected(ok(parse_ring_spec("plain"))), 0u);
    EXPECT_EQ(ring_cq_entries(ok(parse_ring_spec("plain,depth=100"))), 256u);
    EXPECT_EQ(ring_cq_entries(ok(parse_ring_spec("plain,cq=300"))), 512u);  // rounded up
    EXPECT_EQ(err(parse_ring_spec("plain,cq=32")),
              "ring spec \"plain,cq=32\": cq=32 is smaller than depth=64 (the kernel wants a CQ "
              "at least as large as the SQ)");
    EXPECT_NE(err(parse_ring_spec("plain,cq=65537")).find("1..65536"), std::string::npos);
    EXPECT_TRUE(ok(parse_ring_spec("plain,op=write,direct")).direct);
    EXPECT_NE(err(parse_ring_spec("plain,direct=1")).find("unknown key \"direct\""),
              std::string::npos);
    EXPECT_EQ(ok(parse_ring_spec("plain,op=read,bufs=3")).bufs, 3u);
    EXPECT_NE(err(parse_ring_spec("plain,bufs=0")).find("1..32768"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("iopoll,op=read,bufs=4"))
                  .find("bufs= needs a mode without "
                        "iopoll"),
              std::string::npos);
}

// pipes=N: poll-driven reads fed by a writer at rate=, nothing else on the ring; defer sets
// DEFER_TASKRUN on such a ring only.
TEST(RingSpec, PipesAndDefer) {
    const auto p = ok(parse_ring_spec("plain,pipes=8,rate=20000,batch=8"));
    EXPECT_EQ(p.pipes, 8u);
    EXPECT_FALSE(p.defer);
    EXPECT_TRUE(ok(parse_ring_spec("plain,pipes=8,rate=20000,defer")).defer);
    EXPECT_NE(err(parse_ring_spec("plain,pipes=8")).find("pipes= needs mode plain with rate="),
              std::string::npos);
    for (const char* bad :
         {"sqpoll,pipes=8,rate=1", "plain,pipes=8,rate=1,count=5", "plain,pipes=8,rate=1,async",
          "plain,pipes=8,rate=1,stuck=1", "plain,pipes=8,rate=1,op=read"})
        EXPECT_NE(err(parse_ring_spec(bad)).find("pipes= needs"), std::string::npos) << bad;
    EXPECT_NE(err(parse_ring_spec("plain,pipes=65,rate=1")).find("more than depth=64"),
              std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,pipes=0,rate=1")).find("1..4096"), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,defer")).find("defer needs pipes="), std::string::npos);
    EXPECT_NE(err(parse_ring_spec("plain,pipes=2,rate=1,defer=1")).find("unknown key \"defer\""),
              std::string::npos);
}
