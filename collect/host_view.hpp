#pragma once
// How much of the host this daemon can see. The kernel walk (iter/task_file) covers only the
// tasks of the PID namespace the daemon runs in, and cgroup ids resolve to paths only below the
// cgroup2 mount it reads. In a container without hostPID, or with its own cgroup namespace and
// no host hierarchy mounted, both are silently partial; the daemon says so once at start and
// exports it (iouscope_host_visible), so a misdeployed DaemonSet shows in Prometheus.
#include <string>
#include <vector>

#include "collect/cgroups.hpp"

namespace iouscope {

struct HostView {
    bool host_pid_namespace = true;  // the daemon runs in the initial PID namespace
    Cgroup2Mount cgroup;             // the mount cgroup paths are read from
};

// The inode of a /proc/self/ns/pid link, 0 if it cannot be read.
std::uint64_t namespace_inode(const std::string& link = "/proc/self/ns/pid");

// The initial PID namespace has a fixed inode, PROC_PID_INIT_INO (include/linux/proc_ns.h,
// 0xEFFFFFFC since 3.8), so no view of the host's /proc is needed to recognise it.
constexpr std::uint64_t kInitPidNamespaceIno = 0xEFFFFFFCu;

HostView read_host_view();

// One sentence per limit, each naming what is missed and how to lift it; empty when the daemon
// sees the whole host.
std::vector<std::string> host_view_limits(const HostView& view);

}  // namespace iouscope
