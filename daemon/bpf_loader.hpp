#pragma once
// Owns every kernel object uringscope creates: the BPF skeleton, its links and iterator fds.
// Each is held by an RAII type, so every exit path — including an exception or a signal that
// ends main() — detaches everything and leaves nothing of ours in `bpftool prog show`.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/kernel_features.hpp"
#include "daemon/snapshot.hpp"
#include "uringscope/records.h"

struct bpf_program;
struct bpf_link;
struct uringscope_bpf;

namespace uringscope {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd();
    UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& o) noexcept;
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// One attached program. make() attaches or explains why it could not; the destructor detaches.
class AttachedProbe {
public:
    static std::unique_ptr<AttachedProbe> make(bpf_program* prog, std::string& error);
    ~AttachedProbe();
    AttachedProbe(const AttachedProbe&) = delete;
    AttachedProbe& operator=(const AttachedProbe&) = delete;
    bpf_link* link() const { return link_; }

private:
    explicit AttachedProbe(bpf_link* l) : link_(l) {}
    bpf_link* link_;
};

struct SkeletonDeleter {
    void operator()(uringscope_bpf* s) const;
};

// What a program needs from the kernel before we try to load it.
struct Requirement {
    enum class Kind { btf_typedef, btf_struct, btf_func, ksym } kind;
    const char* name;
};

struct ProbeSpec {
    const char* name;  // metric label "probe"
    const char* kind;  // metric label "kind": the attach type
    bpf_program* (*program)(uringscope_bpf*);
    std::vector<Requirement> needs;
    bool essential;    // without it the daemon has nothing to report and refuses to start
};

// The programs of bpf/uringscope.bpf.c and what each one needs.
const std::vector<ProbeSpec>& probe_table();

// Loads the programs the kernel can run, attaches them, and reads their maps.
class BpfCollector {
public:
    // Returns nullptr and sets error when an essential program cannot run.
    static std::unique_ptr<BpfCollector> make(const KernelFeatures& kf, std::string& error);
    ~BpfCollector();

    const std::vector<ProbeState>& probes() const { return probes_; }

    // One walk of every task's files; appends one record per io_uring file.
    bool walk_rings(std::vector<usc_ring_record>& out, std::string& error);
    void read_sched(std::vector<std::pair<std::uint32_t, usc_sched_state>>& out) const;
    void read_wakers(std::vector<std::pair<usc_waker_key, usc_waker_val>>& out) const;
    // Moves every pending io_uring_create record out of the map.
    void drain_created(std::vector<usc_created_ring>& out);
    usc_stats stats() const;
    // Drops a thread's sched state and its wakers once it is gone.
    void forget_thread(std::uint32_t tid);

private:
    BpfCollector() = default;
    // Declared before links_ so links are destroyed first: detach, then unload.
    std::unique_ptr<uringscope_bpf, SkeletonDeleter> skel_;
    std::vector<std::unique_ptr<AttachedProbe>> links_;
    bpf_link* iter_link_ = nullptr;
    std::vector<ProbeState> probes_;
};

}  // namespace uringscope
