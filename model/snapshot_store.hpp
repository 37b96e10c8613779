#pragma once
// The hand-over point between the sampler (one writer) and its readers (scrapes, views).
// Readers get a shared_ptr to an immutable Snapshot and may keep it as long as they like.
#include <memory>
#include <mutex>

#include "model/snapshot.hpp"

namespace iouscope {

class SnapshotStore {
public:
    void publish(std::shared_ptr<const Snapshot> s) {
        std::lock_guard lock(mu_);
        latest_ = std::move(s);
    }
    std::shared_ptr<const Snapshot> latest() const {
        std::lock_guard lock(mu_);
        return latest_;
    }

private:
    mutable std::mutex mu_;
    std::shared_ptr<const Snapshot> latest_;
};

}  // namespace iouscope
