#pragma once
// What the kernel offers that changes how a sample reads: asked of its BTF once at start
// (collect/kernel_features) and carried in every RawSample (model/aggregator.hpp).

namespace iouscope {

struct KernelTraits {
    bool work_time_per_thread = false;  // sqd->work_time is the SQ thread's own time
    bool idle_ns_supported = false;     // IORING_SETUP_IDLE_NS (seeds patch 002)
};

}  // namespace iouscope
