#pragma once
// One rendering per snapshot. The exposition of 10,000 rings and 1,000 SQ threads takes about
// 5 ms to write and 7.5 ms to gzip (bench/render.cpp); every scrape of the same sample after
// the first (a second Prometheus of an HA pair, dashboards, a curl loop) then costs a copy of
// the text. Rendering happens at the first scrape of a sample rather than in the sampler, so
// samples nobody scrapes cost nothing. Served from the cache without a copy
// (HttpResponse::shared_body), and gzip-compressed once for scrapers that ask (Prometheus does).
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "exporters/gzip.hpp"
#include "model/snapshot.hpp"

namespace iouscope {

class RenderCache {
public:
    using Render = std::function<std::string(const Snapshot&)>;
    explicit RenderCache(Render render) : render_(std::move(render)) {}

    // The text of `snap`, rendered once: concurrent callers for the same snapshot wait for the
    // one rendering rather than each doing it. A caller holding an older snapshot than the one
    // cached (it read the store just before a publish) gets the newer text: rendering the old
    // one again would cost time and show its scraper counters going back. An empty snapshot
    // pointer renders nothing.
    std::shared_ptr<const std::string> get(const std::shared_ptr<const Snapshot>& snap) {
        std::lock_guard lock(mu_);
        if (!snap) return std::make_shared<const std::string>();
        if (!key_ || snap->seq > key_->seq) {
            text_ = std::make_shared<const std::string>(render_(*snap));
            key_ = snap;  // held, so the address cannot be reused by a newer snapshot meanwhile
            ++renders_;
        }
        return text_;
    }
    // The same text gzip-compressed, compressed once per snapshot at the first call that asks.
    std::shared_ptr<const std::string> gzip(const std::shared_ptr<const Snapshot>& snap) {
        auto text = get(snap);
        std::lock_guard lock(mu_);
        if (gzip_of_ != text) {
            gzip_ = std::make_shared<const std::string>(gzip_compress(*text));
            gzip_of_ = text;
            ++compressions_;
        }
        return gzip_;
    }
    std::uint64_t compressions() const {
        std::lock_guard lock(mu_);
        return compressions_;
    }
    std::uint64_t renders() const {
        std::lock_guard lock(mu_);
        return renders_;
    }

private:
    Render render_;
    mutable std::mutex mu_;
    std::shared_ptr<const Snapshot> key_;
    std::shared_ptr<const std::string> text_;
    std::uint64_t renders_ = 0;
    std::shared_ptr<const std::string> gzip_of_, gzip_;  // gzip_ compresses the text gzip_of_
    std::uint64_t compressions_ = 0;
};

}  // namespace iouscope
