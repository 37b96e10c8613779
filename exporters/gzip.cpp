#include "exporters/gzip.hpp"

#include <zlib.h>

#include <memory>
#include <stdexcept>

namespace iouscope {

std::string gzip_compress(std::string_view text, GzipSettings s) {
    // zlib's one-call compress() writes the zlib format, not gzip; deflate with windowBits 16+15
    // adds the gzip header and trailer.
    z_stream z{};
    static_assert(Z_BEST_SPEED == 1 && Z_DEFAULT_STRATEGY == 0, "GzipSettings' defaults");
    if (deflateInit2(&z, s.level, Z_DEFLATED, 16 + 15, s.mem_level, s.strategy) != Z_OK)
        throw std::runtime_error("deflateInit2 failed");
    // Into a buffer of deflateBound's size left unwritten, then copied out at the size it came
    // to: a std::string of that size would first write zeros over all of it, the text's size
    // and more, where the output is a sixteenth of it. At the scale goal's point (3.8 MB of
    // text, bench/render.cpp) those zeros and their page faults were 1.8 ms of 9.4.
    const uLong bound = deflateBound(&z, static_cast<uLong>(text.size()));
    const std::unique_ptr<Bytef[]> out(new Bytef[bound]);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = out.get();
    z.avail_out = static_cast<uInt>(bound);
    const int rc = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
    return std::string(reinterpret_cast<const char*>(out.get()), z.total_out);
}

}  // namespace iouscope
