#include "daemon/kernel_features.hpp"

#include <bcc/bcc_syms.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

namespace uringscope {

// BCC's cache reads /proc/kallsyms once, on first use; RAII frees it.
struct KernelFeatures::SymCache {
    std::once_flag once;
    void* cache = nullptr;
    ~SymCache() {
        if (cache) bcc_free_symcache(cache, -1);
    }
};

KernelFeatures::KernelFeatures() : syms_(std::make_unique<SymCache>()) {}
KernelFeatures::~KernelFeatures() { btf__free(btf_); }
KernelFeatures::KernelFeatures(KernelFeatures&& o) noexcept
    : btf_(std::exchange(o.btf_, nullptr)), syms_(std::move(o.syms_)) {}
KernelFeatures& KernelFeatures::operator=(KernelFeatures&& o) noexcept {
    if (this != &o) {
        btf__free(btf_);
        btf_ = std::exchange(o.btf_, nullptr);
        syms_ = std::move(o.syms_);
    }
    return *this;
}

std::optional<std::string> KernelFeatures::load(KernelFeatures& out) {
    struct btf* b = btf__load_vmlinux_btf();
    if (!b) {
        int err = errno;
        return std::string("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): ") +
               std::strerror(err) +
               ". uringscope needs a kernel built with CONFIG_DEBUG_INFO_BTF=y.";
    }
    btf__free(out.btf_);
    out.btf_ = b;
    return std::nullopt;
}

bool KernelFeatures::has_btf_func(const std::string& name) const {
    return btf_ && btf__find_by_name_kind(btf_, name.c_str(), BTF_KIND_FUNC) > 0;
}
bool KernelFeatures::has_btf_typedef(const std::string& name) const {
    return btf_ && btf__find_by_name_kind(btf_, name.c_str(), BTF_KIND_TYPEDEF) > 0;
}
bool KernelFeatures::has_btf_struct(const std::string& name) const {
    return btf_ && btf__find_by_name_kind(btf_, name.c_str(), BTF_KIND_STRUCT) > 0;
}

bool KernelFeatures::has_ksym(const std::string& name) const {
    if (!syms_) return false;
    std::call_once(syms_->once, [&] { syms_->cache = bcc_symcache_new(-1, nullptr); });
    if (!syms_->cache) return false;
    std::uint64_t addr = 0;
    return bcc_symcache_resolve_name(syms_->cache, nullptr, name.c_str(), &addr) == 0 && addr;
}

std::string KernelFeatures::release() const {
    struct utsname u {};
    if (uname(&u) != 0) return "unknown";
    return u.release;
}

}  // namespace uringscope
