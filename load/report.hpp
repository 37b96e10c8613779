// What iouscope-load prints: the report on stdout (the ground truth tests parse, one flushed
// line at a time, key=value or JSON), the progress line and the rings' failures on stderr.
#pragma once

#include <string>

#include "ring_setup.hpp"
#include "schedule.hpp"

namespace iouscope::load {

// One line on stdout, flushed at once.
void emit(const std::string& line);

// The setup line of every ring, then "started".
void report_setup(const Rings& rings, bool json);

// The final line of every ring and the "done" line; a ring whose SQ thread was not found at
// setup is looked up again first.
void report_final(Rings& rings, bool json);

// Every ring's failure, completion errors and stuck= reads that completed on stderr;
// kExitFailure if there was any.
int report_failures(const Rings& rings);

// SQEs so far and the current rate, refreshed once a second on stderr when it is a terminal
// and the run lasts more than 2 s.
class Progress {
public:
    explicit Progress(Clock::time_point start);
    void tick(const Rings& rings);
    void clear();

private:
    bool enabled_;
    Clock::time_point start_;
    Clock::time_point next_;
    Clock::time_point last_time_;
    std::uint64_t last_total_ = 0;
    bool shown_ = false;
};

}  // namespace iouscope::load
