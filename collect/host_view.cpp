#include "collect/host_view.hpp"

namespace iouscope {

std::uint64_t namespace_inode(const std::string& link) {
    return dir_inode(link);  // stat() follows the link to the namespace's inode
}

HostView read_host_view() {
    HostView v;
    // An unreadable link (no /proc) says nothing; the walk itself will show what it sees.
    const auto pid_ns = namespace_inode();
    v.host_pid_namespace = pid_ns == 0 || pid_ns == kInitPidNamespaceIno;
    v.cgroup = find_cgroup2_mount();
    return v;
}

std::vector<std::string> host_view_limits(const HostView& view) {
    std::vector<std::string> out;
    if (!view.host_pid_namespace)
        out.push_back(
            "iouscoped runs in a PID namespace of its own: the kernel walk sees only the "
            "processes of that namespace and misses every ring held outside it. In a container, "
            "run it with hostPID: true (docker, podman: --pid=host)");
    if (view.cgroup.point.empty())
        out.push_back(
            "no cgroup v2 hierarchy is mounted here (cgroup v1 only): rings and SQ threads get "
            "no cgroup, container or pod");
    else if (!view.cgroup.whole_hierarchy)
        out.push_back("the cgroup2 mount at " + view.cgroup.point +
                      " shows only part of the hierarchy (this daemon's cgroup namespace): "
                      "processes in cgroups outside it get no cgroup, container or pod. Mount "
                      "the host's /sys/fs/cgroup into the container, read-only (a hostPath "
                      "volume), or run it in the host's cgroup namespace (--cgroupns=host)");
    return out;
}

}  // namespace iouscope
