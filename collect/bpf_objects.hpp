#pragma once
// The BPF objects, one per tier (bpf/iouscope.bpf.c says why these): each is opened only when
// one of its probes is selected, and loaded after the default tier's, whose shared maps and
// globals it is handed first (bpf_map__reuse_fd), so both tiers use one copy.
#include <cstdint>
#include <memory>

// The skeletons' globals are of its types: included here, before any skeleton.
#include "iouscope/records.h"
#include "iouscope/requests.h"

struct bpf_map;
struct bpf_object;
struct iouscope_bpf;
struct iouscope_deep_bpf;
struct iouscope_nvme_bpf;
struct iouscope_gaps_bpf;
struct iouscope_req_bpf;

namespace iouscope {

// The objects, in load order: the first owns what the others share.
enum class BpfObject : std::uint8_t { core, deep, nvme, gaps, req, count };
constexpr std::size_t kBpfObjects = static_cast<std::size_t>(BpfObject::count);

// The data section of the globals every object shares (bpf/common.bpf.h, IOU_SHARED_SECTION).
inline constexpr const char* kSharedSection = ".data.shared";

struct SkeletonDeleter {
    void operator()(iouscope_bpf* s) const;
    void operator()(iouscope_deep_bpf* s) const;
    void operator()(iouscope_nvme_bpf* s) const;
    void operator()(iouscope_gaps_bpf* s) const;
    void operator()(iouscope_req_bpf* s) const;
};

// The opened skeletons; null where the tier's object is not open. Destroyed last-loaded first.
// The shared globals are read and written through the default tier's skeleton only (its
// mapping is the map's own); the others' copies of the section are never touched.
struct BpfObjects {
    std::unique_ptr<iouscope_bpf, SkeletonDeleter> core;
    std::unique_ptr<iouscope_deep_bpf, SkeletonDeleter> deep;
    std::unique_ptr<iouscope_nvme_bpf, SkeletonDeleter> nvme;
    std::unique_ptr<iouscope_gaps_bpf, SkeletonDeleter> gaps;
    std::unique_ptr<iouscope_req_bpf, SkeletonDeleter> req;
    // Open the default tier built without the bpf_rdonly_cast extern (iouscope_nocast): for
    // kernels whose BTF lacks the kfunc (bpf/core_fixes.bpf.h, get_ring_ctx).
    bool core_without_cast = false;

    // Opens the object's skeleton (parses it, loads nothing); false with errno set on failure.
    bool open(BpfObject id);
    // The opened object, or nullptr.
    bpf_object* object(BpfObject id) const;
    // Loads the opened objects in order, each after it is handed the default tier's maps of the
    // same name and its shared globals. 0 or a negative errno.
    int load();
    // The fd of the map of that name in the first open object that has it (its owner), or -1.
    int map_fd(const char* name) const;
};

}  // namespace iouscope
