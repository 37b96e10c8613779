// The seeds kernel's setup flags exist twice: in its patches (tests/vm/kernels/seeds), which the
// kernel is built from, and in include/iouscope/seeds_uapi.h, which the load generator sets.
// This test reads the patches and holds the two to each other.
#include "iouscope/seeds_uapi.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

namespace {

// "+#define IORING_SETUP_X (1U << N)" lines added by the patches: name -> value.
std::map<std::string, unsigned> flags_added_by_patches() {
    const std::filesystem::path dir = IOUSCOPE_SOURCE_DIR "/tests/vm/kernels/seeds";
    const std::regex define(R"(^\+#define\s+(IORING_SETUP_\w+)\s+\(1U << (\d+)\))");
    std::map<std::string, unsigned> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".patch") continue;
        std::ifstream in(entry.path());
        std::string line;
        std::smatch m;
        while (std::getline(in, line)) {
            if (std::regex_search(line, m, define)) out[m[1]] = 1U << std::stoul(m[2]);
        }
    }
    return out;
}

}  // namespace

TEST(SeedsUapi, PatchesDefineTheseBits) {
    const std::map<std::string, unsigned> want = {
        {"IORING_SETUP_SQPOLL_PERCPU", IOU_SEEDS_SETUP_SQPOLL_PERCPU},
        {"IORING_SETUP_IDLE_NS", IOU_SEEDS_SETUP_IDLE_NS},
        {"IORING_SETUP_SQTHREAD_STATS", IOU_SEEDS_SETUP_SQTHREAD_STATS},
    };
    EXPECT_EQ(flags_added_by_patches(), want);
}
