#pragma once
// The JSON form of a Snapshot, served at /api/v1/snapshot and read back by `iouscope top`.
// docs/API.md documents it; kSchemaVersion changes when a field changes meaning or goes away.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/snapshot.hpp"

namespace iouscope {

inline constexpr int kSchemaVersion = 1;

std::string snapshot_to_json(const Snapshot& snap);

// The advice alone, as in the snapshot's "advice" field (iouscope advise --json).
std::string advice_to_json(const Advice& advice);

// Throws std::runtime_error with a readable message on malformed input or a schema mismatch.
Snapshot snapshot_from_json(const std::string& text);

}  // namespace iouscope
