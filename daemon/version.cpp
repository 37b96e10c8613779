#include "daemon/version.hpp"

#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <microhttpd.h>
#include <spdlog/version.h>
#include <sys/utsname.h>
#include <zlib.h>

#include "collect/kernel_features.hpp"
#include "iouscope_commit.h"

namespace iouscope {

std::string build_report() {
    std::string out = fmt::format("iouscoped {}\n", IOUSCOPE_VERSION);
    out += fmt::format("commit:     {}\n", IOUSCOPE_COMMIT);
    // Built against (the headers) and running with (the shared library), where both can differ.
    out += fmt::format("libbpf:     built against {}, running {}\n", IOUSCOPE_LIBBPF_VERSION,
                       libbpf_version_string());
    out +=
        fmt::format("libraries:  prometheus-cpp {}, libmicrohttpd {}, zlib {}, spdlog {}.{}.{}\n",
                    IOUSCOPE_PROMETHEUS_CPP_VERSION, MHD_get_version(), zlibVersion(),
                    SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH);
    return out;
}

std::string kernel_report(const KernelFeatures* kf, const std::optional<std::string>& btf_error) {
    struct utsname u {};
    uname(&u);
    std::string out = fmt::format("kernel:     {} {} {}\n", u.sysname, u.release, u.machine);
    if (!kf) return out + fmt::format("BTF:        none: {}\n", btf_error.value_or("unknown"));
    out += "BTF:        yes\n";
    out += fmt::format("ring walk:  {}\n", kf->casts_rings()
                                               ? "plain loads (bpf_rdonly_cast)"
                                               : "probe reads (no bpf_rdonly_cast before 6.2)");
    return out;
}

}  // namespace iouscope
