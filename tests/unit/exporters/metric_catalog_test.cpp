// The metric catalogue against the exposition: every family rendered from a snapshot that fills
// them all carries exactly its declared labels, in order, and its declared help and type.
#include "exporters/metric_catalog.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "exporters/prometheus_exporter.hpp"
#include "tests/unit/exporters/snapshots.hpp"

using namespace iouscope;
using iouscope::test::full_snapshot;

namespace {

struct Rendered {
    std::string type, help;
    std::vector<std::vector<std::string>> label_names;  // per series, in order
};

// Family -> what the text exposition says of it. Histogram series are folded into their family
// without their "le" label.
std::map<std::string, Rendered> parse(const std::string& text) {
    std::map<std::string, Rendered> out;
    std::istringstream in(text);
    std::string line;
    const std::regex series(R"(^([a-z_]+)(\{(.*)\})? \S+$)");
    const std::regex label(R"re(([a-z_]+)="(?:[^"\\]|\\.)*")re");
    while (std::getline(in, line)) {
        std::smatch m;
        if (line.rfind("# HELP ", 0) == 0) {
            const auto sp = line.find(' ', 7);
            out[line.substr(7, sp - 7)].help = line.substr(sp + 1);
        } else if (line.rfind("# TYPE ", 0) == 0) {
            const auto sp = line.find(' ', 7);
            out[line.substr(7, sp - 7)].type = line.substr(sp + 1);
        } else if (std::regex_match(line, m, series)) {
            std::string name = m[1];
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (!out.count(name) && name.size() > std::strlen(suffix) && name.ends_with(suffix))
                    name.resize(name.size() - std::strlen(suffix));
            std::vector<std::string> names;
            const std::string labels = m[3];
            for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label);
                 it != std::sregex_iterator(); ++it)
                if ((*it)[1] != "le") names.push_back((*it)[1]);
            out[name].label_names.push_back(names);
        }
    }
    return out;
}

}  // namespace

TEST(MetricCatalog, NamesAreUniqueAndFollowPrometheusConventions) {
    std::set<std::string_view> names;
    for (const auto& d : metric_catalog()) {
        EXPECT_TRUE(names.insert(d.name).second) << d.name << " declared twice";
        EXPECT_TRUE(d.name.starts_with("iouscope_")) << d.name;
        EXPECT_EQ(d.kind == MetricKind::counter, d.name.ends_with("_total")) << d.name;
        EXPECT_FALSE(d.help.empty()) << d.name;
        // TextSerializer (1.0.1, 1.1.0) writes HELP as it is, and render_text as it does: a
        // newline would end the line early, a backslash would start an escape.
        EXPECT_EQ(d.help.find_first_of("\\\n"), std::string_view::npos) << d.name;
        EXPECT_FALSE(d.section.empty()) << d.name;
    }
    EXPECT_THROW(metric_decl("iouscope_not_declared"), std::out_of_range);
}

TEST(MetricCatalog, EveryFamilyIsRenderedWithItsDeclaredLabelsHelpAndType) {
    const auto families = parse(render_text(full_snapshot()));
    std::set<std::string> declared;
    for (const auto& d : metric_catalog()) {
        const std::string name(d.name);
        declared.insert(name);
        const auto it = families.find(name);
        if (it == families.end()) {
            ADD_FAILURE() << name << " is declared but the full snapshot lacks it";
            continue;
        }
        EXPECT_EQ(it->second.type, kind_name(d.kind)) << name;
        EXPECT_EQ(it->second.help, d.help) << name;
        const std::vector<std::string> want(d.labels.begin(), d.labels.end());
        for (const auto& got : it->second.label_names) EXPECT_EQ(got, want) << name;
    }
    for (const auto& [name, f] : families)
        EXPECT_TRUE(declared.count(name)) << name << " is exported but not declared";
}

TEST(MetricCatalog, HelpListsAndTableNameEveryFamily) {
    const std::string help = metrics_help_list(), table = metrics_table();
    for (const auto& d : metric_catalog()) {
        EXPECT_NE(help.find("    " + std::string(d.name)), std::string::npos) << d.name;
        EXPECT_NE(table.find(std::string(d.name) + "\t" + std::string(kind_name(d.kind)) + "\t"),
                  std::string::npos)
            << d.name;
    }
    EXPECT_EQ(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')),
              metric_catalog().size());
}
