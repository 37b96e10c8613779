#pragma once
// Loading the BPF objects: which variant of each probe this kernel can run, decided from its
// BTF and symbols without loading anything (plan_probes), then confirmed by loading the per-tier
// objects, with a fallback through each probe's variants when the verifier rejects one.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collect/bpf_objects.hpp"
#include "collect/kernel_features.hpp"
#include "collect/probe_table.hpp"
#include "model/gap_sampling.hpp"
#include "model/snapshot.hpp"

namespace iouscope {

struct LoaderOptions {
    bool deep = false;               // load the deep tier (per batch / per request probes)
    bool no_fentry = false;          // skip fentry/fexit variants, e.g. to exercise kprobes
    GapSamplingConfig gap_sampling;  // duty cycle of per-SQE variants (ProbeVariant::per_sqe)
    // Capacity of the per-ring and per-SQ-thread BPF maps (map_capacities()); 0 keeps the
    // compiled size (IOU_MAX_RINGS, IOU_MAX_SQ_THREADS).
    std::uint32_t max_rings = 0, max_sq_threads = 0;
    bool requests = false;  // load the request tier (per request: bpf/iouscope_req.bpf.c)
    // A request in flight this long is stuck (RingInFlight::stuck); 0 = none is.
    std::uint64_t stuck_after_ns = 10'000'000'000;
};

// Each bounded BPF map's capacity under these options: per ring (ring_births, created_rings,
// ring_work, iopoll_stats) max_rings, per SQ thread (sched_state, work_gaps, sq_passes)
// max_sq_threads, wakers twice that.
std::vector<std::pair<std::string, std::uint32_t>> map_capacities(const LoaderOptions& opts);

// A probe index (probe_table() order) and the variant of it to load.
using Selection = std::map<std::size_t, int>;

// Decides, without loading anything, which variant each probe would use on this kernel and why
// the others are out. The loader then confirms by loading.
std::vector<ProbeState> plan_probes(const KernelFeatures& kf, const LoaderOptions& opts,
                                    std::vector<int>& chosen_variant);

// Sends libbpf's messages to the log (at debug) and keeps the verifier's verdicts for the
// fallback's reasons.
void install_libbpf_log();

// Loads the variants plan_probes() chose into objs; when something optional is rejected, each
// probe is tried beside the essential ones, falling back through its variants, and states say
// why a variant was passed over. Returns what loaded, or nullopt with error set when an
// essential probe cannot run.
std::optional<Selection> load_probes(const KernelFeatures& kf, const LoaderOptions& opts,
                                     const std::vector<int>& chosen,
                                     std::vector<ProbeState>& states, BpfObjects& objs,
                                     std::string& error);

}  // namespace iouscope
