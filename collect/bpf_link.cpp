// The RAII owners of links and fds (collect/bpf_link.hpp).
#include "collect/bpf_link.hpp"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace iouscope {

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

std::unique_ptr<AttachedProbe> AttachedProbe::make(bpf_program* prog, std::string& error) {
    bpf_link* l = bpf_program__attach(prog);
    if (!l) {
        error = std::string("attach failed: ") + std::strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<AttachedProbe>(new AttachedProbe(l));
}

AttachedProbe::~AttachedProbe() {
    bpf_link__destroy(link_);
}

}  // namespace iouscope
