// uringscope: the command-line front end. Subcommands: top, advise.
#include <cstring>
#include <iostream>
#include <string>

#include "cli/advise.hpp"
#include "cli/top.hpp"

namespace {

const char* const kUsage = R"(uringscope - io_uring SQPOLL/IOPOLL observability

USAGE
  uringscope top [OPTIONS]    live view of SQ threads, rings and polling (see top --help)
  uringscope advise [OPTIONS] what to change, with predicted effect (see advise --help)
  uringscope --version
  uringscope --help

The daemon is uringscoped; see uringscoped --help.)";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::cout << kUsage << "\n";
        return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    if (cmd == "--version") {
        std::cout << "uringscope " URINGSCOPE_VERSION "\n";
        return 0;
    }
    if (cmd == "top") {
        auto r = uringscope::top::parse_top_options(argc - 1, argv + 1);
        if (!r.options) {
            (r.exit_code ? std::cerr : std::cout) << r.output << "\n";
            return r.exit_code;
        }
        return uringscope::top::run(*r.options);
    }
    if (cmd == "advise") {
        auto r = uringscope::advise::parse_options(argc - 1, argv + 1);
        if (!r.options) {
            (r.exit_code ? std::cerr : std::cout) << r.output << "\n";
            return r.exit_code;
        }
        return uringscope::advise::run(*r.options);
    }
    std::cerr << "uringscope: unknown command \"" << cmd << "\"\n" << kUsage << "\n";
    return 2;
}
