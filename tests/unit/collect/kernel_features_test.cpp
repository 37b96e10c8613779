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

// What the request tier reads of BTF: tracepoint prototypes, the REQ_F_* bits of anonymous
// enums, and the opcode names. io_uring_create and these enumerators exist on every kernel
// iouscope supports (5.10 included), so each assertion holds wherever the BTF loads.
TEST(KernelFeatures, TracepointArgumentsEnumeratorsAndOpcodeNamesComeFromBtf) {
    KernelFeatures kf;
    if (auto err = KernelFeatures::load(kf)) GTEST_SKIP() << *err;
    // (void *__data, fd, ctx, sq_entries, cq_entries, flags)
    EXPECT_EQ(kf.btf_tracepoint_params("io_uring_create"), 6);
    EXPECT_EQ(kf.btf_tracepoint_params("no_such_tracepoint"), std::nullopt);
    EXPECT_EQ(kf.btf_enumerator("REQ_F_FORCE_ASYNC_BIT"), 4);  // = IOSQE_ASYNC_BIT, uapi
    EXPECT_EQ(kf.btf_enumerator("REQ_F_LINK_BIT"), 2);
    EXPECT_EQ(kf.btf_enumerator("NO_SUCH_ENUMERATOR"), std::nullopt);
    const auto ops = kf.btf_enum_names("IORING_OP_NOP", "IORING_OP_", "IORING_OP_LAST");
    ASSERT_GE(ops.size(), 37u);  // NOP .. UNLINKAT on 5.10
    EXPECT_EQ(ops[0], "nop");
    EXPECT_EQ(ops[1], "readv");
    EXPECT_EQ(ops[22], "read");  // IORING_OP_READ, uapi
    for (const auto& n : ops) EXPECT_NE(n, "last");
    EXPECT_TRUE(kf.btf_enum_names("NO_SUCH_ENUMERATOR", "X", "").empty());
}
