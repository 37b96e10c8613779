#pragma once
// Prometheus exposition of a Snapshot. Metric names, types and the labels listed in
// docs/ARCHITECTURE.md ("Metric contract") are a contract with dashboards and alerts.
#include <prometheus/metric_family.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/snapshot.hpp"

namespace iouscope {

// The snapshot's families as prometheus-cpp objects: the reference render_text's output is held
// to (TextSerializer over these, byte for byte; tests/unit/exporters/exposition_text_test.cpp).
std::vector<prometheus::MetricFamily> to_metric_families(const Snapshot& snap);

// Text exposition format 0.0.4 of a snapshot, as served on /metrics: the same families written
// straight as text (exporters/exposition).
std::string render_text(const Snapshot& snap);

}  // namespace iouscope
