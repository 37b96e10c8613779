#include "cli/top_source.hpp"

#include <curl/curl.h>

#include "collect/bpf_loader.hpp"
#include "collect/kernel_features.hpp"
#include "collect/privileges.hpp"
#include "collect/sampler.hpp"
#include "exporters/json_exporter.hpp"

namespace iouscope::top {

namespace {

size_t append(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

class DaemonSource : public SnapshotSource {
public:
    DaemonSource(std::string url, double interval_s)
        : SnapshotSource(interval_s, "daemon " + url), url_(std::move(url) + "/api/v1/snapshot") {}
    ~DaemonSource() override { stop(); }
    using SnapshotSource::start;

    bool fetch(std::string& error) override {
        std::string body;
        CURL* c = curl_easy_init();
        if (!c) {
            error = "cannot initialise libcurl";
            return false;
        }
        curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
        // Quitting does not wait for the rest of a large snapshot.
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, give_up_if_stopping);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, this);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        CURLcode rc = curl_easy_perform(c);
        curl_easy_cleanup(c);
        if (rc != CURLE_OK) {
            error = url_ + ": " + curl_easy_strerror(rc);
            return false;
        }
        try {
            store_.publish(std::make_shared<Snapshot>(snapshot_from_json(body)));
        } catch (const std::exception& e) {
            error = url_ + ": " + e.what();
            return false;
        }
        return true;
    }

private:
    static int give_up_if_stopping(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
        return static_cast<const DaemonSource*>(self)->stopping() ? 1 : 0;
    }
    std::string url_;
};

class LocalSource : public SnapshotSource {
public:
    LocalSource(double interval_s, KernelFeatures kf, std::unique_ptr<BpfCollector> bpf)
        : SnapshotSource(interval_s, "in-process"),
          kf_(std::move(kf)),
          bpf_(std::move(bpf)),
          store_ptr_(std::shared_ptr<SnapshotStore>(&store_, [](SnapshotStore*) {})),
          sampler_(*bpf_, kf_.traits(), store_ptr_, kf_.release(), kf_.config_hz()) {}
    ~LocalSource() override { stop(); }
    using SnapshotSource::start;

    bool fetch(std::string& error) override {
        if (!sampler_.sample_once()) {
            error = "sampling failed (see stderr)";
            return false;
        }
        return true;
    }

private:
    KernelFeatures kf_;
    std::unique_ptr<BpfCollector> bpf_;
    // The sampler publishes into the base class's store, which outlives it.
    std::shared_ptr<SnapshotStore> store_ptr_;
    Sampler sampler_;
};

}  // namespace

std::unique_ptr<SnapshotSource> connect_daemon(const std::string& base_url, double interval_s,
                                               std::string& error) {
    auto s = std::make_unique<DaemonSource>(base_url, interval_s);
    if (!s->fetch(error)) return nullptr;
    s->start(true);
    return s;
}

std::unique_ptr<SnapshotSource> start_local(double interval_s, std::string& error, bool deep) {
    if (auto why = missing_bpf_privileges()) {
        error = *why;
        return nullptr;
    }
    KernelFeatures kf;
    if (auto why = KernelFeatures::load(kf)) {
        error = *why;
        return nullptr;
    }
    LoaderOptions lo;
    lo.deep = deep;
    // A local run measures the window it was asked for and then exits: every gap, not a sample.
    lo.gap_sampling = GapSamplingConfig::off();
    auto bpf = BpfCollector::make(kf, lo, error);
    if (!bpf) return nullptr;
    auto s = std::make_unique<LocalSource>(interval_s, std::move(kf), std::move(bpf));
    s->start();
    return s;
}

}  // namespace iouscope::top
