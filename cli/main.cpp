// iouscope: the command-line front end. Subcommands: top, advise.
#include <cstring>
#include <iostream>
#include <string>

#include "cli/advise.hpp"
#include "cli/top.hpp"

namespace {

// In the form help2man turns into iouscope(1)'s SYNOPSIS and a list of commands: "Usage:" and
// "or:" lines, then each command with its text two spaces after it.
const char* const kUsage = R"(Usage: iouscope top [OPTIONS]
  or:  iouscope advise [OPTIONS]
  or:  iouscope --version | --help
The top-like view and tuning advice of iouscope, io_uring SQPOLL/IOPOLL observability.

Commands:
  top [OPTIONS]     live view of SQ threads, rings and polling (iouscope top --help)
  advise [OPTIONS]  what to change, with its predicted effect (iouscope advise --help)
  --version         print the version and exit
  --help            print this help and exit

The daemon is iouscoped; see iouscoped --help.)";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::cout << kUsage << "\n";
        return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    if (cmd == "--version") {
        std::cout << "iouscope " IOUSCOPE_VERSION "\n";
        return 0;
    }
    // Parses the subcommand's own arguments (argv[1] is its name) and runs it, or prints its
    // help or error.
    auto subcommand = [&](auto parse, auto run) {
        auto r = parse(argc - 1, argv + 1);
        if (!r.options) {
            (r.exit_code ? std::cerr : std::cout) << r.output << "\n";
            return r.exit_code;
        }
        return run(*r.options);
    };
    if (cmd == "top")
        return subcommand(iouscope::top::parse_top_options,
                          [](const auto& o) { return iouscope::top::run(o); });
    if (cmd == "advise")
        return subcommand(iouscope::advise::parse_options,
                          [](const auto& o) { return iouscope::advise::run(o); });
    std::cerr << "iouscope: unknown command \"" << cmd << "\"\n" << kUsage << "\n";
    return 2;
}
