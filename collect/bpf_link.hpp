#pragma once
// The RAII owners of what attaching creates: an attached program's link and a plain fd. Every
// exit path, an exception or a signal that ends main() included, detaches and closes them. What
// collect/gap_duty needs of the loader, and all it includes of it.
#include <memory>
#include <string>
#include <utility>

struct bpf_program;
struct bpf_link;

namespace iouscope {

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

}  // namespace iouscope
