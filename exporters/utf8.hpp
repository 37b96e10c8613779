#pragma once
// Label and JSON strings from the kernel (comm names, cgroup paths) are arbitrary bytes; both
// the exposition and JSON must be UTF-8. Shared by the Prometheus and JSON exporters.
#include <string>
#include <string_view>

namespace iouscope {

// Invalid sequences become U+FFFD (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
std::string sanitize_utf8(std::string_view in);

}  // namespace iouscope
