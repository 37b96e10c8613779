#pragma once
// The pieces of a text exposition line (format 0.0.4), appended straight to a string, exactly as
// prometheus-cpp's TextSerializer writes them (core/src/text_serializer.cc, 1.0.1 as Debian
// bookworm ships it, unchanged in 1.1.0). exporters/exposition writes whole lines from them.
#include <cstdint>
#include <string>
#include <string_view>

namespace iouscope::text_exposition {

// A sample value or an le bound: NaN as "Nan", the infinities as "+Inf" and "-Inf", any other
// value as printf's "%.16g" in the C locale (TextSerializer's stream: classic locale, precision
// max_digits10 - 1, default float field).
void append_value(std::string& out, double v);
// A histogram's count or bucket count, in decimal.
void append_count(std::string& out, std::uint64_t n);
// A label value: invalid UTF-8 replaced (sanitize_utf8), then backslash, double quote and
// newline escaped as \\, \" and \n.
void append_label_value(std::string& out, std::string_view v);

}  // namespace iouscope::text_exposition
