#include <chrono>
#include <condition_variable>

#include "cli/top_source.hpp"

namespace iouscope::top {

SnapshotSource::SnapshotSource(double interval_s, std::string description)
    : interval_ms_(static_cast<long>(interval_s * 1000)), description_(std::move(description)) {}

SnapshotSource::~SnapshotSource() = default;

std::string SnapshotSource::last_error() const {
    std::lock_guard lock(error_mu_);
    return error_;
}

void SnapshotSource::start(bool fetched) {
    worker_ = std::jthread([this, fetched](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any cv;
        for (bool skip = fetched; !stop.stop_requested(); skip = false) {
            std::string err;
            if (!skip && !fetch(err)) {
                std::lock_guard lock(error_mu_);
                error_ = std::move(err);
            }
            std::unique_lock lock(mu);
            cv.wait_for(lock, stop, std::chrono::milliseconds(interval_ms_.load()),
                        [] { return false; });
        }
    });
}

void SnapshotSource::stop() {
    stopping_ = true;
    worker_.request_stop();
    if (worker_.joinable()) worker_.join();
}

}  // namespace iouscope::top
