// The request stage (model/aggregator_requests.cpp): a ring's requests per opcode and path, named
// by address and birth, its requests in flight and its CQ overflow.
#include <gtest/gtest.h>

#include "tests/unit/model/aggregator_samples.hpp"

using namespace iouscope;
using namespace iouscope::test;

namespace {

iou_req_stats stats(std::uint64_t submitted, std::uint64_t completed, std::uint64_t punted = 0) {
    iou_req_stats s{};
    s.submitted = submitted;
    s.punted = punted;
    s.completed = completed;
    s.results[IOU_RES_OK] = completed;
    s.latency[10] = completed;  // [1024, 2048) ns
    s.latency_sum_ns = 1500 * completed;
    return s;
}

RawSample with_requests(std::uint64_t born) {
    auto r = ring(1, 10, 3, 0, 100);
    r.born_ns = born;
    RawSample raw = sample(kSec, {r});
    raw.requests.on = raw.requests.timed = raw.requests.overflow_probe = true;
    return raw;
}

}  // namespace

TEST(AggregatorRequests, OpcodesFoldTheirPathsAndOnlyTheRingsBirthCounts) {
    Aggregator a;
    RawSample raw = with_requests(500);
    raw.requests.stats = {
        {{1, 500, 22, IOU_PATH_INLINE}, stats(7, 4, 3)},
        {{1, 500, 22, IOU_PATH_IOWQ}, stats(0, 3)},
        {{1, 500, 0, IOU_PATH_INLINE}, stats(5, 5)},
        // An earlier ring at the same address, not yet deleted: not this ring's.
        {{1, 400, 0, IOU_PATH_INLINE}, stats(1000, 1000)},
        // Another ring's.
        {{2, 500, 0, IOU_PATH_INLINE}, stats(9, 9)},
    };
    auto s = a.update(raw);
    ASSERT_EQ(s.rings.size(), 1u);
    const auto& rq = s.rings[0].requests;
    ASSERT_TRUE(rq.has_requests);
    ASSERT_EQ(rq.ops.size(), 2u);
    EXPECT_EQ(rq.ops[0].opcode, 0u);
    EXPECT_EQ(rq.ops[0].submitted, 5u);
    EXPECT_EQ(rq.ops[1].opcode, 22u);
    EXPECT_EQ(rq.ops[1].submitted, 7u);
    EXPECT_EQ(rq.ops[1].punted, 3u);
    EXPECT_EQ(rq.ops[1].paths[IOU_PATH_INLINE].completed, 4u);
    EXPECT_EQ(rq.ops[1].paths[IOU_PATH_IOWQ].completed, 3u);
    EXPECT_EQ(rq.ops[1].paths[IOU_PATH_IOWQ].latency.count, 3u);
    EXPECT_DOUBLE_EQ(rq.ops[1].paths[IOU_PATH_IOWQ].latency.sum_s, 4500e-9);
    EXPECT_EQ(rq.ops[1].paths[IOU_PATH_POLL].completed, 0u);
}

TEST(AggregatorRequests, InFlightAgeAndOverflowBelongToTheRingsBirth) {
    Aggregator a;
    RawSample raw = with_requests(500);
    raw.requests.in_flight = {{1, 400, 99, kSec - 900'000'000, 1, 4},
                              {1, 500, 2, kSec - 250'000'000, 22, 7}};
    raw.requests.overflow = {{1, {500, 12, 2}}};
    auto s = a.update(raw);
    const auto& rq = s.rings[0].requests;
    EXPECT_EQ(rq.in_flight, 2u);
    EXPECT_NEAR(rq.oldest_age_seconds, 0.25, 1e-9);
    EXPECT_EQ(rq.oldest_opcode, 22u);
    EXPECT_EQ(rq.oldest_fd, 7);
    EXPECT_EQ(rq.overflow_cqes, 12u);
    EXPECT_EQ(rq.overflow_dropped, 2u);
    // The overflow entry of an earlier ring at the address says nothing of this one.
    raw.requests.overflow = {{1, {400, 12, 2}}};
    s = a.update(raw);
    EXPECT_TRUE(s.rings[0].requests.has_overflow);
    EXPECT_EQ(s.rings[0].requests.overflow_cqes, 0u);
}

TEST(AggregatorRequests, NothingWithoutTheTier) {
    Aggregator a;
    auto s = a.update(sample(kSec, {ring(1, 10, 3, 0, 100)}));
    EXPECT_FALSE(s.rings[0].requests.has_requests);
    EXPECT_FALSE(s.rings[0].requests.has_overflow);
}

TEST(AggregatorRequests, RequestsAreAtLeastTheirCompletionsWhateverTheReadOrder) {
    Aggregator a;
    RawSample raw = with_requests(500);
    // Read before a request was submitted and completed, its path key after: 4 against 5.
    raw.requests.stats = {{{1, 500, 0, IOU_PATH_INLINE}, stats(4, 3)},
                          {{1, 500, 0, IOU_PATH_POLL}, stats(0, 2)}};
    auto s = a.update(raw);
    EXPECT_EQ(s.rings[0].requests.ops[0].submitted, 5u);
}
