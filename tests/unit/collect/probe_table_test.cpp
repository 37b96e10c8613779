// The probe table against the BPF object it describes: every program and every map of
// bpf/iouscope.bpf.c is claimed by exactly one probe, so a program no probe loads, or a map
// whose entries no one frees when their ring or thread goes, fails here. Opening a skeleton
// parses the object without loading anything: no privileges needed.
#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "collect/bpf_loader.hpp"
#include "iouscope.skel.h"

namespace iouscope {
namespace {

struct Skel {
    iouscope_bpf* s = iouscope_bpf__open();
    ~Skel() {
        if (s) iouscope_bpf__destroy(s);
    }
};

TEST(ProbeTable, IdsAreTheTableOrderAndNamesAreUnique) {
    const auto& table = probe_table();
    ASSERT_EQ(table.size(), static_cast<std::size_t>(ProbeId::count));
    std::set<std::string> names;
    for (std::size_t i = 0; i < table.size(); ++i) {
        EXPECT_EQ(static_cast<std::size_t>(table[i].id), i) << table[i].name;
        EXPECT_EQ(&probe_spec(table[i].id), &table[i]);
        EXPECT_TRUE(names.insert(table[i].name).second) << "two probes named " << table[i].name;
        EXPECT_FALSE(table[i].variants.empty()) << table[i].name;
    }
}

TEST(ProbeTable, EveryProgramBelongsToExactlyOneProbe) {
    Skel k;
    ASSERT_NE(k.s, nullptr) << "iouscope_bpf__open failed";
    std::map<const bpf_program*, std::set<std::string>> owners;
    for (const auto& p : probe_table())
        for (const auto& v : p.variants)
            for (auto get : v.programs) {
                const bpf_program* prog = get(k.s);
                ASSERT_NE(prog, nullptr) << p.name;
                owners[prog].insert(p.name);
            }
    bpf_program* prog = nullptr;
    int n = 0;
    bpf_object__for_each_program(prog, k.s->obj) {
        ++n;
        const auto it = owners.find(prog);
        ASSERT_NE(it, owners.end()) << bpf_program__name(prog) << " is loaded by no probe";
        EXPECT_EQ(it->second.size(), 1u) << bpf_program__name(prog) << " is in several probes";
    }
    EXPECT_EQ(static_cast<std::size_t>(n), owners.size());
}

TEST(ProbeTable, EveryMapIsOwnedByExactlyOneProbe) {
    Skel k;
    ASSERT_NE(k.s, nullptr);
    std::map<std::string, int> claimed;
    for (const auto& p : probe_table())
        for (const auto& m : p.maps) {
            ++claimed[m.map];
            EXPECT_NE(bpf_object__find_map_by_name(k.s->obj, m.map), nullptr)
                << p.name << " claims a map the object does not have: " << m.map;
        }
    bpf_map* map = nullptr;
    int maps = 0;
    bpf_object__for_each_map(map, k.s->obj) {
        if (bpf_map__is_internal(map)) continue;  // .bss, .data, .rodata: globals, not entries
        ++maps;
        EXPECT_EQ(claimed[bpf_map__name(map)], 1)
            << bpf_map__name(map) << ": every map needs one owner that says how entries go";
    }
    EXPECT_GE(maps, 10);
}

TEST(ProbeTable, EachFeatureHasOneProvider) {
    for (Feature f : {Feature::submit_time, Feature::ring_turns, Feature::cmd_cqes}) {
        int providers = 0;
        for (const auto& p : probe_table())
            for (Feature g : p.provides) providers += g == f;
        EXPECT_EQ(providers, 1) << "feature " << static_cast<int>(f);
    }
}

}  // namespace
}  // namespace iouscope
