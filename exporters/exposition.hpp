#pragma once
// The families of one exposition as exporters/prometheus_exporter.cpp's sections add them, each
// declared in exporters/metric_catalog, collected either of two ways from the same calls: as
// prometheus-cpp MetricFamily objects (to_metric_families, the reference), or written straight
// as text in the format TextSerializer gives them (render_text, what /metrics serves).
//
// Written by hand because prometheus-cpp's only text writer, TextSerializer, takes MetricFamily
// objects (every series a vector of label name and value strings) and writes each piece through
// std::ostream, and each double through printf. At the scale goal's point (1,000 SQ threads,
// 10,000 rings, 3.8 MB of text; bench/render.cpp, 20 runs) building the families took 7.9 ms
// and TextSerializer 28.1 ms (ostream insertion 33 % of perf's samples, float formatting 16 %);
// writing the same text straight into strings takes 4.8-5.0 ms (--path B; 6-7 ms each run
// right after the families', whose memory it then faults back in).
// tests/unit/exporters/exposition_text_test.cpp holds it to TextSerializer's output byte for
// byte.
#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "exporters/metric_catalog.hpp"
#include "model/snapshot.hpp"

namespace iouscope {

// The labels of a series, in the order the catalogue declares them. For the text target they
// are also written once, escaped, as `name="value",...`: every series of an entity (an SQ
// thread has two dozen) then copies that text rather than escaping its labels again.
class Labels {
public:
    using Label = prometheus::ClientMetric::Label;
    Labels() = default;
    Labels(std::initializer_list<Label> labels) : list_(labels) {}
    void push_back(Label l);
    const std::vector<Label>& list() const { return list_; }
    bool empty() const { return list_.empty(); }
    const std::string& text() const;  // written at the first call

private:
    std::vector<Label> list_;
    mutable std::string text_;
    mutable bool written_ = false;
};

enum class ExpositionTarget : std::uint8_t { families, text };

// One declared family and its series.
class Family {
public:
    Family(const MetricDecl& d, ExpositionTarget target) : decl_(d), target_(target) {}
    void counter(const Labels& labels, double v);
    void gauge(const Labels& labels, double v);
    // A counter or a gauge, as the catalogue declares the family.
    void value(const Labels& labels, double v);
    // Only the buckets that say something (histogram_buckets()).
    void histogram(const Labels& labels, const LatencyHistogram& h);

    bool empty() const { return series_ == 0; }
    prometheus::MetricFamily take_family();            // the families target's
    const std::string& text() const { return text_; }  // the text target's: HELP, TYPE, series

private:
    void begin_series(const Labels& labels);
    void check_labels(const Labels& labels) const;
    void check_kind(MetricKind k) const;
    // One counter or gauge series, of the kind the caller names and the catalogue must declare.
    void single(MetricKind kind, const Labels& labels, double v);
    prometheus::ClientMetric& add(const Labels& labels);
    // `name<suffix>{labels[,le="bound"]} `, the head of a text line.
    void head(std::string_view suffix, const Labels& labels, const double* le = nullptr);

    const MetricDecl& decl_;
    ExpositionTarget target_;
    std::size_t series_ = 0;
    prometheus::MetricFamily family_;  // the families target's series
    std::string text_;                 // the text target's lines
};

// The families of one exposition, in the order they were added. A family exists by being added,
// so none can be declared and then left out of the output; one not in the catalogue throws.
// Families without series are left out, as the Go client does: a scrape of a host with no rings
// is then short rather than full of HELP lines.
class Exposition {
public:
    explicit Exposition(ExpositionTarget target) : target_(target) {}
    Family& add(std::string_view name) {
        return families_.emplace_back(metric_decl(name), target_);
    }
    std::vector<prometheus::MetricFamily> families();  // the families target
    std::string text() const;                          // the text target

private:
    ExpositionTarget target_;
    std::deque<Family> families_;  // stable references while more are added
};

// The histogram buckets [first, end) an exposition shows: from the last empty one below the
// first observation (the lower bound histogram_quantile interpolates from) to the first that
// holds them all; the others repeat 0 or the count. Counts only grow, so a bucket once shown
// stays; a histogram with no observation shows none, only +Inf, _sum and _count. Thirty idle SQ
// threads cost 30 lines rather than 750 (IOU_LAT_BUCKETS from 1 us).
struct BucketRange {
    std::size_t first = 0, end = 0;
};
BucketRange histogram_buckets(const LatencyHistogram& h);

}  // namespace iouscope
