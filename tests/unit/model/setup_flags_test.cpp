// Names of IORING_SETUP_* flags (model/setup_flags.hpp).
#include "model/setup_flags.hpp"

#include <gtest/gtest.h>

#include "iouscope/seeds_uapi.h"

namespace iouscope {
namespace {

TEST(SetupFlags, NamesEachBitInBitOrder) {
    EXPECT_EQ(setup_flag_names(0), "");
    EXPECT_EQ(setup_flag_names(1U << 1), "sqpoll");
    EXPECT_EQ(setup_flag_names((1U << 13) | (1U << 12) | 1U), "iopoll,single_issuer,defer_taskrun");
    EXPECT_EQ(setup_flag_names(1U << 18), "cqe_mixed");
}

TEST(SetupFlags, SeedsFlagsHaveTheirNamesAndUnknownBitsTheirNumber) {
    EXPECT_EQ(setup_flag_names((1U << 1) | IOU_SEEDS_SETUP_SQPOLL_PERCPU | IOU_SEEDS_SETUP_IDLE_NS),
              "sqpoll,sqpoll_percpu,idle_ns");
    EXPECT_EQ(setup_flag_names((1U << 19) | (1U << 31)), "bit19,bit31");
}

}  // namespace
}  // namespace iouscope
