#include "collect/cgroups.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace iouscope {

std::uint64_t dir_inode(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

Cgroup2Mount find_cgroup2_mount(const std::string& mountinfo,
                                const std::function<std::uint64_t(const std::string&)>& inode_of) {
    constexpr std::uint64_t kRootCgroupIno = 1;
    // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER".
    std::ifstream in(mountinfo);
    std::string line;
    Cgroup2Mount first;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string id, parent, dev, root, point, word;
        if (!(f >> id >> parent >> dev >> root >> point)) continue;
        while (f >> word && word != "-") {
        }
        std::string fstype;
        if (!(f >> fstype) || fstype != "cgroup2") continue;
        if (inode_of(point) == kRootCgroupIno) return {point, true};
        if (first.point.empty()) first.point = point;
    }
    return first;
}

CgroupPaths::CgroupPaths(std::string mount) : mount_(std::move(mount)) {}

void CgroupPaths::rescan() {
    namespace fs = std::filesystem;
    by_id_.clear();
    missing_.clear();
    rescanned_ = true;
    ++rescans_;
    last_scan_ = std::chrono::steady_clock::now();
    struct stat st {};
    if (mount_.empty() || stat(mount_.c_str(), &st) != 0) return;
    by_id_[st.st_ino] = "/";
    std::error_code ec;
    // A cgroup removed during the walk ends its subtree, not the walk.
    for (fs::recursive_directory_iterator
             it(mount_, fs::directory_options::skip_permission_denied, ec),
         end;
         it != end; it.increment(ec)) {
        if (ec) {
            ec.clear();
            continue;
        }
        if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
        if (stat(it->path().c_str(), &st) != 0) continue;
        by_id_[st.st_ino] = "/" + fs::relative(it->path(), mount_, ec).string();
    }
}

std::unordered_map<std::uint64_t, std::string> CgroupPaths::resolve(
    const std::set<std::uint64_t>& ids) {
    bool unknown = false;
    for (auto id : ids) unknown = unknown || (!by_id_.count(id) && !missing_.count(id));
    if (unknown && std::chrono::steady_clock::now() - last_scan_ >= min_rescan) rescan();
    std::unordered_map<std::uint64_t, std::string> out;
    for (auto id : ids) {
        if (auto it = by_id_.find(id); it != by_id_.end())
            out.emplace(id, it->second);
        else if (rescanned_)
            missing_.insert(id);
    }
    rescanned_ = false;
    return out;
}

}  // namespace iouscope
