// NVMe passthrough paths beyond one namespace on one controller: commands with a metadata
// buffer, multipath head char devices, and nvme_core loaded after the daemon started. They need
// the guest of `tests/vm/run --nvme-subsystem` (two controllers sharing a plain namespace and
// one with 8 bytes of metadata per block); elsewhere they skip for want of such a namespace.
//
// The commands are issued here, through liburing, rather than by fio: Debian's fio (3.33) cannot
// send a metadata buffer. Each test counts the CQEs it reaped and holds the daemon to them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "tests/live/harness.hpp"

using namespace live;
using namespace std::chrono;
namespace fs = std::filesystem;

namespace {

// One NVMe namespace as its passthrough char device shows it.
struct Namespace {
    std::string ng;                  // ng2n1
    std::string disk;                // nvme2n1: the head's disk under multipath
    std::vector<std::string> paths;  // the disks requests complete on: the paths, or disk
    std::uint32_t nsid = 0;
    std::uint32_t block = 0;     // logical block size
    std::uint16_t metadata = 0;  // metadata bytes per block (separate buffer)
    bool head() const { return paths.size() != 1 || paths[0] != disk; }
};

// Identify Namespace through the char device: the block size and metadata of the format in use.
bool identify(int fd, Namespace& ns) {
    const int id = ioctl(fd, NVME_IOCTL_ID);
    if (id <= 0) return false;
    ns.nsid = static_cast<std::uint32_t>(id);
    alignas(4096) static unsigned char data[4096];
    nvme_admin_cmd cmd{};
    cmd.opcode = 0x06;  // Identify
    cmd.nsid = ns.nsid;
    cmd.addr = reinterpret_cast<std::uint64_t>(data);
    cmd.data_len = sizeof data;
    cmd.cdw10 = 0;  // CNS 0: the namespace
    if (ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd) != 0) return false;
    const unsigned flbas = data[26];
    const unsigned format = (flbas & 0xf) | ((flbas >> 5) & 0x3) << 4;
    const unsigned char* lbaf = data + 128 + 4 * format;
    ns.metadata = static_cast<std::uint16_t>(lbaf[0] | lbaf[1] << 8);
    ns.block = 1u << lbaf[2];
    return ns.block >= 512;
}

std::vector<Namespace> namespaces() {
    std::vector<Namespace> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev", ec)) {
        const auto n = e.path().filename().string();
        if (n.rfind("ng", 0) != 0 || n.find('n', 2) == std::string::npos) continue;
        Namespace ns;
        ns.ng = n;
        ns.disk = "nvme" + n.substr(2);
        ns.paths = path_disks(ns.disk);
        const int fd = ::open(e.path().c_str(), O_RDONLY);
        if (fd < 0) continue;
        const bool ok = identify(fd, ns);
        ::close(fd);
        if (ok) out.push_back(ns);
    }
    return out;
}

// Reads `count` single blocks through NVME_URING_CMD_IO, eight in flight, with a metadata
// buffer when the format has metadata. Returns the CQEs reaped; `failed` counts those with an
// error or NVMe status.
unsigned passthrough_reads(const Namespace& ns, unsigned count, bool iopoll, unsigned& failed,
                           std::string& error) {
    failed = 0;
    const int fd = ::open(("/dev/" + ns.ng).c_str(), O_RDONLY);
    if (fd < 0) {
        error = "open /dev/" + ns.ng + ": " + std::strerror(errno);
        return 0;
    }
    io_uring ring{};
    const unsigned flags =
        IORING_SETUP_SQE128 | IORING_SETUP_CQE32 | (iopoll ? IORING_SETUP_IOPOLL : 0u);
    if (int rc = io_uring_queue_init(16, &ring, flags); rc < 0) {
        error = std::string("io_uring_queue_init: ") + std::strerror(-rc);
        ::close(fd);
        return 0;
    }
    constexpr unsigned kDepth = 8;
    std::vector<char*> data(kDepth), meta(kDepth);
    for (unsigned i = 0; i < kDepth; ++i) {
        data[i] = static_cast<char*>(std::aligned_alloc(4096, ns.block));
        meta[i] = static_cast<char*>(std::aligned_alloc(64, 64));
    }
    unsigned submitted = 0, reaped = 0, inflight = 0;
    auto submit = [&](unsigned slot) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd, nullptr, 0, 0);
        sqe->cmd_op = NVME_URING_CMD_IO;
        sqe->user_data = slot;
        nvme_uring_cmd c{};
        c.opcode = 0x02;  // Read
        c.nsid = ns.nsid;
        c.addr = reinterpret_cast<std::uint64_t>(data[slot]);
        c.data_len = ns.block;
        if (ns.metadata) {
            c.metadata = reinterpret_cast<std::uint64_t>(meta[slot]);
            c.metadata_len = ns.metadata;
        }
        c.cdw10 = submitted % 4096;  // starting block; cdw12 = 0: one block
        // The command lives in the SQE's second half (SQE128), past the 64-byte struct that
        // io_uring_sqe declares: GCC's bounds check cannot see that the ring was set up so.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
        std::memcpy(sqe->cmd, &c, sizeof c);
#pragma GCC diagnostic pop
        ++submitted;
        ++inflight;
    };
    for (unsigned i = 0; i < kDepth && submitted < count; ++i) submit(i);
    while (reaped < count) {
        if (int rc = io_uring_submit_and_wait(&ring, 1); rc < 0 && rc != -EINTR) {
            error = std::string("io_uring_submit_and_wait: ") + std::strerror(-rc);
            break;
        }
        io_uring_cqe* cqe = nullptr;
        while (io_uring_peek_cqe(&ring, &cqe) == 0 && cqe) {
            const auto slot = static_cast<unsigned>(cqe->user_data);
            if (cqe->res != 0) {
                if (failed == 0)
                    error = ns.ng + ": first failed read: res " + std::to_string(cqe->res);
                ++failed;
            }
            io_uring_cqe_seen(&ring, cqe);
            ++reaped;
            --inflight;
            if (submitted < count) submit(slot);
        }
    }
    io_uring_queue_exit(&ring);
    ::close(fd);
    for (unsigned i = 0; i < kDepth; ++i) {
        std::free(data[i]);
        std::free(meta[i]);
    }
    return reaped;
}

// A per-device NVMe counter summed over some disks, or over every device but them.
double device_sum(const std::vector<Series>& all, const std::string& name,
                  const std::vector<std::string>& disks, bool others,
                  const std::map<std::string, std::string>& extra = {}) {
    double sum = 0;
    for (const auto& s : all) {
        if (s.name != name) continue;
        auto dev = s.labels.find("device");
        if (dev == s.labels.end()) continue;
        const bool in = std::find(disks.begin(), disks.end(), dev->second) != disks.end();
        if (in == others) continue;
        if (labels_match(s, extra)) sum += s.value;
    }
    return sum;
}

// What the daemon counted on a namespace's disks.
struct DeviceCounts {
    double completions = 0, polled = 0, cqes = 0, polls = 0, polls_elsewhere = 0;
};

DeviceCounts device_counts(Daemon& d, const Namespace& ns) {
    const auto all = d.scrape();
    DeviceCounts c;
    const std::string comp = "iouscope_nvme_uring_cmd_completions_total";
    c.completions = device_sum(all, comp, ns.paths, false);
    c.polled = device_sum(all, comp, ns.paths, false, {{"polled", "true"}});
    c.cqes = device_sum(all, "iouscope_nvme_uring_cmd_cqes_total", ns.paths, false);
    c.polls = device_sum(all, "iouscope_nvme_uring_cmd_polls_total", ns.paths, false);
    c.polls_elsewhere = device_sum(all, "iouscope_nvme_uring_cmd_polls_total", ns.paths, true);
    return c;
}

// The daemon with the deep tier, with fentry (GetParam() false) or without: then the NVMe
// completions come from the block_rq_complete tracepoint, which matches both end_io
// callbacks by address.
class NvmePaths : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root";
        if (!fs::exists("/sys/kernel/btf/vmlinux")) GTEST_SKIP() << "no BTF";
        for (auto& ns : namespaces()) {
            std::printf("namespace %s: nsid %u, %u-byte blocks, %u bytes of metadata, paths:",
                        ns.ng.c_str(), ns.nsid, ns.block, ns.metadata);
            for (const auto& p : ns.paths) std::printf(" %s", p.c_str());
            std::printf("\n");
            (ns.metadata ? meta_ : ns.head() ? multipath_ : plain_).push_back(ns);
        }
        if (meta_.empty() && multipath_.empty())
            GTEST_SKIP() << "no NVMe namespace with metadata or multipath "
                            "(tests/vm/run --nvme-subsystem)";
        std::vector<std::string> args{"--sample.interval=200ms", "--probes.deep"};
        if (GetParam()) args.push_back("--no-fentry");
        daemon_ = std::make_unique<Daemon>(args);
        ASSERT_TRUE(daemon_->ready()) << daemon_->startup_log();
        // The kernel has the namespaces, so it has passthrough: the probe must be there.
        ASSERT_TRUE(probe_attached(*daemon_, "nvme_uring_cmd_end_io")) << daemon_->startup_log();
    }
    std::unique_ptr<Daemon> daemon_;
    std::vector<Namespace> meta_, multipath_, plain_;
};

std::string tier_name(const ::testing::TestParamInfo<bool>& p) {
    return p.param ? "no_fentry" : "fentry";
}

}  // namespace

// 6.1-6.7 complete a command that carries a metadata buffer through nvme_uring_cmd_end_io_meta,
// which the daemon did not watch: such commands were never counted.
TEST_P(NvmePaths, CommandsWithMetadataAreCounted) {
    if (meta_.empty())
        GTEST_SKIP() << "no NVMe namespace with metadata (tests/vm/run --nvme-subsystem)";
    const bool cmd_done = probe_attached(*daemon_, "io_uring_cmd_done");
    for (const auto& ns : meta_) {
        for (bool iopoll : {false, true}) {
            const auto before = device_counts(*daemon_, ns);
            unsigned failed = 0;
            std::string error;
            const unsigned n = passthrough_reads(ns, 400, iopoll, failed, error);
            ASSERT_EQ(n, 400u) << error;
            DeviceCounts after;
            eventually(seconds(3), [&] {
                after = device_counts(*daemon_, ns);
                return after.completions - before.completions >= n &&
                       (!cmd_done || after.cqes - before.cqes >= n);
            });
            std::printf(
                "%s %s: %u reads with %u bytes of metadata (%u failed%s%s), daemon: "
                "%.0f completions (%.0f polled), %.0f CQEs\n",
                ns.ng.c_str(), iopoll ? "IOPOLL" : "IRQ", n, ns.metadata, failed,
                failed ? ": " : "", error.c_str(), after.completions - before.completions,
                after.polled - before.polled, after.cqes - before.cqes);
            EXPECT_EQ(after.completions - before.completions, n) << ns.ng;
            if (cmd_done) {
                EXPECT_EQ(after.cqes - before.cqes, n) << ns.ng;
            }
        }
    }
}

// A multipath head char device polls the path the request went down. Before, 6.1's separate
// head iopoll was not watched (no polls at all) and later kernels' shared iopoll took the head's
// char device for a namespace's (container_of on the wrong struct: polls on a garbage name).
TEST_P(NvmePaths, MultipathPollsAreCountedOnThePathTheyPoll) {
    if (multipath_.empty())
        GTEST_SKIP() << "no multipath NVMe namespace (tests/vm/run --nvme-subsystem)";
    ASSERT_TRUE(probe_attached(*daemon_, "nvme_uring_cmd_iopoll")) << daemon_->startup_log();
    for (const auto& ns : multipath_) {
        const auto before = device_counts(*daemon_, ns);
        unsigned failed = 0;
        std::string error;
        const unsigned n = passthrough_reads(ns, 600, true, failed, error);
        ASSERT_EQ(n, 600u) << error;
        EXPECT_EQ(failed, 0u) << error;
        DeviceCounts after;
        eventually(seconds(3), [&] {
            after = device_counts(*daemon_, ns);
            return after.completions - before.completions >= n && after.polls > before.polls;
        });
        const double polls = after.polls - before.polls;
        const double elsewhere = after.polls_elsewhere - before.polls_elsewhere;
        std::printf(
            "%s (head of %zu paths), IOPOLL: %u reads, daemon: %.0f completions "
            "(%.0f polled), %.0f polls on its paths, %.0f polls elsewhere\n",
            ns.ng.c_str(), ns.paths.size(), n, after.completions - before.completions,
            after.polled - before.polled, polls, elsewhere);
        EXPECT_EQ(after.completions - before.completions, n) << ns.ng;
        EXPECT_EQ(after.polled - before.polled, n) << ns.ng << ": the paths have poll queues";
        EXPECT_GT(polls, 0) << ns.ng;
        EXPECT_EQ(elsewhere, 0) << ns.ng << ": polls counted on a disk that is not its path";
    }
}

INSTANTIATE_TEST_SUITE_P(Tiers, NvmePaths, ::testing::Values(false, true), tier_name);

namespace {

int run(const std::string& cmd) {
    std::printf("$ %s\n", cmd.c_str());
    std::fflush(stdout);
    int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// What the daemon logged since it became ready (for failure messages).
std::string daemon_output(Daemon& d) {
    std::string out;
    while (auto line = d.process().read_line(milliseconds(500))) out += *line + "\n";
    return out;
}

std::optional<Namespace> polled_plain_namespace() {
    for (const auto& ns : namespaces())
        if (!ns.metadata && !ns.head() &&
            read_first_line("/sys/block/" + ns.disk + "/queue/io_poll") == "1")
            return ns;
    return std::nullopt;
}

}  // namespace

// nvme_core loaded after the daemon started, and reloaded: the tracepoint variant waits for it
// (iouscope_probe_waiting) and then counts every command. Before, the variant needed the
// module's BTF at start and the probe stayed off; with a weak ksym it would have matched
// nothing. Unloads the NVMe driver, so it runs only in a throwaway guest of tests/vm/run.
TEST(NvmeLate, CoreLoadedAfterStartIsFollowed) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    const char* modules = std::getenv("IOUSCOPE_VM_MODULES");
    if (!std::getenv("IOUSCOPE_VM") || !modules)
        GTEST_SKIP() << "unloads the NVMe driver: only in a tests/vm/run guest";
    if (!fs::exists("/sys/module/nvme_core/initstate"))
        GTEST_SKIP() << "nvme_core is not a loadable module here";
    const std::string modprobe = std::string("modprobe -d ") + modules + " ";
    auto unload = [&] { return run("rmmod nvme && rmmod nvme_core"); };
    auto load = [&] {
        if (run(modprobe + "nvme poll_queues=1") != 0) return false;
        return eventually(seconds(60), [] { return polled_plain_namespace().has_value(); });
    };
    ASSERT_EQ(unload(), 0) << "cannot unload nvme and nvme_core (in use?)";
    Daemon daemon({"--sample.interval=200ms", "--probes.deep"});
    ASSERT_TRUE(daemon.ready()) << daemon.startup_log();
    const std::map<std::string, std::string> end_io{{"probe", "nvme_uring_cmd_end_io"}};
    EXPECT_EQ(find_value(daemon.scrape(), "iouscope_probe_attached", end_io), 1)
        << daemon.startup_log();
    EXPECT_EQ(find_value(daemon.scrape(), "iouscope_probe_waiting", end_io), 1);
    const pid_t pid = daemon.process().pid();
    EXPECT_EQ(links_of(pid, "iou_tp_nvme"), 0) << "waiting, yet attached to every block request";
    EXPECT_EQ(find_value(daemon.scrape(), "iouscope_probe_attached",
                         {{"probe", "nvme_uring_cmd_iopoll"}}),
              0)
        << "fentry and kprobes on nvme_core need it loaded at start";
    for (int round = 1; round <= 2; ++round) {
        if (round == 2) {
            ASSERT_EQ(unload(), 0);
            ASSERT_TRUE(eventually(seconds(10), [&] {
                return find_value(daemon.scrape(), "iouscope_probe_waiting", end_io) == 1.0;
            })) << "nvme_core unloaded, yet the probe does not wait for it";
            EXPECT_EQ(links_of(pid, "iou_tp_nvme"), 0) << "nvme_core unloaded, link still on";
        }
        ASSERT_TRUE(load()) << "nvme did not come back with a polled namespace";
        ASSERT_TRUE(eventually(
            seconds(10),
            [&] { return find_value(daemon.scrape(), "iouscope_probe_waiting", end_io) == 0.0; }))
            << "the probe still waits for nvme_core; daemon said:\n"
            << daemon_output(daemon);
        EXPECT_EQ(links_of(pid, "iou_tp_nvme"), 1) << "nvme_core loaded, link still off";
        auto ns = polled_plain_namespace();
        ASSERT_TRUE(ns);
        for (bool iopoll : {false, true}) {
            const auto before = device_counts(daemon, *ns);
            unsigned failed = 0;
            std::string error;
            const unsigned n = passthrough_reads(*ns, 300, iopoll, failed, error);
            ASSERT_EQ(n, 300u) << error;
            DeviceCounts after;
            eventually(seconds(3), [&] {
                after = device_counts(daemon, *ns);
                return after.completions - before.completions >= n;
            });
            std::printf("load %d, %s %s: %u reads, daemon: %.0f completions (%.0f polled)\n", round,
                        ns->ng.c_str(), iopoll ? "IOPOLL" : "IRQ", n,
                        after.completions - before.completions, after.polled - before.polled);
            EXPECT_EQ(after.completions - before.completions, n) << "load " << round;
            if (iopoll) {
                EXPECT_EQ(after.polled - before.polled, n) << "load " << round;
            }
        }
    }
}
