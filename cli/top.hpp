#pragma once
#include "cli/top_options.hpp"

namespace uringscope::top {

// Runs `uringscope top` with parsed options; returns the process exit status.
int run(const Options& o);

}  // namespace uringscope::top
