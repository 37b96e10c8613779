#pragma once
// Where `iouscope top` gets its snapshots: the daemon's JSON endpoint, or the same collector
// run in-process. Either way a background thread fetches on its own schedule and the drawing loop
// only ever reads the latest snapshot, so a slow terminal never stalls sampling.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "model/snapshot_store.hpp"

namespace iouscope::top {

class SnapshotSource {
public:
    virtual ~SnapshotSource();
    std::shared_ptr<const Snapshot> latest() const { return store_.latest(); }
    void set_interval(double seconds) { interval_ms_ = static_cast<long>(seconds * 1000); }
    const std::string& description() const { return description_; }
    // The last fetch's error; a copy, because the worker thread may be writing the next one.
    std::string last_error() const;

protected:
    explicit SnapshotSource(double interval_s, std::string description);
    // Takes one snapshot into store_; returns false and sets error on failure.
    virtual bool fetch(std::string& error) = 0;
    // Starts the worker. `fetched`: a snapshot was just taken (connect_daemon's first), so the
    // worker waits an interval before the next instead of fetching it again at once, which at
    // 10,000 rings kept `top -b -n 1` and advise waiting at exit for a second 11 MB fetch.
    void start(bool fetched = false);
    void stop();
    // True once stop() has begun: a fetch under way may give up.
    bool stopping() const { return stopping_; }
    SnapshotStore store_;

private:
    std::atomic<bool> stopping_{false};
    std::atomic<long> interval_ms_;
    std::string description_;
    mutable std::mutex error_mu_;
    std::string error_;  // guarded by error_mu_
    std::jthread worker_;
};

// SnapshotSource's own code (the worker thread) is in cli/snapshot_source.cpp, apart from the
// sources below, so that it builds and is tested without libcurl or BPF.

// Connects to a daemon at base_url (e.g. http://127.0.0.1:10464). Fails if the first fetch fails.
std::unique_ptr<SnapshotSource> connect_daemon(const std::string& base_url, double interval_s,
                                               std::string& error);

// Loads the BPF collector into this process (needs root). Fails with a readable reason. `deep`
// adds the opt-in tier (advise needs its work_gaps probe).
std::unique_ptr<SnapshotSource> start_local(double interval_s, std::string& error,
                                            bool deep = false);

}  // namespace iouscope::top
