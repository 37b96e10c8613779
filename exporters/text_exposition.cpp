#include "exporters/text_exposition.hpp"

#include <charconv>
#include <cmath>

#include "exporters/utf8.hpp"

namespace iouscope::text_exposition {

void append_value(std::string& out, double v) {
    if (std::isnan(v)) {
        out += "Nan";
    } else if (std::isinf(v)) {
        out += v < 0 ? "-Inf" : "+Inf";
    } else if (v == std::trunc(v) && std::fabs(v) < 1e16 && v != 0) {
        // A whole number of at most 16 digits, which %.16g prints as the integer it is: most
        // values (counters, counts, pids). Zero is left to %.16g, which keeps the sign of -0.
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v));
        out.append(buf, r.ptr);
    } else {
        // std::to_chars with a precision is printf's %.*g in the C locale, by the standard's
        // definition ([charconv.to.chars]), without printf's locale and multi-precision work.
        // At most 23 characters: sign, 16 digits, point, e-308.
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 16);
        out.append(buf, r.ptr);
    }
}

void append_count(std::string& out, std::uint64_t n) {
    char buf[20];
    const auto r = std::to_chars(buf, buf + sizeof buf, n);
    out.append(buf, r.ptr);
}

namespace {

void append_escaped(std::string& out, std::string_view v) {
    for (char c : v) {
        switch (c) {
            case '\n':
                out += "\\n";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '"':
                out += "\\\"";
                break;
            default:
                out += c;
        }
    }
}

}  // namespace

void append_label_value(std::string& out, std::string_view v) {
    bool ascii = true, plain = true;
    for (char c : v) {
        if (static_cast<unsigned char>(c) >= 0x80)
            ascii = false;
        else if (c == '\n' || c == '\\' || c == '"')
            plain = false;
    }
    if (ascii && plain)  // nearly every value: pids, ring ids, comm names, modes
        out.append(v);
    else if (ascii)
        append_escaped(out, v);
    else
        append_escaped(out, sanitize_utf8(v));
}

}  // namespace iouscope::text_exposition
