#pragma once
#include <string>
#include <string_view>

namespace iouscope {

// text in the gzip format (RFC 1952), as HTTP's Content-Encoding: gzip wants it, at zlib's
// fastest level: an exposition of 1,000 rings shrinks about tenfold either way, and the
// compression runs once per sample (RenderCache). The settings zlib offers, on the 3.8 MB of the
// scale goal's point (bench/render.cpp --gzip-levels, 20 runs, median): level 1 7.3 ms, 16.3x
// (its A/A 7.3); level 2 7.3 ms, 16.6x; level 3 7.6 ms, 16.7x; level 6 18.1 ms, 19.0x; memLevel
// 9 8.6 ms; Z_FILTERED is level 1's own; Z_RLE 24.7 ms and Z_HUFFMAN_ONLY 23.5 ms, both 1.6x.
// Nothing is faster than level 1; levels 2 and 3 save 1.5 and 2.3 % of the bytes for 1 and 4 %
// more time, too little either way to change.
// The other settings are zlib's (level, strategy, memLevel), for bench/render.cpp to compare.
struct GzipSettings {
    int level = 1;      // Z_BEST_SPEED
    int strategy = 0;   // Z_DEFAULT_STRATEGY
    int mem_level = 8;  // zlib's default
};
std::string gzip_compress(std::string_view text, GzipSettings s = {});

}  // namespace iouscope
