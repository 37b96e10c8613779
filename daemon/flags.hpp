#pragma once
// Command line of iouscoped, in node_exporter's style (--web.listen-address, --log.level, ...),
// parsed without side effects so every error path is unit-tested.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/gap_sampling.hpp"
#include "model/ring_series.hpp"

namespace iouscope {

// 10464 sits outside 9100-9999, which the Prometheus exporter port registry has used up.
inline constexpr std::string_view kDefaultListenAddress = "127.0.0.1:10464";

// IOU_MAX_RINGS and IOU_MAX_SQ_THREADS (include/iouscope/records.h), the compiled map sizes.
inline constexpr std::uint32_t kDefaultMaxRings = 16384, kDefaultMaxSqThreads = 4096;

// --probes.sched-gate's values. on: detached while every SQ thread spins; lazy: also while there
// is none and until one sleeps; automatic ("auto", the default): lazy unless the kernel has
// nohz_full CPUs, on where it has.
enum class SchedGateMode { off, on, lazy, automatic };

struct DaemonConfig {
    std::string listen_address{kDefaultListenAddress};
    std::string telemetry_path = "/metrics";
    std::chrono::nanoseconds interval = std::chrono::seconds(1);
    std::string log_level = "info";
    bool deep = false;          // --probes.deep: per-batch and per-request probes
    bool requests = false;      // --probes.requests: every request, per ring and opcode
    bool no_fentry = false;     // --no-fentry: use kprobes where fentry would do
    bool probe_report = false;  // --probe-report: print the probe plan and exit
    // --probes.sched-gate: detach the sched programs while SQ threads spin (model/sched_gate).
    SchedGateMode sched_gate = SchedGateMode::automatic;
    // --probes.gap-sampling: the duty cycle of a per-SQE work-gap probe (6s/60s, or off).
    GapSamplingConfig gap_sampling;
    std::string runas_user;  // --runas.user: switch to this user once attached
    std::string web_config;  // --web.config.file: TLS and basic auth
    // --advise.window: findings are judged over this much history; 0 switches the advisor off.
    std::chrono::nanoseconds advise_window = std::chrono::seconds(60);
    // --advise.min-saving: findings predicting a smaller CPU saving (cores) are not reported.
    double advise_min_saving = 0.10;
    // --rings.series-limit: plain rings with series of their own; 0 = every ring.
    std::size_t ring_series_limit = RingSeries::kDefaultLimit;
    // --rings.plain-interval: plain rings are read in full this far apart; 0 = every walk.
    std::chrono::nanoseconds plain_interval = std::chrono::seconds(5);
    // --requests.stuck-after: in flight this long, a request is stuck; 0 = none is.
    std::chrono::nanoseconds stuck_after = std::chrono::seconds(10);
    // --maps.rings, --maps.sq-threads: BPF map capacities (collect/bpf_load.hpp).
    std::uint32_t max_rings = kDefaultMaxRings, max_sq_threads = kDefaultMaxSqThreads;
};

struct FlagsResult {
    std::optional<DaemonConfig> config;  // set when the daemon should run
    int exit_code = 0;                   // when config is empty: 0 after --help/--version, else 2
    std::string output;                  // help/version text (stdout) or error message (stderr)
    bool version = false;                // --version: main prints the build and the kernel
};

FlagsResult parse_daemon_flags(int argc, const char* const* argv);

// Returns an error message if the address is not HOST:PORT with an IPv4/IPv6 literal host (or an
// empty host, meaning every interface) and a port in 1..65535.
std::optional<std::string> check_listen_address(std::string_view address);

}  // namespace iouscope
