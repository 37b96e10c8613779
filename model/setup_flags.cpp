// Names of a ring's IORING_SETUP_* flags (model/setup_flags.hpp).
#include "model/setup_flags.hpp"

#include <linux/io_uring.h>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <utility>

#include "iouscope/records.h"
#include "iouscope/seeds_uapi.h"

namespace iouscope {

namespace {

// The uapi's IORING_SETUP_* bits (stable: a bit never changes meaning upstream), with the
// kernel that added each, and the seeds kernel's (include/iouscope/seeds_uapi.h), which its
// patches put high so that they name no upstream bit. Checked against the build's
// <linux/io_uring.h> for the flags it has (bookworm's: up to DEFER_TASKRUN).
constexpr std::pair<std::uint32_t, std::string_view> kSetupFlags[] = {
    {1U << 0, "iopoll"},
    {1U << 1, "sqpoll"},
    {1U << 2, "sq_aff"},
    {1U << 3, "cqsize"},
    {1U << 4, "clamp"},
    {1U << 5, "attach_wq"},
    {1U << 6, "r_disabled"},           // 5.10
    {1U << 7, "submit_all"},           // 5.18
    {1U << 8, "coop_taskrun"},         // 5.19
    {1U << 9, "taskrun_flag"},         // 5.19
    {1U << 10, "sqe128"},              // 5.19
    {1U << 11, "cqe32"},               // 5.19
    {1U << 12, "single_issuer"},       // 6.0
    {1U << 13, "defer_taskrun"},       // 6.1
    {1U << 14, "no_mmap"},             // 6.5
    {1U << 15, "registered_fd_only"},  // 6.5
    {1U << 16, "no_sqarray"},          // 6.6
    {1U << 17, "hybrid_iopoll"},       // 6.13
    {1U << 18, "cqe_mixed"},           // 6.18
    {IOU_SEEDS_SETUP_SQPOLL_PERCPU, "sqpoll_percpu"},
    {IOU_SEEDS_SETUP_IDLE_NS, "idle_ns"},
    {IOU_SEEDS_SETUP_SQTHREAD_STATS, "sqthread_stats"},
};
#ifdef IORING_SETUP_DEFER_TASKRUN
static_assert(IORING_SETUP_IOPOLL == 1U << 0 && IORING_SETUP_SQPOLL == 1U << 1 &&
              IORING_SETUP_ATTACH_WQ == 1U << 5 && IORING_SETUP_SUBMIT_ALL == 1U << 7 &&
              IORING_SETUP_CQE32 == 1U << 11 && IORING_SETUP_DEFER_TASKRUN == 1U << 13);
static_assert(IOU_SETUP_COOP_TASKRUN == IORING_SETUP_COOP_TASKRUN &&
              IOU_SETUP_DEFER_TASKRUN == IORING_SETUP_DEFER_TASKRUN);
#endif

}  // namespace

std::string setup_flag_names(std::uint32_t flags) {
    std::string out;
    for (unsigned bit = 0; bit < 32; ++bit) {
        const std::uint32_t mask = 1U << bit;
        if (!(flags & mask)) continue;
        if (!out.empty()) out += ',';
        const auto* it = std::find_if(std::begin(kSetupFlags), std::end(kSetupFlags),
                                      [&](const auto& f) { return f.first == mask; });
        out += it != std::end(kSetupFlags) ? std::string(it->second) : "bit" + std::to_string(bit);
    }
    return out;
}

}  // namespace iouscope
