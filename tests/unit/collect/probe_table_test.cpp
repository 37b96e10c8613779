// The probe table against the BPF objects it describes: every program of bpf/*.bpf.c is claimed
// by exactly one probe, in the object its probe names, and every map by exactly one probe, so a
// program no probe loads, or a map whose entries no one frees when their ring or thread goes,
// fails here; a map two objects define is the default tier's, handed to the other at load.
// Opening a skeleton parses the object without loading anything: no privileges needed.
#include "collect/probe_table.hpp"

#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "collect/bpf_objects.hpp"

namespace iouscope {
namespace {

struct Opened {
    BpfObjects objs;
    bool ok = true;
    Opened() {
        for (std::size_t o = 0; o < kBpfObjects; ++o)
            ok = ok && objs.open(static_cast<BpfObject>(o));
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

TEST(ProbeTable, EveryProgramBelongsToExactlyOneProbeInItsObject) {
    Opened k;
    ASSERT_TRUE(k.ok) << "opening a skeleton failed";
    std::map<const bpf_program*, std::set<std::string>> owners;
    std::map<const bpf_program*, BpfObject> object_of;
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_program* prog = nullptr;
        bpf_object__for_each_program(prog, k.objs.object(static_cast<BpfObject>(o)))
            object_of[prog] = static_cast<BpfObject>(o);
    }
    for (const auto& p : probe_table())
        for (const auto& v : p.variants)
            for (auto get : v.programs) {
                const bpf_program* prog = get(k.objs);
                ASSERT_NE(prog, nullptr) << p.name;
                owners[prog].insert(p.name);
                EXPECT_TRUE(object_of.count(prog) && object_of[prog] == p.object)
                    << bpf_program__name(prog) << " is not in the object probe " << p.name
                    << " names";
            }
    for (const auto& [prog, object] : object_of) {
        const auto it = owners.find(prog);
        ASSERT_NE(it, owners.end()) << bpf_program__name(prog) << " is loaded by no probe";
        EXPECT_EQ(it->second.size(), 1u) << bpf_program__name(prog) << " is in several probes";
    }
    EXPECT_EQ(object_of.size(), owners.size());
}

TEST(ProbeTable, EveryMapIsOwnedByExactlyOneProbe) {
    Opened k;
    ASSERT_TRUE(k.ok);
    std::map<std::string, int> claimed;
    for (const auto& p : probe_table())
        for (const auto& m : p.maps) {
            ++claimed[m.map];
            bool found = false;
            for (std::size_t o = 0; o < kBpfObjects; ++o)
                found = found || bpf_object__find_map_by_name(
                                     k.objs.object(static_cast<BpfObject>(o)), m.map) != nullptr;
            EXPECT_TRUE(found) << p.name << " claims a map no object has: " << m.map;
        }
    std::set<std::string> maps;
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_map* map = nullptr;
        bpf_object__for_each_map(map, k.objs.object(static_cast<BpfObject>(o))) {
            if (bpf_map__is_internal(map)) continue;  // .bss, .data, .rodata: globals
            maps.insert(bpf_map__name(map));
        }
    }
    for (const auto& name : maps)
        EXPECT_EQ(claimed[name], 1)
            << name << ": every map needs one owner that says how entries go";
    EXPECT_GE(maps.size(), 10u);
}

// A map or the shared globals that two objects define are one at run time only if the default
// tier's object defines them too (it loads first and hands them over) with the same shape.
TEST(ProbeTable, SharedMapsAreTheDefaultTiersAndAlike) {
    Opened k;
    ASSERT_TRUE(k.ok);
    bpf_object* core = k.objs.object(BpfObject::core);
    std::map<std::string, int> defined_by;
    for (std::size_t o = 0; o < kBpfObjects; ++o) {
        bpf_map* map = nullptr;
        bool shared_section = false;
        bpf_object__for_each_map(map, k.objs.object(static_cast<BpfObject>(o))) {
            const char* name = bpf_map__name(map);
            const bool globals = std::strcmp(name, kSharedSection) == 0;
            shared_section = shared_section || globals;
            if (bpf_map__is_internal(map) && !globals) continue;
            ++defined_by[name];
            const bpf_map* own = bpf_object__find_map_by_name(core, name);
            if (!own) continue;
            EXPECT_EQ(bpf_map__type(own), bpf_map__type(map)) << name;
            EXPECT_EQ(bpf_map__key_size(own), bpf_map__key_size(map)) << name;
            EXPECT_EQ(bpf_map__value_size(own), bpf_map__value_size(map)) << name;
            EXPECT_EQ(bpf_map__max_entries(own), bpf_map__max_entries(map)) << name;
        }
        EXPECT_TRUE(shared_section) << "object " << o << " has no " << kSharedSection;
    }
    for (const auto& [name, n] : defined_by) {
        if (n < 2) continue;
        EXPECT_NE(bpf_object__find_map_by_name(core, name.c_str()), nullptr)
            << name << " is defined by two deep-tier objects but not the default tier's";
    }
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
