#include "exporters/exposition.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "exporters/text_exposition.hpp"
#include "exporters/utf8.hpp"

namespace iouscope {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricType;

MetricType type_of(MetricKind k) {
    switch (k) {
        case MetricKind::counter:
            return MetricType::Counter;
        case MetricKind::gauge:
            return MetricType::Gauge;
        case MetricKind::histogram:
            return MetricType::Histogram;
    }
    return MetricType::Untyped;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

void append_label(std::string& out, const Labels::Label& l) {
    out.append(l.name).append("=\"");
    text_exposition::append_label_value(out, l.value);
    out += '"';
}

}  // namespace

void Labels::push_back(Label l) {
    if (written_) {
        if (!list_.empty()) text_ += ',';
        append_label(text_, l);
    }
    list_.push_back(std::move(l));
}

const std::string& Labels::text() const {
    if (!written_) {
        for (const auto& l : list_) {
            if (&l != &list_.front()) text_ += ',';
            append_label(text_, l);
        }
        written_ = true;
    }
    return text_;
}

BucketRange histogram_buckets(const LatencyHistogram& h) {
    const auto& c = h.cumulative;
    std::size_t first = 0, end = 0;
    while (first < c.size() && c[first] == 0) ++first;
    if (h.count > 0) {  // then [first - 1, end] holds the observations' buckets
        end = first;
        while (end < c.size() && c[end] < h.count) ++end;
        end = std::min(end + 1, c.size());
        first = first > 0 ? first - 1 : 0;
    }
    return {first, std::max(first, end)};
}

void Family::check_labels(const Labels& labels) const {
    const auto& list = labels.list();
    bool same = list.size() == decl_.labels.size();
    for (std::size_t i = 0; same && i < list.size(); ++i) same = list[i].name == decl_.labels[i];
    if (!same)
        throw std::logic_error("series of " + std::string(decl_.name) +
                               " do not carry the labels metric_catalog declares");
}

void Family::check_kind(MetricKind k) const {
    if (decl_.kind != k)
        throw std::logic_error(std::string(decl_.name) + " is a " +
                               std::string(kind_name(decl_.kind)) + ", not a " +
                               std::string(kind_name(k)));
}

void Family::begin_series(const Labels& labels) {
    // Series of one family take their labels from one helper, so the first shows them all.
    if (series_++ > 0) return;
    check_labels(labels);
    if (target_ == ExpositionTarget::families) {
        family_.name = std::string(decl_.name);
        family_.help = std::string(decl_.help);
        family_.type = type_of(decl_.kind);
        return;
    }
    if (!decl_.help.empty())
        text_.append("# HELP ").append(decl_.name).append(" ").append(decl_.help).append("\n");
    text_.append("# TYPE ").append(decl_.name).append(" ").append(kind_name(decl_.kind));
    text_ += '\n';
}

ClientMetric& Family::add(const Labels& labels) {
    auto& m = family_.metric.emplace_back();
    m.label = labels.list();
    for (auto& l : m.label) l.value = sanitize_utf8(l.value);
    return m;
}

void Family::head(std::string_view suffix, const Labels& labels, const double* le) {
    text_.append(decl_.name).append(suffix);
    if (!labels.empty() || le) {
        text_ += '{';
        text_ += labels.text();
        if (le) {
            text_.append(labels.empty() ? "le=\"" : ",le=\"");
            text_exposition::append_value(text_, *le);
            text_ += '"';
        }
        text_ += '}';
    }
    text_ += ' ';
}

void Family::single(MetricKind kind, const Labels& labels, double v) {
    check_kind(kind);
    begin_series(labels);
    if (target_ == ExpositionTarget::families) {
        auto& m = add(labels);
        (kind == MetricKind::counter ? m.counter.value : m.gauge.value) = v;
        return;
    }
    head("", labels);
    text_exposition::append_value(text_, v);
    text_ += '\n';
}

void Family::counter(const Labels& labels, double v) {
    single(MetricKind::counter, labels, v);
}

void Family::gauge(const Labels& labels, double v) {
    single(MetricKind::gauge, labels, v);
}

void Family::value(const Labels& labels, double v) {
    if (decl_.kind == MetricKind::histogram)
        throw std::logic_error(std::string(decl_.name) +
                               " is a histogram: it takes no single value");
    single(decl_.kind, labels, v);
}

void Family::histogram(const Labels& labels, const LatencyHistogram& h) {
    check_kind(MetricKind::histogram);
    begin_series(labels);
    const auto [first, end] = histogram_buckets(h);
    if (target_ == ExpositionTarget::families) {
        auto& m = add(labels).histogram;
        m.sample_count = h.count;
        m.sample_sum = h.sum_s;
        for (std::size_t i = first; i < end; ++i)
            m.bucket.push_back({h.cumulative[i], h.upper_bounds_s[i]});
        m.bucket.push_back({h.count, kInf});
        return;
    }
    // As TextSerializer orders them: _count, _sum, then the buckets, +Inf last.
    head("_count", labels);
    text_exposition::append_count(text_, h.count);
    text_ += '\n';
    head("_sum", labels);
    text_exposition::append_value(text_, h.sum_s);
    text_ += '\n';
    for (std::size_t i = first; i <= end; ++i) {
        const bool inf = i == end;
        head("_bucket", labels, inf ? &kInf : &h.upper_bounds_s[i]);
        text_exposition::append_count(text_, inf ? h.count : h.cumulative[i]);
        text_ += '\n';
    }
}

prometheus::MetricFamily Family::take_family() {
    return std::move(family_);
}

std::vector<prometheus::MetricFamily> Exposition::families() {
    std::vector<prometheus::MetricFamily> out;
    for (auto& f : families_)
        if (!f.empty()) out.push_back(f.take_family());
    families_.clear();
    return out;
}

std::string Exposition::text() const {
    std::size_t size = 0;
    for (const auto& f : families_) size += f.text().size();
    std::string out;
    out.reserve(size);
    for (const auto& f : families_) out += f.text();
    return out;
}

}  // namespace iouscope
