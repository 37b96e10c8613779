#pragma once
// cgroup v2 ids, as the ring walk records them (the kernfs node id of a task's default-hierarchy
// cgroup), mapped to their paths under the cgroup2 mount. On 64-bit kernels since 5.5 that id is
// the inode number of the cgroup's directory, so a walk of the mount finds every live one.
// open_by_handle_at() would resolve one id directly, but it needs CAP_DAC_READ_SEARCH, which
// the daemon drops; the directories are world-readable.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace iouscope {

struct Cgroup2Mount {
    std::string point;             // where it is mounted; empty where only cgroup v1 is
    bool whole_hierarchy = false;  // its top is the hierarchy's root, not a namespace's subtree
};

// The inode of a directory, 0 if it cannot be read.
std::uint64_t dir_inode(const std::string& path);

// The cgroup2 mount to read paths from ("/sys/fs/cgroup", "/sys/fs/cgroup/unified" on hybrid
// hosts). In a container with its own cgroup namespace the runtime's mount shows only the
// container's subtree; a host hierarchy mounted beside it (a hostPath volume) is preferred,
// recognised by its top directory being the root cgroup, kernfs node 1 (the first id
// kernfs_create_root() allocates, on every kernel the daemon supports).
Cgroup2Mount find_cgroup2_mount(
    const std::string& mountinfo = "/proc/self/mountinfo",
    const std::function<std::uint64_t(const std::string&)>& inode_of = dir_inode);

class CgroupPaths {
public:
    explicit CgroupPaths(std::string mount);
    // Paths for `ids` relative to the mount ("/" for the root, "/kubepods.slice/..."); an id
    // not seen before triggers one rescan of the mount, at most every `min_rescan`. Ids still
    // unknown after it (a cgroup removed since the walk, or outside this mount's view, as in a
    // container's own cgroup namespace) are left out, and trigger no rescan of their own until
    // the next one: a daemon that cannot see a cgroup must not walk the tree every second.
    std::unordered_map<std::uint64_t, std::string> resolve(const std::set<std::uint64_t>& ids);
    std::size_t rescans() const { return rescans_; }
    const std::string& mount() const { return mount_; }

    std::chrono::milliseconds min_rescan{1000};

private:
    void rescan();

    std::string mount_;
    std::unordered_map<std::uint64_t, std::string> by_id_;  // the mount's cgroups at the last scan
    std::set<std::uint64_t> missing_;  // asked for since the last scan, not found by it
    bool rescanned_ = false;
    std::chrono::steady_clock::time_point last_scan_{};
    std::size_t rescans_ = 0;
};

}  // namespace iouscope
