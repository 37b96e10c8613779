#pragma once
// Helpers for live tests: real processes, real HTTP, real kernel. Nothing here is mocked.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace live {

// A child process with its stdout (and optionally stderr) captured line by line. The destructor
// sends SIGTERM, then SIGKILL after a grace period, so a failing test never leaks processes.
class Child {
public:
    explicit Child(std::vector<std::string> argv, bool merge_stderr = false);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }
    // Next line of output, or nullopt on EOF or timeout.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    // Everything read so far plus whatever arrives before EOF or timeout.
    std::string drain(std::chrono::milliseconds timeout);
    void signal(int sig);
    // Exit status (WEXITSTATUS, or 128+signal), or nullopt if still running after timeout.
    std::optional<int> wait(std::chrono::milliseconds timeout);

private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string buf_;
    std::string all_;
    std::optional<int> status_;
};

struct HttpResponse {
    long status = 0;
    std::string body;
    std::string error;
};
// GET with curl. For https:// URLs, `ca_file` is the only CA trusted (empty: the system's);
// `userpwd` ("user:password") adds HTTP basic auth. status 0 means no HTTP answer (see error).
HttpResponse http_get(const std::string& url, const std::string& ca_file = "",
                      const std::string& userpwd = "");

// A TCP port nobody listens on right now.
int free_port();

// One sample line of the text exposition format.
struct Series {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};
std::vector<Series> parse_exposition(const std::string& text);

// Whether the series' labels include all of `match`.
bool labels_match(const Series& s, const std::map<std::string, std::string>& match);

// First series with this name whose labels include all of `match`.
std::optional<double> find_value(const std::vector<Series>& all, const std::string& name,
                                 const std::map<std::string, std::string>& match);

// Every series with this name whose labels include all of `match`, summed; 0 without one.
double sum_values(const std::vector<Series>& all, const std::string& name,
                  const std::map<std::string, std::string>& match = {});

// Polls until pred returns true or the timeout passes; returns pred's last value.
bool eventually(std::chrono::milliseconds timeout, const std::function<bool()>& pred);

std::string build_dir();

// The disks an NVMe namespace's requests complete on: a multipath head's hidden path disks
// (nvme<S>c<C>n<N>), or the disk itself.
std::vector<std::string> path_disks(const std::string& disk);

// The first line of a file (sysfs attributes), empty if it cannot be read.
std::string read_first_line(const std::string& path);

// Why the daemon left a probe off, from its startup log ("probe NAME (KIND): off, REASON");
// empty when the log does not say the probe is off.
std::string probe_off_reason(const std::string& startup_log, const std::string& probe);

// True when every variant's reason is the kernel lacking something the probe needs (BTF, a
// symbol, kprobes, a module, the prototype, or fentry refused by the kernel's policy) or the
// probe not being asked for; false when a variant the kernel supports failed to load or attach,
// which is a regression of ours and must fail a test rather than skip it.
bool kernel_lacks(const std::string& reason);

// In a test: skips when the kernel cannot run the probe, fails when it could and the probe is
// off anyway.
#define REQUIRE_PROBE(daemon, attached_now, probe)                                              \
    do {                                                                                        \
        if (!(attached_now)) {                                                                  \
            const auto why_off = ::live::probe_off_reason((daemon).startup_log(), probe);       \
            if (::live::kernel_lacks(why_off)) GTEST_SKIP() << probe << " is off: " << why_off; \
            FAIL() << probe << " is off although the kernel has what it needs: " << why_off;    \
        }                                                                                       \
    } while (0)

// Why live tests cannot run here (not root, no BTF, io_uring disabled), or nullopt.
std::optional<std::string> live_tier_unavailable();

// Inside a tests/vm/run guest (IOUSCOPE_VM=1), where TCG runs everything 10 to 50 times slower.
// A test sized by a count may run a smaller one there, with the same assertions, where the
// count's size is proven on the host and the guests check the kernel's side of it.
bool in_vm_guest();

// A running iouscoped on a free loopback port.
class Daemon {
public:
    explicit Daemon(std::vector<std::string> extra_args = {});
    // The daemon started by `wrapper` (e.g. {"/bin/sh", "-c", "...; exec \"$@\"", "sh"}): the
    // daemon's argv is appended to it.
    Daemon(std::vector<std::string> extra_args, std::vector<std::string> wrapper);
    std::string url() const;
    std::vector<Series> scrape();
    Child& process() { return *child_; }
    bool ready() const { return ready_; }
    const std::string& startup_log() const { return log_; }

private:
    int port_;
    std::unique_ptr<Child> child_;
    bool ready_ = false;
    std::string log_;
};

// The build's programs, and a daemon's base URL (Daemon::url() is the metrics URL; the API and
// the CLI want the base).
std::string load_bin();
std::string cli_bin();
std::string base_url(Daemon& d);

// Whether the daemon reports the probe attached (iouscope_probe_attached{probe} == 1).
bool probe_attached(Daemon& d, const std::string& probe);

// One ring line printed by iouscope-load.
struct LoadRing {
    int index = -1;
    pid_t pid = 0;
    int fd = -1;
    std::string mode;
    int sq_thread = -1;
    unsigned long long sqes = 0, cqes = 0;
    // What io_uring_setup returned (setup lines): IORING_SETUP_* flags and queue sizes.
    unsigned setup_flags = 0, sq_entries = 0, cq_entries = 0;
    // The request keys: the opcode, IOSQE_ASYNC on every SQE, reads and splices that never
    // complete (not in sqes), and CQEs sent through the overflow path (in sqes; final lines
    // only).
    std::string op;
    bool async = false;
    unsigned long long stuck = 0, blocked = 0, overflowed = 0, enobufs = 0;
    std::string id() const { return std::to_string(pid) + ":" + std::to_string(fd); }
};
// Parses "ring ..." / "setup ..." key=value lines; returns nullopt for other lines.
std::optional<LoadRing> parse_load_line(const std::string& line, const std::string& kind);

// Reads lines of kind ("setup" or "ring") from the load generator until `end` ("started" or
// "done ...") appears.
std::vector<LoadRing> read_load_rings(Child& load, const std::string& kind, const std::string& end,
                                      std::chrono::milliseconds timeout);

// On-CPU nanoseconds of a thread from /proc/PID/task/TID/schedstat.
std::optional<unsigned long long> schedstat_ns(pid_t pid, pid_t tid);

// The name of loaded BPF program `id` (truncated by the kernel to 15 characters), nullopt when
// it is gone or unreadable.
std::optional<std::string> bpf_prog_name(unsigned id);

// BPF links that process `pid` holds open to programs whose name begins with `prefix`: what is
// attached for it now (its fdinfo names each link's program).
int links_of(pid_t pid, const std::string& prefix);

}  // namespace live
