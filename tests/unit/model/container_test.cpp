#include "model/container.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace iouscope {
namespace {

const std::string kId =
    "4f1c0a2b9d8e7f60"
    "1a2b3c4d5e6f7a8b"
    "9c0d1e2f3a4b5c6d"
    "7e8f9a0b1c2d3e4f";
const std::string kUid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
const std::string kUidSystemd = "0a1b2c3d_4e5f_6789_abcd_ef0123456789";

TEST(ContainerOfCgroup, ContainerdUnderTheSystemdDriver) {
    const auto c =
        container_of_cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                            kUidSystemd + ".slice/cri-containerd-" + kId + ".scope");
    EXPECT_EQ(c.container_id, "containerd://" + kId);
    EXPECT_EQ(c.runtime, "containerd");
    EXPECT_EQ(c.pod_uid, kUid);  // dashes, as the API server writes it
}

TEST(ContainerOfCgroup, CriOInAGuaranteedPod) {
    const auto c = container_of_cgroup("/kubepods.slice/kubepods-pod" + kUidSystemd +
                                       ".slice/crio-" + kId + ".scope");
    EXPECT_EQ(c.container_id, "cri-o://" + kId);
    EXPECT_EQ(c.pod_uid, kUid);
}

TEST(ContainerOfCgroup, CriOsMonitorIsNotTheContainer) {
    const auto c = container_of_cgroup("/kubepods.slice/kubepods-pod" + kUidSystemd +
                                       ".slice/crio-conmon-" + kId + ".scope");
    EXPECT_EQ(c.container_id, "");
    EXPECT_EQ(c.pod_uid, kUid);
}

TEST(ContainerOfCgroup, CgroupfsDriverNamesNoRuntime) {
    const auto c = container_of_cgroup("/kubepods/besteffort/pod" + kUid + "/" + kId);
    EXPECT_EQ(c.container_id, kId);
    EXPECT_EQ(c.runtime, "");
    EXPECT_EQ(c.pod_uid, kUid);
}

TEST(ContainerOfCgroup, DockerUnderBothDrivers) {
    EXPECT_EQ(container_of_cgroup("/system.slice/docker-" + kId + ".scope").container_id,
              "docker://" + kId);
    const auto c = container_of_cgroup("/docker/" + kId);
    EXPECT_EQ(c.container_id, "docker://" + kId);
    EXPECT_EQ(c.runtime, "docker");
    EXPECT_EQ(c.pod_uid, "");
}

TEST(ContainerOfCgroup, PodmanRootfulAndRootless) {
    EXPECT_EQ(container_of_cgroup("/machine.slice/libpod-" + kId + ".scope").container_id,
              "podman://" + kId);
    EXPECT_EQ(container_of_cgroup("/user.slice/user-1000.slice/user@1000.service/user.slice/"
                                  "libpod-" +
                                  kId + ".scope")
                  .runtime,
              "podman");
}

// Podman's and CRI-O's cgroupfs driver (podman's default where systemd is not PID 1) name the
// container's cgroup as the scope unit without ".scope". Seen from tests/image/run.
TEST(ContainerOfCgroup, PodmanAndCriOUnderTheCgroupfsDriver) {
    const auto c = container_of_cgroup("/libpod_parent/libpod-" + kId);
    EXPECT_EQ(c.container_id, "podman://" + kId);
    EXPECT_EQ(c.runtime, "podman");
    EXPECT_EQ(container_of_cgroup("/kubepods/besteffort/pod" + kUid + "/crio-" + kId).container_id,
              "cri-o://" + kId);
    EXPECT_EQ(container_of_cgroup("/libpod_parent/libpod-conmon-" + kId).container_id, "");
}

TEST(ContainerOfCgroup, TheInnermostContainerWins) {
    const std::string inner(64, 'b');
    const auto c = container_of_cgroup("/system.slice/docker-" + kId + ".scope/docker/" + inner);
    EXPECT_EQ(c.container_id, "docker://" + inner);
}

TEST(ContainerOfCgroup, HostCgroupsAndLookAlikesAreNoContainer) {
    for (const std::string& p : std::vector<std::string>{
             "/", "", "/system.slice/sshd.service", "/user.slice/user-0.slice/session-3.scope",
             "/system.slice/docker-" + kId.substr(1) + ".scope",         // 63 digits
             "/system.slice/docker-" + std::string(64, 'G') + ".scope",  // not hex
             "/kubepods/burstable/pod1234/" + std::string(64, 'A')}) {   // upper case
        const auto c = container_of_cgroup(p);
        EXPECT_EQ(c.container_id, "") << p;
        EXPECT_EQ(c.pod_uid, "") << p;
    }
}

}  // namespace
}  // namespace iouscope
