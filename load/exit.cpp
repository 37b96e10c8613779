// iouscope-load's exits and error texts (exit.hpp).
#include "exit.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "command_line.hpp"

namespace iouscope::load {

[[noreturn]] void die_usage(const std::string& msg) {
    std::fprintf(stderr, "%s: %s\nTry '%s --help' for more information.\n", kProg, msg.c_str(),
                 kProg);
    std::exit(kExitUsage);
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", kProg, msg.c_str());
    std::exit(kExitFailure);
}

std::string errno_text(int err) {
    // strerror() may share a static buffer between threads; only the main thread formats errors.
    return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

}  // namespace iouscope::load
