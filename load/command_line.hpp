// The command line of iouscope-load: argv into the options as given (RawOptions), a request for
// the help page, or the usage error to print. Pure like config.hpp: the caller prints and exits.
#pragma once

#include <variant>

#include "config.hpp"

namespace iouscope::load {

inline constexpr const char* kProg = "iouscope-load";

struct HelpRequest {};

using CommandLine = std::variant<RawOptions, HelpRequest, ParseError>;

// -h or --help anywhere wins over every other argument, malformed ones included. The options'
// values are not checked here: build_config() does that.
CommandLine parse_command_line(int argc, const char* const* argv);

// The help page, printed as it is (help.cpp).
const char* help_text();

}  // namespace iouscope::load
