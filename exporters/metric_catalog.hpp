#pragma once
// Every metric family iouscoped exports, declared once: name, type, labels, help, and the
// exposition section that fills it. The exposition takes help and type from here and refuses a
// family that is not declared or a series whose labels differ from the declaration; the
// `--help` METRICS list and `iouscoped --metrics` (which tests/dashboards reads) are printed
// from it. So a family cannot be exported without being documented, nor documented with labels
// it does not have.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iouscope {

enum class MetricKind : std::uint8_t { counter, gauge, histogram };

struct MetricDecl {
    std::string_view name;
    MetricKind kind;
    std::string_view section;  // the exposition section (exporters/prometheus_exporter.cpp)
    std::vector<std::string_view> labels;  // in the order the series carry them
    std::string_view help;
};

// In exposition order.
const std::vector<MetricDecl>& metric_catalog();
// The declaration of `name`; throws std::out_of_range for a family nobody declared.
const MetricDecl& metric_decl(std::string_view name);
std::string_view kind_name(MetricKind k);
// The METRICS block of `iouscoped --help`: every family with its labels, by section.
std::string metrics_help_list();
// One line per family: name, type, comma-separated labels, tab-separated (`--metrics`).
std::string metrics_table();

}  // namespace iouscope
