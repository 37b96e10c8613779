// How iouscope-load ends: its exit statuses and the two ways it dies, a usage error (status 2,
// with the pointer to --help) and a system or io_uring failure (status 1).
#pragma once

#include <string>

namespace iouscope::load {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

[[noreturn]] void die_usage(const std::string& msg);
[[noreturn]] void die(const std::string& msg);

// strerror() and the number, as every system error is printed.
std::string errno_text(int err);

}  // namespace iouscope::load
