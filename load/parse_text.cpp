// The shared text rules of the iouscope-load parsers (parse_text.hpp).
#include "parse_text.hpp"

#include <charconv>
#include <system_error>

namespace iouscope::load {

std::string quoted(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    out += text;
    out += '"';
    return out;
}

ParseResult<std::uint64_t> parse_u64(std::string_view text, std::string_view what) {
    if (text.empty()) {
        return ParseError{std::string(what) + ": missing value"};
    }
    if (text.front() == '-') {
        return ParseError{std::string(what) + ": " + quoted(text) +
                          " is negative; only non-negative integers are allowed"};
    }
    std::uint64_t value = 0;
    const auto* first = text.data();
    const auto* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
        return ParseError{std::string(what) + ": " + quoted(text) + " is out of range"};
    }
    if (ec != std::errc() || ptr != last) {
        return ParseError{std::string(what) + ": " + quoted(text) +
                          " is not a non-negative integer"};
    }
    return value;
}

ParseResult<unsigned> parse_bounded(std::string_view text, std::string_view what, std::uint64_t lo,
                                    std::uint64_t hi) {
    auto parsed = parse_u64(text, what);
    if (auto* err = std::get_if<ParseError>(&parsed)) {
        return *err;
    }
    const std::uint64_t value = std::get<std::uint64_t>(parsed);
    if (value < lo || value > hi) {
        return ParseError{std::string(what) + ": " + quoted(text) + " is out of range (" +
                          std::to_string(lo) + ".." + std::to_string(hi) + ")"};
    }
    return static_cast<unsigned>(value);
}

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t end = text.find(sep, begin);
        if (end == std::string_view::npos) {
            parts.push_back(text.substr(begin));
            return parts;
        }
        parts.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
}

}  // namespace iouscope::load
