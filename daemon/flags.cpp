#include "daemon/flags.hpp"

#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <map>

#include "common/cli_parse.hpp"
#include "common/duration.hpp"
#include "exporters/metric_catalog.hpp"
#include "iouscope/records.h"

namespace iouscope {

static_assert(kDefaultMaxRings == IOU_MAX_RINGS && kDefaultMaxSqThreads == IOU_MAX_SQ_THREADS,
              "the flags' defaults are the compiled map sizes");

namespace {

constexpr auto kMinInterval = std::chrono::milliseconds(10);
constexpr auto kMaxInterval = std::chrono::hours(1);

const char* const kDescription = R"(iouscoped - observe io_uring SQPOLL threads, rings and polling

iouscoped samples every io_uring instance on the host and serves Prometheus metrics. It reads the
counters the kernel already keeps with a BPF iterator (ring heads and tails, SQ thread run time,
context switches, sqd->work_time) and follows SQ threads' sleeps and wakeups with scheduler
tracepoints that return after one test for any other task. Nothing runs on the I/O path.

It needs root, or CAP_BPF, CAP_PERFMON and CAP_SYSLOG, and a kernel with BTF
(/sys/kernel/btf/vmlinux).)";

// After the METRICS list, which metric_catalog prints.
const char* const kFooter = R"(PROBE TIERS
  Each probe uses the best attach kind the kernel offers: fentry/fexit, then kprobe/kretprobe;
  tracepoints and the ring iterator need neither. --probe-report shows the choice per probe;
  iouscope_probe_attached{probe,kind} exports it.

EXAMPLES
  iouscoped
      Serve http://127.0.0.1:10464/metrics, sampling every second.
  iouscoped --probes.deep
      Add per-ring SQ thread work, IOPOLL poll efficiency and NVMe passthrough completions.
  iouscoped --probes.requests
      Add per-ring, per-opcode request counts, punts, latency and io_uring_enter batching.
  iouscoped --probe-report --no-fentry
      Show which probes this kernel supports with kprobes alone.
  iouscoped --web.listen-address=:10464 --sample.interval=5s
      Listen on every interface (an explicit choice: the metrics name processes) and sample
      every five seconds.

EXIT STATUS
  0  stopped by SIGINT or SIGTERM, or --help/--version
  1  could not start: no BPF permission, no BTF, address in use, BPF load failure
  2  bad command line)";

}  // namespace

std::optional<std::string> check_listen_address(std::string_view address) {
    auto colon = address.rfind(':');
    if (colon == std::string_view::npos)
        return "listen address \"" + std::string(address) + "\" has no port; use HOST:PORT";
    std::string_view host = address.substr(0, colon), port = address.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535)
        return "listen address \"" + std::string(address) + "\": port must be 1-65535";
    if (host.empty()) return std::nullopt;
    unsigned char buf[16];
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        std::string v6(host.substr(1, host.size() - 2));
        if (inet_pton(AF_INET6, v6.c_str(), buf) == 1) return std::nullopt;
    } else if (inet_pton(AF_INET, std::string(host).c_str(), buf) == 1) {
        return std::nullopt;
    }
    return "listen address \"" + std::string(address) +
           "\": host must be an IPv4 address, a bracketed IPv6 address, or empty for all "
           "interfaces";
}

namespace {

// The flags as typed, before validation.
struct RawFlags {
    std::string interval = "1s";
    std::string advise = "60s";
    std::string gap_sampling = "6s/60s";
    std::string sched_gate = "auto";
    std::string plain_interval = "5s";
    std::string stuck_after = "10s";
    bool version = false;
    bool metrics = false;
};

void add_web_options(CLI::App& app, DaemonConfig& cfg) {
    app.add_option("--web.listen-address", cfg.listen_address,
                   "Address to serve metrics on, HOST:PORT. An empty host listens on every "
                   "interface.")
        ->default_str(std::string(kDefaultListenAddress));
    app.add_option("--web.config.file", cfg.web_config,
                   "YAML file enabling TLS and/or basic auth, as for node_exporter: "
                   "tls_server_config: {cert_file, key_file}; basic_auth_users: {user: bcrypt "
                   "hash}. Refused if anyone may write it.");
    app.add_option("--web.telemetry-path", cfg.telemetry_path,
                   "Path under which to expose metrics.")
        ->default_str("/metrics");
}

// What the daemon holds at scale: its BPF maps, and the series of plain rings.
void add_scale_options(CLI::App& app, DaemonConfig& cfg, RawFlags& raw) {
    app.add_option("--rings.series-limit", cfg.ring_series_limit,
                   "Plain rings (neither SQPOLL nor IOPOLL) that get iouscope_ring_* series of "
                   "their own, at most; 0 gives every ring its own. The places go to the busiest "
                   "rings (SQEs and CQEs, weighted down over 5 minutes); a ring keeps its place "
                   "until it closes, or until a ring more than twice as busy wants it and it has "
                   "held it a minute. The other plain rings "
                   "are counted per process (iouscope_process_folded_rings, and their SQEs and "
                   "CQEs). SQPOLL and IOPOLL rings always have their own series; top and the "
                   "JSON API show every ring.")
        ->default_str(std::to_string(RingSeries::kDefaultLimit));
    app.add_option("--rings.plain-interval", raw.plain_interval,
                   "How often a walk reads every plain ring (neither SQPOLL nor IOPOLL), up to "
                   "1h; 0 reads them at every sample. The walks between pass over the plain rings "
                   "that were idle over the last period and keep their last counts, which saves "
                   "the walk a cold cache miss per ring: at 10,000 idle rings, most of its time. "
                   "New rings, plain rings that did anything, and SQPOLL and IOPOLL rings are "
                   "read by every walk. Work an idle ring starts shows at the next full walk, and "
                   "an idle ring's series go at most this long after it closes. At or below "
                   "--sample.interval, every walk is full.")
        ->default_str("5s");
    app.add_option("--maps.rings", cfg.max_rings,
                   "Rings the BPF maps keyed by ring hold (ring_births, created_rings, and the "
                   "deep tier's ring_work and iopoll_stats), 64 to 4194304. Each entry costs "
                   "about 100 bytes of locked kernel memory per map. A ring that finds its map "
                   "full is still walked, without a birth time or deep-tier counts, and counts in "
                   "iouscope_map_overflow_total; iouscope_map_entries against "
                   "iouscope_map_capacity says how close a host is.")
        ->default_str(std::to_string(kDefaultMaxRings))
        ->check(CLI::Range(64u, 4194304u));
    app.add_option("--maps.sq-threads", cfg.max_sq_threads,
                   "SQ threads the BPF maps keyed by thread hold (sched_state, and the deep tier's "
                   "work_gaps and sq_passes; wakers holds twice as many thread and waker pairs), "
                   "16 to 1048576.")
        ->default_str(std::to_string(kDefaultMaxSqThreads))
        ->check(CLI::Range(16u, 1048576u));
}

void add_sampling_options(CLI::App& app, DaemonConfig& cfg, RawFlags& raw) {
    app.add_option("--sample.interval", raw.interval,
                   "Time between samples, e.g. 500ms, 1s, 1m (10ms to 1h).")
        ->default_str("1s");
    app.add_option("--log.level", cfg.log_level, "Log level: debug, info, warn or error.")
        ->default_str("info");
    app.add_flag("--probes.deep", cfg.deep,
                 "Also attach the deep tier: per-ring SQ thread work (io_submit_sqes), IOPOLL "
                 "efficiency (io_do_iopoll) and NVMe passthrough completions. These fire per "
                 "batch or per request; see docs/BENCHMARKS.md for their cost.");
    app.add_flag("--probes.requests", cfg.requests,
                 "Also attach the request tier: every request of every ring from submission to "
                 "its final CQE, per ring and opcode: requests, io-wq punts, async poll arms, "
                 "completions by result and a latency histogram per path (inline, io-wq, poll), "
                 "the requests in flight with the oldest's age, and io_uring_enter calls per ring "
                 "with the SQEs each submitted. Runs for every request; see docs/BENCHMARKS.md "
                 "for its cost per request.");
    app.add_option("--requests.stuck-after", raw.stuck_after,
                   "With --probes.requests: a request in flight longer than this is stuck, "
                   "counted per ring in iouscope_ring_requests_stuck while it lasts (the JSON "
                   "snapshot names each ring's oldest request, its opcode and fd), e.g. 500ms, "
                   "10s, 1m; at most 1h; 0 counts none.")
        ->default_str("10s");
    app.add_option("--probes.gap-sampling", raw.gap_sampling,
                   "Where the deep tier's work-gap probe (the sq_thread_idle curve of iouscope "
                   "advise) can only run once per SQE, attach it for ON of every PERIOD, e.g. "
                   "6s/60s: it costs nothing the rest of the time, and the advisor scales what "
                   "the windows recorded. ON is at least 3s (the first 2.15s of a window only find "
                   "where gaps start); a window closes sooner once it has recorded 1.25s and "
                   "20,000 gaps, and at once where no ring has SQPOLL. \"off\" records all the "
                   "time. Kernels where io_submit_sqes "
                   "can be hooked record once per batch and are always attached.")
        ->default_str("6s/60s");
    app.add_option("--probes.sched-gate", raw.sched_gate,
                   "sched_switch and sched_waking run on every context switch and wakeup of the "
                   "machine, to follow the few that are SQ threads'. lazy: keep them detached "
                   "while there is no SQ thread, while new threads run without sleeping, and "
                   "once every SQ thread has run 5 s without sleeping; attach them at the first "
                   "sample that finds a thread slept. A machine with no sleeping SQ thread pays "
                   "nothing for them. Sleeps while they are detached come from the threads' "
                   "voluntary switch counts and their time off the CPU: blocks count as sleeps "
                   "there, and wake latency and wakers are not seen, so a new thread's first "
                   "sleeps (and its setup's blocks) carry no waker. on: as lazy, but attached "
                   "while there is no SQ thread and from a new thread's birth, so its first "
                   "sleeps are followed exactly, and so is the CPU time of a thread that polls "
                   "from its birth on a nohz_full CPU, which the scheduler charges only once a "
                   "second there. auto (the default): on where the kernel has nohz_full CPUs "
                   "(/sys/devices/system/cpu/nohz_full), lazy elsewhere. off: keep them "
                   "attached. Where --probes.deep attaches loop_passes (fentry or kprobes on "
                   "io_sq_tw) they stay attached: it takes each pass's preemptions off its "
                   "work through sched_switch.")
        ->default_str("auto");
    app.add_flag("--no-fentry", cfg.no_fentry,
                 "Never use fentry/fexit; fall back to kprobes. For kernels where fentry "
                 "misbehaves, and to test the kprobe tier.");
    app.add_flag("--probe-report", cfg.probe_report,
                 "Load every probe this kernel allows (deep tier included), print each with the "
                 "attach kind chosen or the reason it is off, and exit.");
    app.add_option("--advise.window", raw.advise,
                   "History the advisor judges tuning findings over (iouscope advise, "
                   "iouscope_advice_finding, the log), 5s to 1h, or 0 to switch it off. The "
                   "sq_thread_idle curve needs --probes.deep.")
        ->default_str("60s");
    app.add_option("--advise.min-saving", cfg.advise_min_saving,
                   "Findings that predict saving less CPU than this (cores) are not reported: "
                   "sq_idle_too_long, sq_threads_should_share and single_sqe_per_enter.")
        ->check(CLI::Range(0.0, 64.0))
        ->default_str("0.1");
    app.add_option("--runas.user", cfg.runas_user,
                   "After attaching, switch to this user (e.g. nobody). Every capability is "
                   "dropped after attaching in any case.");
    app.add_flag("--metrics", raw.metrics,
                 "Print every metric family (name, type, labels, help; tab-separated) and exit.");
    app.add_flag("--version", raw.version,
                 "Print the version, the commit, the libraries built against, the kernel and "
                 "how the walk reads its rings; as root also what every probe would attach as "
                 "(loading them for a moment), and exit. Paste it into a bug report.");
}

// A duration flag that also takes "0": the duration in out (0 for "0"), or why it is not one.
std::optional<std::string> zero_or_duration(const std::string& flag, const std::string& value,
                                            const char* examples, std::chrono::nanoseconds& out) {
    if (value == "0") {
        out = std::chrono::nanoseconds(0);
        return std::nullopt;
    }
    auto d = parse_duration(value);
    if (!d) return flag + ": \"" + value + "\" is not a duration (examples: " + examples + ") or 0";
    out = *d;
    return std::nullopt;
}

// --advise.window after --sample.interval is known: "0", or 5s to 1h spanning two samples.
std::optional<std::string> check_advise_window(const RawFlags& raw, DaemonConfig& cfg) {
    std::chrono::nanoseconds window{};
    if (auto err = zero_or_duration("--advise.window", raw.advise, "30s, 5m", window)) return err;
    // Only "0" is off: "0s" is a window, and too short.
    const bool off = raw.advise == "0";
    if (!off && (window < std::chrono::seconds(5) || window > std::chrono::hours(1)))
        return "--advise.window must be between 5s and 1h (or 0 for off), got " + raw.advise;
    if (!off && window < 2 * cfg.interval)
        return "--advise.window (" + raw.advise +
               ") must span at least two samples of --sample.interval (" + raw.interval + ")";
    cfg.advise_window = window;
    return std::nullopt;
}

// --rings.plain-interval: "0", or a duration up to 1h.
std::optional<std::string> check_plain_interval(const RawFlags& raw, DaemonConfig& cfg) {
    if (auto err = zero_or_duration("--rings.plain-interval", raw.plain_interval, "5s, 1m",
                                    cfg.plain_interval))
        return err;
    if (cfg.plain_interval > std::chrono::hours(1))
        return "--rings.plain-interval must be at most 1h, got " + raw.plain_interval;
    if (auto err = zero_or_duration("--requests.stuck-after", raw.stuck_after, "500ms, 10s",
                                    cfg.stuck_after))
        return err;
    if (cfg.stuck_after > std::chrono::hours(1))
        return "--requests.stuck-after must be at most 1h, got " + raw.stuck_after;
    return std::nullopt;
}

// Every check a parsed command line must pass; the first failure's message.
std::optional<std::string> validate(const RawFlags& raw, DaemonConfig& cfg) {
    if (auto err = check_listen_address(cfg.listen_address)) return err;
    if (cfg.telemetry_path.empty() || cfg.telemetry_path.front() != '/')
        return "--web.telemetry-path must start with '/', got \"" + cfg.telemetry_path + "\"";
    auto interval = parse_duration(raw.interval);
    if (!interval)
        return "--sample.interval: \"" + raw.interval +
               "\" is not a duration (examples: 500ms, 1s, 2m)";
    if (*interval < kMinInterval || *interval > kMaxInterval)
        return "--sample.interval must be between 10ms and 1h, got " + raw.interval;
    cfg.interval = *interval;
    if (auto err = check_advise_window(raw, cfg)) return err;
    if (auto err = check_plain_interval(raw, cfg)) return err;
    if (auto err = parse_gap_sampling(raw.gap_sampling, cfg.gap_sampling)) return err;
    static const std::map<std::string, SchedGateMode> kGates{{"auto", SchedGateMode::automatic},
                                                             {"lazy", SchedGateMode::lazy},
                                                             {"on", SchedGateMode::on},
                                                             {"off", SchedGateMode::off}};
    const auto gate = kGates.find(raw.sched_gate);
    if (gate == kGates.end())
        return "--probes.sched-gate must be auto, lazy, on or off, got \"" + raw.sched_gate + "\"";
    cfg.sched_gate = gate->second;
    if (cfg.log_level != "debug" && cfg.log_level != "info" && cfg.log_level != "warn" &&
        cfg.log_level != "error")
        return "--log.level must be debug, info, warn or error, got \"" + cfg.log_level + "\"";
    return std::nullopt;
}

}  // namespace

FlagsResult parse_daemon_flags(int argc, const char* const* argv) {
    DaemonConfig cfg;
    RawFlags raw;
    CLI::App app{kDescription, "iouscoped"};
    app.footer(metrics_help_list() + "\n\n" + kFooter);
    app.get_formatter()->column_width(34);
    add_web_options(app, cfg);
    add_sampling_options(app, cfg, raw);
    add_scale_options(app, cfg, raw);

    FlagsResult result;
    if (!cli::parse_or_answer(app, argc, argv, "iouscoped", result)) return result;
    if (raw.version) {
        result.version = true;
        return result;
    }
    if (raw.metrics) {
        result.output = metrics_table();
        result.output.pop_back();  // the caller ends the output with a newline
        return result;
    }
    if (auto err = validate(raw, cfg)) {
        result.exit_code = 2;
        result.output = "iouscoped: " + *err;
        return result;
    }
    result.config = cfg;
    return result;
}

}  // namespace iouscope
