#include "daemon/privileges.hpp"

#include <sys/capability.h>

#include <memory>
#include <vector>

namespace uringscope {

namespace {

// CAP_BPF and CAP_PERFMON exist from 5.8; older headers lack the names.
constexpr cap_value_t kCapPerfmon = 38;
constexpr cap_value_t kCapBpf = 39;

bool effective(cap_t caps, cap_value_t cap) {
    cap_flag_value_t v = CAP_CLEAR;
    return cap_get_flag(caps, cap, CAP_EFFECTIVE, &v) == 0 && v == CAP_SET;
}

}  // namespace

std::optional<std::string> missing_bpf_privileges() {
    std::unique_ptr<std::remove_pointer_t<cap_t>, decltype(&cap_free)> caps(cap_get_proc(),
                                                                           cap_free);
    if (!caps) return std::nullopt;  // cannot tell; let the load itself report
    const bool admin = effective(caps.get(), CAP_SYS_ADMIN);
    std::vector<std::string> missing;
    if (!admin && !effective(caps.get(), kCapBpf)) missing.push_back("CAP_BPF");
    if (!admin && !effective(caps.get(), kCapPerfmon)) missing.push_back("CAP_PERFMON");
    // Kernel addresses in /proc/kallsyms, needed to recognise io_uring files, are shown only to
    // CAP_SYSLOG holders when kptr_restrict is set (the default on most distributions).
    if (!effective(caps.get(), CAP_SYSLOG)) missing.push_back("CAP_SYSLOG");
    if (missing.empty()) return std::nullopt;
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return "not enough privilege to load BPF programs (missing " + list +
           "): run uringscoped as root, or grant CAP_BPF, CAP_PERFMON and CAP_SYSLOG";
}

}  // namespace uringscope
