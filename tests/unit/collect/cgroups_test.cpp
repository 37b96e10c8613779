#include "collect/cgroups.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "collect/host_view.hpp"

namespace iouscope {
namespace {

namespace fs = std::filesystem;

std::uint64_t ino(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_ino;
}

class CgroupTree : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("iouscope-cgroups-" + std::to_string(getpid()));
        fs::create_directories(root_ / "kubepods.slice" / "pod-a");
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_;
};

TEST(FindCgroup2Mount, HybridAndUnifiedHostsAndV1Only) {
    const auto file = fs::temp_directory_path() / ("mountinfo-" + std::to_string(getpid()));
    const auto write = [&](const std::string& text) { std::ofstream(file) << text; };
    const auto point = [&] { return find_cgroup2_mount(file.string()).point; };
    write(
        "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
        "27 25 0:25 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu\n");
    EXPECT_EQ(point(), "/sys/fs/cgroup/unified");
    write("30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n");
    EXPECT_EQ(point(), "/sys/fs/cgroup");
    write("27 25 0:25 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu\n");
    EXPECT_EQ(point(), "");
    fs::remove(file);
}

// A container with its own cgroup namespace: the runtime's mount shows the container's subtree,
// a hostPath volume the whole hierarchy. The one whose top is the root cgroup wins, wherever
// it is listed; with none, the first is used and marked partial.
TEST(FindCgroup2Mount, PrefersTheWholeHierarchyOverANamespacesSubtree) {
    const auto file = fs::temp_directory_path() / ("mountinfo-ns-" + std::to_string(getpid()));
    std::ofstream(file)
        << "700 690 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
           "701 690 0:26 /../../.. /host/sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n";
    std::map<std::string, std::uint64_t> inodes = {{"/sys/fs/cgroup", 4242},
                                                   {"/host/sys/fs/cgroup", 1}};
    const auto inode_of = [&](const std::string& p) { return inodes[p]; };
    auto m = find_cgroup2_mount(file.string(), inode_of);
    EXPECT_EQ(m.point, "/host/sys/fs/cgroup");
    EXPECT_TRUE(m.whole_hierarchy);
    inodes["/host/sys/fs/cgroup"] = 4243;
    m = find_cgroup2_mount(file.string(), inode_of);
    EXPECT_EQ(m.point, "/sys/fs/cgroup");
    EXPECT_FALSE(m.whole_hierarchy);
    fs::remove(file);
}

TEST(HostView, EachLimitIsNamedWithItsRemedy) {
    HostView v{true, {"/sys/fs/cgroup", true}};
    EXPECT_TRUE(host_view_limits(v).empty());
    v.host_pid_namespace = false;
    auto limits = host_view_limits(v);
    ASSERT_EQ(limits.size(), 1u);
    EXPECT_NE(limits[0].find("hostPID"), std::string::npos) << limits[0];
    v = {true, {"/sys/fs/cgroup", false}};
    limits = host_view_limits(v);
    ASSERT_EQ(limits.size(), 1u);
    EXPECT_NE(limits[0].find("/sys/fs/cgroup shows only part"), std::string::npos) << limits[0];
    v = {false, {"", false}};
    limits = host_view_limits(v);
    ASSERT_EQ(limits.size(), 2u);
    EXPECT_NE(limits[1].find("cgroup v1 only"), std::string::npos) << limits[1];
}

// The kernel's own answer: the test command runs on a host or a VM guest, never in a container,
// so this process is in the initial PID namespace.
TEST(HostView, TheHostsPidNamespaceHasTheFixedInitInode) {
    EXPECT_EQ(namespace_inode(), kInitPidNamespaceIno);
    EXPECT_TRUE(read_host_view().host_pid_namespace);
}

TEST_F(CgroupTree, IdsResolveToPathsBelowTheMount) {
    CgroupPaths paths(root_.string());
    const auto pod = ino(root_ / "kubepods.slice" / "pod-a");
    const auto got = paths.resolve({ino(root_), pod});
    EXPECT_EQ(got.at(ino(root_)), "/");
    EXPECT_EQ(got.at(pod), "/kubepods.slice/pod-a");
    EXPECT_EQ(paths.rescans(), 1u);
    // Known ids cost no walk.
    paths.resolve({pod});
    EXPECT_EQ(paths.rescans(), 1u);
}

TEST_F(CgroupTree, ANewCgroupIsFoundByOneRescan) {
    CgroupPaths paths(root_.string());
    paths.min_rescan = std::chrono::milliseconds(0);
    paths.resolve({ino(root_)});
    fs::create_directories(root_ / "system.slice" / "docker-x.scope");
    const auto id = ino(root_ / "system.slice" / "docker-x.scope");
    EXPECT_EQ(paths.resolve({id}).at(id), "/system.slice/docker-x.scope");
    EXPECT_EQ(paths.rescans(), 2u);
}

TEST_F(CgroupTree, AnIdOutOfViewIsNotWalkedForAgainAndAgain) {
    CgroupPaths paths(root_.string());
    paths.min_rescan = std::chrono::milliseconds(0);
    const std::uint64_t unseen = ~0ull;
    EXPECT_TRUE(paths.resolve({unseen}).empty());
    EXPECT_TRUE(paths.resolve({unseen}).empty());
    EXPECT_TRUE(paths.resolve({unseen, ino(root_)}).count(ino(root_)));
    EXPECT_EQ(paths.rescans(), 1u);
    // A removed cgroup drops out of the map at the next rescan, which a new id triggers.
    // (The new directory first: a file system may give a removed one's inode to the next.)
    const auto pod = ino(root_ / "kubepods.slice" / "pod-a");
    fs::create_directories(root_ / "new");
    fs::remove(root_ / "kubepods.slice" / "pod-a");
    paths.resolve({ino(root_ / "new")});
    EXPECT_EQ(paths.rescans(), 2u);
    EXPECT_TRUE(paths.resolve({pod}).empty());
}

}  // namespace
}  // namespace iouscope
