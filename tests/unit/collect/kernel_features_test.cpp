// KernelFeatures reads this machine's own BTF; every kernel iouscope supports has one.
#include "collect/kernel_features.hpp"

#include <gtest/gtest.h>

using namespace iouscope;

TEST(KernelFeatures, MembersAreFoundByNameInTheirStructOnly) {
    KernelFeatures kf;
    if (auto err = KernelFeatures::load(kf)) GTEST_SKIP() << *err;
    EXPECT_TRUE(kf.has_btf_member("task_struct", "pid"));
    EXPECT_TRUE(kf.has_btf_member("task_struct", "tgid"));
    EXPECT_FALSE(kf.has_btf_member("task_struct", "no_such_member"));
    EXPECT_FALSE(kf.has_btf_member("no_such_struct", "pid"));
    // A member of another struct is not this one's: io_ring_ctx has sq_data, task_struct not.
    EXPECT_TRUE(kf.has_btf_member("io_ring_ctx", "sq_data"));
    EXPECT_FALSE(kf.has_btf_member("task_struct", "sq_data"));
}
