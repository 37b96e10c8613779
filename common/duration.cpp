#include "common/duration.hpp"

#include <cctype>
#include <cstdint>
#include <limits>

namespace iouscope {

namespace {

std::optional<std::int64_t> unit_ns(std::string_view u) {
    if (u == "ns") return 1;
    if (u == "us" || u == "\xc2\xb5s") return 1'000;
    if (u == "ms") return 1'000'000;
    if (u == "s") return 1'000'000'000;
    if (u == "m") return 60'000'000'000;
    if (u == "h") return 3'600'000'000'000;
    return std::nullopt;
}

}  // namespace

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
    if (text == "0") return std::chrono::nanoseconds{0};
    if (text.empty()) return std::nullopt;
    // Fractions ("1.5s") are accepted as Go does; the arithmetic is done in long double, which
    // holds every int64 nanosecond count exactly up to 2^64 on x86_64 and is checked for overflow.
    long double total = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t start = i;
        bool dot = false;
        while (i < text.size() &&
               (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
            dot = dot || text[i] == '.';
            ++i;
        }
        if (i == start || (i - start == 1 && dot)) return std::nullopt;
        long double value = std::stold(std::string(text.substr(start, i - start)));
        std::size_t ustart = i;
        while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i])) &&
               text[i] != '.')
            ++i;
        auto mult = unit_ns(text.substr(ustart, i - ustart));
        if (!mult) return std::nullopt;
        total += value * static_cast<long double>(*mult);
        if (total > static_cast<long double>(std::numeric_limits<std::int64_t>::max()))
            return std::nullopt;
    }
    return std::chrono::nanoseconds{static_cast<std::int64_t>(total)};
}

std::string format_duration(std::chrono::nanoseconds d) {
    static constexpr struct {
        std::int64_t ns;
        const char* unit;
    } units[] = {{3'600'000'000'000, "h"}, {60'000'000'000, "m"}, {1'000'000'000, "s"},
                 {1'000'000, "ms"},        {1'000, "us"},         {1, "ns"}};
    auto n = d.count();
    if (n == 0) return "0s";
    for (const auto& u : units)
        if (n % u.ns == 0) return std::to_string(n / u.ns) + u.unit;
    return std::to_string(n) + "ns";
}

}  // namespace iouscope
