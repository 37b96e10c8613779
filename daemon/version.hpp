#pragma once
// What `iouscoped --version` prints, in a form a bug report can paste: the build (version,
// commit, the libraries it was built against and runs with) and the kernel (its release and what
// its BTF gives the walk). As root, main adds what every probe would attach as.
#include <optional>
#include <string>

namespace iouscope {

class KernelFeatures;

// The build: version, commit, libraries. Touches no kernel interface.
std::string build_report();

// The kernel: its release, and with its BTF (kf) how the walk reads rings; without it, why.
std::string kernel_report(const KernelFeatures* kf, const std::optional<std::string>& btf_error);

}  // namespace iouscope
