// Container and pod identity from real cgroup v2 hierarchies: each test builds the cgroups that a
// container runtime would (under a prefix of its own, so the host's are never touched), moves a
// load generator into them and reads uringscope_process_info.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

using namespace live;
using namespace std::chrono;
namespace fs = std::filesystem;

std::string load_bin() {
    return build_dir() + "/uringscope-load";
}

// The cgroup2 mount in /proc/self/mountinfo, empty if there is none.
std::string cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        const auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) continue;
        std::istringstream f(line);
        std::string id, parent, dev, root, point;
        f >> id >> parent >> dev >> root >> point;
        return point;
    }
    return {};
}

const std::string kId(64, 'c');
const std::string kUid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
const std::string kUidSystemd = "0a1b2c3d_4e5f_6789_abcd_ef0123456789";

struct Shape {
    const char* runtime;
    std::string path;  // below the test's prefix
    std::string container_id, pod_uid;
};

// The layouts the runtimes and the kubelet create, one per runtime and cgroup driver.
std::vector<Shape> shapes() {
    const auto id = [](char c) { return std::string(64, c); };
    return {
        {"containerd, systemd driver",
         "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
             ".slice/cri-containerd-" + id('1') + ".scope",
         "containerd://" + id('1'), kUid},
        {"cri-o, guaranteed pod",
         "/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/crio-" + id('2') + ".scope",
         "cri-o://" + id('2'), kUid},
        {"kubelet cgroupfs driver", "/kubepods/besteffort/pod" + kUid + "/" + id('3'), id('3'),
         kUid},
        {"docker", "/system.slice/docker-" + id('4') + ".scope", "docker://" + id('4'), ""},
        {"podman", "/machine.slice/libpod-" + id('5') + ".scope", "podman://" + id('5'), ""},
    };
}

class Containers : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root to load BPF programs and make cgroups";
        mount_ = cgroup2_mount();
        if (mount_.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy is mounted here";
        prefix_ = "/uringscope-test-" + std::to_string(getpid());
        daemon_ = std::make_unique<Daemon>(std::vector<std::string>{"--sample.interval=200ms"});
        ASSERT_TRUE(daemon_->ready()) << daemon_->startup_log();
    }
    void TearDown() override {
        loads_.clear();  // the processes leave their cgroups when they exit
        std::this_thread::sleep_for(milliseconds(200));
        if (mount_.empty()) return;
        // Leaves first: a cgroup is removed only when it is empty.
        std::vector<fs::path> dirs;
        std::error_code ec;
        for (fs::recursive_directory_iterator it(mount_ + prefix_, ec), end; it != end;
             it.increment(ec))
            if (it->is_directory(ec)) dirs.push_back(it->path());
        std::sort(dirs.rbegin(), dirs.rend());
        for (const auto& d : dirs) fs::remove(d, ec);
        fs::remove(mount_ + prefix_, ec);
    }

    // A load generator with an SQPOLL ring, moved into `path` (made below the prefix).
    pid_t start_in(const std::string& path) {
        const fs::path dir = mount_ + prefix_ + path;
        fs::create_directories(dir);
        auto c = std::make_unique<Child>(std::vector<std::string>{
            load_bin(), "--ring", "sqpoll,idle=1,rate=10", "--duration", "60s"});
        const auto rings = read_load_rings(*c, "setup", "started", seconds(30));
        EXPECT_EQ(rings.size(), 1u);
        std::ofstream(dir / "cgroup.procs") << c->pid() << "\n";
        const pid_t pid = c->pid();
        loads_.push_back(std::move(c));
        return pid;
    }

    // uringscope_process_info's labels for pid, once the daemon shows it with a cgroup.
    std::map<std::string, std::string> process_info(pid_t pid) {
        std::map<std::string, std::string> labels;
        eventually(seconds(10), [&] {
            for (const auto& s : daemon_->scrape())
                if (s.name == "uringscope_process_info" &&
                    s.labels.at("pid") == std::to_string(pid) &&
                    s.labels.at("cgroup").find(prefix_) == 0) {
                    labels = s.labels;
                    return true;
                }
            return false;
        });
        return labels;
    }

    std::string mount_, prefix_;
    std::unique_ptr<Daemon> daemon_;
    std::vector<std::unique_ptr<Child>> loads_;
};

TEST_F(Containers, EveryRuntimesLayoutNamesItsContainerAndPod) {
    std::vector<std::pair<Shape, pid_t>> started;
    for (const auto& s : shapes()) started.emplace_back(s, start_in(s.path));
    for (const auto& [shape, pid] : started) {
        SCOPED_TRACE(shape.runtime);
        const auto l = process_info(pid);
        ASSERT_FALSE(l.empty()) << "no uringscope_process_info for pid " << pid << " in "
                                << prefix_ + shape.path;
        EXPECT_EQ(l.at("cgroup"), prefix_ + shape.path);
        EXPECT_EQ(l.at("container_id"), shape.container_id);
        EXPECT_EQ(l.at("pod_uid"), shape.pod_uid);
        EXPECT_EQ(l.at("comm"), "uringscope-load");
    }
}

TEST_F(Containers, AHostProcessHasACgroupAndNoContainer) {
    const pid_t pid = start_in("/system.slice/app.service");
    const auto l = process_info(pid);
    ASSERT_FALSE(l.empty());
    EXPECT_EQ(l.at("cgroup"), prefix_ + "/system.slice/app.service");
    EXPECT_EQ(l.at("container_id"), "");
    EXPECT_EQ(l.at("pod_uid"), "");
}

}  // namespace
