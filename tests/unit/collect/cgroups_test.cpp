#include "collect/cgroups.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace uringscope {
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
        root_ = fs::temp_directory_path() / ("uringscope-cgroups-" + std::to_string(getpid()));
        fs::create_directories(root_ / "kubepods.slice" / "pod-a");
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_;
};

TEST(FindCgroup2Mount, HybridAndUnifiedHostsAndV1Only) {
    const auto file = fs::temp_directory_path() / ("mountinfo-" + std::to_string(getpid()));
    const auto write = [&](const std::string& text) { std::ofstream(file) << text; };
    write(
        "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
        "27 25 0:25 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu\n");
    EXPECT_EQ(find_cgroup2_mount(file.string()), "/sys/fs/cgroup/unified");
    write("30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n");
    EXPECT_EQ(find_cgroup2_mount(file.string()), "/sys/fs/cgroup");
    write("27 25 0:25 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu\n");
    EXPECT_EQ(find_cgroup2_mount(file.string()), "");
    fs::remove(file);
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
}  // namespace uringscope
