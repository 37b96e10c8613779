#include "common/duration.hpp"

#include <gtest/gtest.h>

using namespace std::chrono;
using iouscope::format_duration;
using iouscope::parse_duration;

TEST(Duration, ParsesGoStyleUnits) {
    EXPECT_EQ(parse_duration("1s"), nanoseconds(seconds(1)));
    EXPECT_EQ(parse_duration("250ms"), nanoseconds(milliseconds(250)));
    EXPECT_EQ(parse_duration("1m30s"), nanoseconds(seconds(90)));
    EXPECT_EQ(parse_duration("1.5s"), nanoseconds(milliseconds(1500)));
    EXPECT_EQ(parse_duration("10us"), nanoseconds(microseconds(10)));
    EXPECT_EQ(parse_duration("2h"), nanoseconds(hours(2)));
    EXPECT_EQ(parse_duration("0"), nanoseconds(0));
}

TEST(Duration, RejectsMalformed) {
    for (const char* bad : {"", "1", "s", "1x", "-1s", "1..5s", ".s", "1s2", "ms", "1 s", "1e3s",
                            "99999999999999999999h"})
        EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
}

TEST(Duration, FormatsWithLargestExactUnit) {
    EXPECT_EQ(format_duration(seconds(1)), "1s");
    EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
    EXPECT_EQ(format_duration(minutes(2)), "2m");
    EXPECT_EQ(format_duration(nanoseconds(0)), "0s");
    EXPECT_EQ(format_duration(nanoseconds(7)), "7ns");
}
