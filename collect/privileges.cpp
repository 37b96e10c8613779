#include "collect/privileges.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace iouscope {

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
           "): run iouscoped as root, or grant CAP_BPF, CAP_PERFMON and CAP_SYSLOG";
}

std::optional<std::string> drop_privileges(const std::string& user) {
    // Clear the bounding set while CAP_SETPCAP is still held, switch user while CAP_SETUID is,
    // then empty every other set.
    for (cap_value_t c = 0; c <= CAP_LAST_CAP; ++c) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (!user.empty()) {
        // Keep permitted capabilities across the uid change, so CAP_BPF can be kept below.
        prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
        errno = 0;
        const passwd* pw = getpwnam(user.c_str());
        if (!pw)
            return "--runas.user: no user \"" + user + "\"" +
                   (errno ? std::string(": ") + std::strerror(errno) : std::string());
        if (setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            return "cannot switch to user " + user + ": " + std::strerror(errno);
    }

    // CAP_BPF alone stays: kernels before 5.13 (Debian's 5.10 among them, with
    // unprivileged_bpf_disabled set) refuse every bpf() command, even reading our own maps and
    // creating iterator instances from our own link, to a process without it. Seen in the
    // bullseye guest: sampling stopped after the drop.
    // A process started with CAP_SYS_ADMIN instead of CAP_BPF keeps that one: it is what grants
    // bpf() to it, and a capability not held cannot be kept.
    std::unique_ptr<std::remove_pointer_t<cap_t>, decltype(&cap_free)> now(cap_get_proc(),
                                                                           cap_free);
    cap_flag_value_t has_bpf = CAP_CLEAR;
    if (now) cap_get_flag(now.get(), kCapBpf, CAP_PERMITTED, &has_bpf);
    std::unique_ptr<std::remove_pointer_t<cap_t>, decltype(&cap_free)> keep(cap_init(), cap_free);
    const cap_value_t bpf[] = {has_bpf == CAP_SET ? kCapBpf : CAP_SYS_ADMIN};
    if (!keep || cap_set_flag(keep.get(), CAP_PERMITTED, 1, bpf, CAP_SET) != 0 ||
        cap_set_flag(keep.get(), CAP_EFFECTIVE, 1, bpf, CAP_SET) != 0 ||
        cap_set_proc(keep.get()) != 0)
        return std::string("cannot drop capabilities: ") + std::strerror(errno);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return std::nullopt;
}

}  // namespace iouscope
