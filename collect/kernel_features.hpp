#pragma once
// What the running kernel offers, asked of its BTF and its symbol table, never of its version
// number: distributions backport io_uring wholesale (5.10.162 carries 5.15's), so versions lie.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/kernel_traits.hpp"

struct btf;

namespace iouscope {

class KernelFeatures {
public:
    // Loads /sys/kernel/btf/vmlinux. Returns an error message if the kernel has no BTF.
    static std::optional<std::string> load(KernelFeatures& out);

    KernelFeatures();
    ~KernelFeatures();
    KernelFeatures(KernelFeatures&&) noexcept;
    KernelFeatures& operator=(KernelFeatures&&) noexcept;

    // A function in the kernel's BTF or, failing that, in a loaded module's (/sys/kernel/btf/*).
    bool has_btf_func(const std::string& name) const;
    // Number of parameters of that function's prototype, nullopt if it has no BTF.
    std::optional<int> btf_func_params(const std::string& name) const;
    bool has_btf_typedef(const std::string& name) const;
    // Parameters of a tracepoint's prototype (typedef btf_trace_<name>), the leading context
    // pointer included; nullopt where the kernel has no such tracepoint.
    std::optional<int> btf_tracepoint_params(const std::string& name) const;
    // The value of an enumerator of the kernel's BTF, named or anonymous enum (the REQ_F_*_BIT
    // of io_uring are in anonymous ones); nullopt where none has that name.
    std::optional<std::int64_t> btf_enumerator(const std::string& name) const;
    // The names of the enum that holds `member`, by value, each without `prefix` and in lower
    // case (IORING_OP_READV -> readv); names that do not start with prefix are left out, and
    // so is `skip` (e.g. IORING_OP_LAST). Empty where no enum holds member.
    std::vector<std::string> btf_enum_names(const std::string& member, const std::string& prefix,
                                            const std::string& skip) const;
    bool has_btf_struct(const std::string& name) const;
    // A member of a struct in the kernel's BTF (not modules'), e.g. io_sq_data.idle_mode.
    bool has_btf_member(const std::string& type, const std::string& member) const;
    // Resolved through BCC's kernel symbol cache (/proc/kallsyms), loaded on first use.
    bool has_ksym(const std::string& name) const { return ksym_address(name) != 0; }
    // Address of a kernel or module symbol, 0 if unknown.
    std::uint64_t ksym_address(const std::string& name) const;
    // The kernel can attach kprobes through perf events (CONFIG_KPROBES).
    bool has_kprobes() const;

    // sqd->work_time counts only the SQ thread's own time. Kernels up to 6.17 filled it from
    // getrusage(RUSAGE_SELF), i.e. the whole process; the change that made it per thread added
    // io_sq_cpu_usec(), whose presence in BTF is the test (it is also in the 6.12.y backport).
    bool work_time_per_thread() const { return has_btf_func("io_sq_cpu_usec"); }
    // IORING_SETUP_IDLE_NS (seeds patch 002): the sqd keeps idle_mode, whether or not a ring
    // has asked for nanoseconds yet.
    bool idle_ns_supported() const { return has_btf_member("io_sq_data", "idle_mode"); }
    // bpf_rdonly_cast (6.2): the ring walk can read rings with plain loads (bpf/core_fixes.bpf.h,
    // get_ring_ctx).
    bool casts_rings() const { return has_btf_func("bpf_rdonly_cast"); }
    // What the aggregator needs of the above.
    KernelTraits traits() const { return {work_time_per_thread(), idle_ns_supported()}; }

    std::string release() const;  // uname -r, for logs and views only

    // CONFIG_HZ from /boot/config-$(uname -r) or /proc/config.gz; 0 if neither is readable (the
    // aggregator then measures it).
    unsigned config_hz() const;

private:
    struct btf* btf_ = nullptr;
    // Module BTFs, loaded on first use of a function that vmlinux lacks.
    struct ModuleBtfs;
    std::shared_ptr<ModuleBtfs> modules_;
    struct SymCache;
    std::unique_ptr<SymCache> syms_;
};

// Modules come and go while the daemon runs; these are asked afresh on every call.
//
// The instance of a loaded module: the inode of its /sys/module directory, which sysfs numbers
// anew on every load (and which built-in modules with parameters have too). 0 when not loaded.
std::uint64_t module_instance(const std::string& name);
inline bool module_loaded(const std::string& name) {
    return module_instance(name) != 0;
}

// Addresses of the named symbols of one module (or of the kernel proper, where that module is
// built in), read from /proc/kallsyms open on kallsyms_fd; 0 for a name not found. The kernel
// decides at open() whether the file shows addresses (kptr_restrict: to CAP_SYSLOG holders),
// so a daemon that drops its capabilities keeps a descriptor opened before; all are 0 on one
// opened without.
std::vector<std::uint64_t> module_symbol_addresses(int kallsyms_fd, const std::string& module,
                                                   const std::vector<std::string>& names);

// The code of a function of the kernel proper, [start, end) from one read of /proc/kallsyms:
// its address, and the lowest address of any symbol above it (functions are laid out one after
// another). {0, 0} where the file has no such name or shows no addresses. By hand rather than
// ksym_address, for the same reason as module_symbol_addresses: a program of the request tier
// needs it, and BCC's cache would cost that tier 55 MB.
std::pair<std::uint64_t, std::uint64_t> kernel_function_range(const std::string& name);

}  // namespace iouscope
