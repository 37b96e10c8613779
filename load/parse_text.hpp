// The small text rules every iouscope-load parser shares: how a value is quoted in a message,
// the strict decimal numbers of ring keys, and splitting a SPEC at its commas. Pure, like the
// parsers that use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ring_spec.hpp"

namespace iouscope::load {

// `text` in double quotes, as every message names the value it rejects.
std::string quoted(std::string_view text);

// Strict decimal parser: std::from_chars alone would accept a trailing suffix, and a leading '-'
// deserves its own message because "negative" is a common mistake worth naming.
ParseResult<std::uint64_t> parse_u64(std::string_view text, std::string_view what);

// parse_u64() within [lo, hi]; the message names the range.
ParseResult<unsigned> parse_bounded(std::string_view text, std::string_view what, std::uint64_t lo,
                                    std::uint64_t hi);

// Every part between `sep`s, empty ones included.
std::vector<std::string_view> split(std::string_view text, char sep);

}  // namespace iouscope::load
