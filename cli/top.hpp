#pragma once
#include "cli/top_options.hpp"

namespace iouscope::top {

// Runs `iouscope top` with parsed options; returns the process exit status.
int run(const Options& o);

}  // namespace iouscope::top
