#pragma once
// Go-style durations ("1s", "250ms", "1m30s"), as node_exporter and Prometheus spell them, so that
// operators can paste the same values they use elsewhere in their monitoring stack.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace iouscope {

// Parses a non-negative duration made of one or more <number><unit> terms, units ns, us, µs, ms,
// s, m, h; a bare "0" is allowed. Returns nullopt on anything else, including overflow.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);

// Renders a duration in the same syntax, choosing the largest exact unit ("1500ms" -> "1.5s" is
// not produced; "1500ms" stays "1500ms").
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace iouscope
