// Names of a ring's IORING_SETUP_* flags, for its info series (iouscope_ring_info) and views.
#pragma once

#include <cstdint>
#include <string>

namespace iouscope {

// The IORING_SETUP_* flags of setup_flags as their names, lower case, comma-separated in bit
// order ("sqpoll,sq_aff"); a bit without a name here as "bitN". Empty for none.
std::string setup_flag_names(std::uint32_t setup_flags);

}  // namespace iouscope
