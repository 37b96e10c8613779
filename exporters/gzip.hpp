#pragma once
#include <string>
#include <string_view>

namespace iouscope {

// text in the gzip format (RFC 1952), as HTTP's Content-Encoding: gzip wants it, at zlib's
// fastest level: an exposition of 1,000 rings shrinks about tenfold either way, and the
// compression runs once per sample (RenderCache).
std::string gzip_compress(std::string_view text);

}  // namespace iouscope
