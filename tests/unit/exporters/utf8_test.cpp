#include "exporters/utf8.hpp"

#include <gtest/gtest.h>

using namespace iouscope;

TEST(Sanitize, KeepsValidUtf8) {
    EXPECT_EQ(sanitize_utf8("fio"), "fio");
    EXPECT_EQ(sanitize_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(sanitize_utf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(Sanitize, ReplacesInvalidSequences) {
    EXPECT_EQ(sanitize_utf8("a\xffz"), "a\xef\xbf\xbdz");
    EXPECT_EQ(sanitize_utf8("\xc3"), "\xef\xbf\xbd");                  // truncated
    EXPECT_EQ(sanitize_utf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
    EXPECT_EQ(sanitize_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
}
