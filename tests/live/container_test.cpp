// Container and pod identity from real cgroup v2 hierarchies: each test builds the cgroups that a
// container runtime would (under a prefix of its own, so the host's are never touched), moves a
// load generator into them and reads iouscope_process_info.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

using namespace live;
using namespace std::chrono;
namespace fs = std::filesystem;

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
        prefix_ = "/iouscope-test-" + std::to_string(getpid());
        if (!daemon_on_host()) return;
        daemon_ = std::make_unique<Daemon>(
            std::vector<std::string>{"--sample.interval=200ms", "--advise.window=5s"});
        ASSERT_TRUE(daemon_->ready()) << daemon_->startup_log();
    }
    virtual bool daemon_on_host() const { return true; }
    void TearDown() override {
        loads_.clear();   // the processes leave their cgroups when they exit
        daemon_.reset();  // a contained daemon is in a cgroup below the prefix, too
        std::this_thread::sleep_for(milliseconds(200));
        std::error_code ec;
        if (!host_dir_.empty()) fs::remove(host_dir_, ec);
        if (mount_.empty()) return;
        // Leaves first: a cgroup is removed only when it is empty.
        std::vector<fs::path> dirs;
        for (fs::recursive_directory_iterator it(mount_ + prefix_, ec), end; it != end;
             it.increment(ec))
            if (it->is_directory(ec)) dirs.push_back(it->path());
        std::sort(dirs.rbegin(), dirs.rend());
        for (const auto& d : dirs) fs::remove(d, ec);
        fs::remove(mount_ + prefix_, ec);
    }

    // A load generator with an SQPOLL ring, moved into `path` (made below the prefix).
    pid_t start_in(const std::string& path, const std::string& ring = "sqpoll,idle=1,rate=10") {
        const fs::path dir = mount_ + prefix_ + path;
        fs::create_directories(dir);
        auto c = std::make_unique<Child>(
            std::vector<std::string>{load_bin(), "--ring", ring, "--duration", "60s"});
        const auto rings = read_load_rings(*c, "setup", "started", seconds(30));
        EXPECT_EQ(rings.size(), 1u);
        std::ofstream(dir / "cgroup.procs") << c->pid() << "\n";
        const pid_t pid = c->pid();
        loads_.push_back(std::move(c));
        return pid;
    }

    // iouscope_process_info's labels for pid, once the daemon shows it with a cgroup.
    std::map<std::string, std::string> process_info(pid_t pid) {
        std::map<std::string, std::string> labels;
        eventually(seconds(10), [&] {
            for (const auto& s : daemon_->scrape())
                if (s.name == "iouscope_process_info" &&
                    s.labels.at("pid") == std::to_string(pid) &&
                    s.labels.at("cgroup").find(prefix_) == 0) {
                    labels = s.labels;
                    return true;
                }
            return false;
        });
        return labels;
    }

    std::string mount_, prefix_, host_dir_;
    std::unique_ptr<Daemon> daemon_;
    std::vector<std::unique_ptr<Child>> loads_;
};

TEST_F(Containers, EveryRuntimesLayoutNamesItsContainerAndPod) {
    std::vector<std::pair<Shape, pid_t>> started;
    for (const auto& s : shapes()) started.emplace_back(s, start_in(s.path));
    for (const auto& [shape, pid] : started) {
        SCOPED_TRACE(shape.runtime);
        const auto l = process_info(pid);
        ASSERT_FALSE(l.empty()) << "no iouscope_process_info for pid " << pid << " in "
                                << prefix_ + shape.path;
        EXPECT_EQ(l.at("cgroup"), prefix_ + shape.path);
        EXPECT_EQ(l.at("container_id"), shape.container_id);
        EXPECT_EQ(l.at("pod_uid"), shape.pod_uid);
        EXPECT_EQ(l.at("comm"), "iouscope-load");
    }
}

// What an operator reads: top's CONTAINER column and filter, and advise's findings, name the
// container. The load's SQ thread spins a whole CPU for 10 SQEs/s, which the advisor reports.
TEST_F(Containers, TopAndAdviseNameTheContainer) {
    const Shape pod = shapes().front();
    const pid_t pid = start_in(pod.path, "sqpoll,idle=1000,rate=10");
    start_in("/system.slice/other.service");  // a second load, which the filter leaves out
    ASSERT_FALSE(process_info(pid).empty());
    const std::string short_id = pod.container_id.substr(pod.container_id.find("://") + 3, 12);

    Child top({build_dir() + "/iouscope", "top", "-b", "-n", "1", "--width", "200", "--filter",
               short_id, "--daemon", daemon_->url().substr(0, daemon_->url().rfind('/'))});
    const std::string out = top.drain(seconds(20));
    EXPECT_EQ(top.wait(seconds(5)).value_or(-1), 0) << out;
    EXPECT_NE(out.find("CONTAINER"), std::string::npos) << out;
    EXPECT_NE(out.find(short_id), std::string::npos) << out;
    std::size_t rows = 0;
    for (auto at = out.find("iouscope-l"); at != std::string::npos;
         at = out.find("iouscope-l", at + 1))
        ++rows;
    EXPECT_EQ(rows, 1u) << "the filter must leave only the container's SQ thread:\n" << out;

    nlohmann::json mine;
    eventually(seconds(30), [&] {
        Child advise({build_dir() + "/iouscope", "advise", "--json", "--daemon",
                      daemon_->url().substr(0, daemon_->url().rfind('/'))});
        const auto text = advise.drain(seconds(20));
        advise.wait(seconds(5));
        try {
            for (const auto& f :
                 nlohmann::json::parse(text).value("findings", nlohmann::json::array()))
                if (f.value("pid", 0) == pid) mine = f;
        } catch (const nlohmann::json::exception&) {
        }
        return !mine.is_null();
    });
    ASSERT_FALSE(mine.is_null()) << "no finding for pid " << pid;
    EXPECT_EQ(mine.value("container_id", ""), pod.container_id) << mine.dump();
    EXPECT_EQ(mine.value("pod_uid", ""), pod.pod_uid) << mine.dump();
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

namespace {

// Kubernetes and docker run a container in cgroup and PID namespaces of its own. The daemon is
// started as one would be: a shell moves itself into a docker-shaped cgroup, then unshares what
// the case asks for and execs the daemon. docs/FLEET.md says what each case needs.
class ContainedDaemon : public Containers {
protected:
    bool daemon_on_host() const override { return false; }

    // `inner` runs after the unshare, before the daemon: "$0" is the cgroup2 mount point and
    // "$@" the daemon's argv.
    void start_contained(const std::string& unshare_flags, const std::string& inner) {
        const fs::path cg =
            mount_ + prefix_ + "/system.slice/docker-" + std::string(64, 'd') + ".scope";
        fs::create_directories(cg);
        const std::string script = "echo $$ > " + (cg / "cgroup.procs").string() +
                                   " && exec unshare " + unshare_flags + " -- sh -c '" + inner +
                                   " && exec \"$@\"' " + mount_ + " \"$@\"";
        daemon_ = std::make_unique<Daemon>(std::vector<std::string>{"--sample.interval=200ms"},
                                           std::vector<std::string>{"/bin/sh", "-c", script, "sh"});
        ASSERT_TRUE(daemon_->ready()) << daemon_->startup_log();
    }

    double gauge(const std::string& name, const std::string& label, const std::string& value) {
        for (const auto& s : daemon_->scrape())
            if (s.name == name && s.labels.count(label) && s.labels.at(label) == value)
                return s.value;
        return -1;
    }

    // The pids iouscope_process_info shows with comm iouscope-load.
    std::set<pid_t> load_pids() {
        std::set<pid_t> out;
        for (const auto& s : daemon_->scrape())
            if (s.name == "iouscope_process_info" && s.labels.at("comm") == "iouscope-load")
                out.insert(std::stoi(s.labels.at("pid")));
        return out;
    }
};

// How many PID namespaces a process is in (NSpid's fields in /proc/PID/status).
int pid_namespace_depth(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("NSpid:", 0) == 0) {
            std::istringstream f(line.substr(6));
            int n = 0;
            for (std::string w; f >> w;) ++n;
            return n;
        }
    return 0;
}

// Without hostPID the walk sees the daemon's namespace only: a ring held there, not one held on
// the host. The daemon must say so, in its log and in iouscope_host_visible.
TEST_F(ContainedDaemon, WithoutHostPidItSeesOnlyItsNamespaceAndSaysSo) {
    const pid_t host_load = start_in("/system.slice/app.service");
    const std::string inner_load =
        "\"" + load_bin() + "\" --ring sqpoll,idle=1,rate=10 --duration 60s >/dev/null &";
    start_contained("--pid --fork --kill-child --mount-proc", inner_load + " true");
    EXPECT_NE(daemon_->startup_log().find("PID namespace of its own"), std::string::npos)
        << daemon_->startup_log();
    pid_t inner = 0;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        for (pid_t p : load_pids())
            if (p != host_load) inner = p;
        return inner != 0;
    })) << "the load generator inside the namespace was never seen";
    EXPECT_EQ(pid_namespace_depth(inner), 2) << "pid " << inner << " is not the inner load";
    EXPECT_EQ(process_info(inner).at("container_id"), "docker://" + std::string(64, 'd'));
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(load_pids(), std::set<pid_t>{inner})
            << "the host's load (pid " << host_load << ") must be invisible here";
        std::this_thread::sleep_for(milliseconds(200));
    }
    EXPECT_EQ(gauge("iouscope_host_visible", "scope", "tasks"), 0);
    EXPECT_EQ(gauge("iouscope_host_visible", "scope", "cgroups"), 1);
}

// In its own cgroup namespace the runtime's cgroup2 mount shows the daemon's subtree: another
// container's cgroup id does not resolve, and the daemon says why. With the host's hierarchy
// mounted beside it, as deploy/kubernetes does, every container is named again.
TEST_F(ContainedDaemon, InItsOwnCgroupNamespaceItNeedsTheHostHierarchy) {
    const Shape pod = shapes().front();
    const pid_t load = start_in(pod.path);
    // What a runtime does in the container's mount namespace: its own cgroup2 mount, rooted at
    // the namespace's root. (The kernel refuses a second mount of it on the same mount, so the
    // host's is detached first.)
    const std::string remount = "umount -l \"$0\" && mount -t cgroup2 cgroup2 \"$0\"";
    start_contained("--cgroup --mount --propagation private", remount);
    EXPECT_NE(daemon_->startup_log().find("shows only part of the hierarchy"), std::string::npos)
        << daemon_->startup_log();
    std::map<std::string, std::string> seen;
    ASSERT_TRUE(eventually(seconds(10), [&] {
        for (const auto& s : daemon_->scrape())
            if (s.name == "iouscope_process_info" && s.labels.at("pid") == std::to_string(load))
                seen = s.labels;
        return !seen.empty();
    })) << "the walk must still see every ring: the daemon shares the host's PID namespace";
    EXPECT_EQ(seen.at("cgroup"), "");
    EXPECT_EQ(seen.at("container_id"), "");
    EXPECT_EQ(gauge("iouscope_host_visible", "scope", "cgroups"), 0);
    EXPECT_EQ(gauge("iouscope_host_visible", "scope", "tasks"), 1);

    daemon_.reset();
    host_dir_ = "/tmp/iouscope-test-host-cgroup-" + std::to_string(getpid());
    fs::create_directories(host_dir_);
    start_contained("--cgroup --mount --propagation private",
                    "mount --bind \"$0\" " + host_dir_ + " && " + remount);
    EXPECT_EQ(daemon_->startup_log().find("shows only part"), std::string::npos)
        << daemon_->startup_log();
    const auto l = process_info(load);
    EXPECT_EQ(gauge("iouscope_host_visible", "scope", "cgroups"), 1);
    ASSERT_FALSE(l.empty()) << "pid " << load << " never shown with its cgroup";
    EXPECT_EQ(l.at("cgroup"), prefix_ + pod.path);
    EXPECT_EQ(l.at("container_id"), pod.container_id);
    EXPECT_EQ(l.at("pod_uid"), pod.pod_uid);
}

}  // namespace
