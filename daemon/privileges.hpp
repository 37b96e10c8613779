#pragma once
// Checks, before touching the kernel, that the process holds what loading tracing programs takes,
// so the user reads "run as root" instead of a libbpf errno or a missing-symbol puzzle (without
// privilege /proc/kallsyms reads as zeros and every symbol looks absent).
#include <optional>
#include <string>

namespace uringscope {

// Returns a message naming the missing capabilities, or nullopt if loading can proceed.
std::optional<std::string> missing_bpf_privileges();

}  // namespace uringscope
