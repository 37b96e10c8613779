#pragma once
// Checks, before touching the kernel, that the process holds what loading tracing programs takes,
// so the user reads "run as root" instead of a libbpf errno or a missing-symbol puzzle (without
// privilege /proc/kallsyms reads as zeros and every symbol looks absent).
#include <optional>
#include <string>

namespace iouscope {

// Returns a message naming the missing capabilities, or nullopt if loading can proceed.
std::optional<std::string> missing_bpf_privileges();

// After the programs are loaded and attached, sampling needs only CAP_BPF: iterator instances
// are created from our own link fd and maps are read through our own fds, but older kernels
// gate every bpf() command on it. Drops every other capability (effective, permitted,
// inheritable, ambient, and the whole bounding set) and, when `user` is not empty, switches to
// that user's uid/gid. Returns an error message on failure.
std::optional<std::string> drop_privileges(const std::string& user);

}  // namespace iouscope
