// The SQ thread of an SQPOLL ring as iouscope-load reports it (sq_thread= in every ring line).
#pragma once

#include "ring_state.hpp"

namespace iouscope::load {

// The TID from the SqThread: line of the ring's fdinfo (the owner's thread for a shared ring),
// once it names the SQ thread rather than its creator; -1 for a ring without SQPOLL or when no
// such thread shows up within 2 s.
int sq_thread_tid(const RingState& st);

}  // namespace iouscope::load
