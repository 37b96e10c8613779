// iouscoped: the daemon. Parses flags, binds the HTTP port, loads and attaches the BPF
// programs the kernel supports, then samples until SIGINT or SIGTERM.
#include <pwd.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "collect/bpf_loader.hpp"
#include "collect/kernel_features.hpp"
#include "collect/privileges.hpp"
#include "collect/sampler.hpp"
#include "collect/submit_cost.hpp"
#include "daemon/flags.hpp"
#include "daemon/version.hpp"
#include "exporters/json_exporter.hpp"
#include "exporters/prometheus_exporter.hpp"
#include "exporters/render_cache.hpp"
#include "model/sched_gate.hpp"
#include "server/http_server.hpp"

using namespace iouscope;

namespace {

void setup_logging(const DaemonConfig& cfg) {
    // Logs go to stderr; stdout is left for output a caller may parse.
    spdlog::set_default_logger(spdlog::stderr_color_mt("iouscoped"));
    spdlog::set_level(spdlog::level::from_str(cfg.log_level));
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
}

// Signals are taken synchronously by main via sigwait; blocked before any thread exists so the
// HTTP server's and the sampler's threads inherit the mask.
sigset_t block_stop_signals() {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    return sigs;
}

// Every probe the kernel allows, deep tier included, loaded and attached for a moment.
std::unique_ptr<BpfCollector> load_every_probe(const DaemonConfig& cfg, const KernelFeatures& kf,
                                               std::string& err) {
    // The table is the output; the log only adds noise unless debugging was asked for.
    if (cfg.log_level != "debug") spdlog::set_level(spdlog::level::err);
    return BpfCollector::make(kf,
                              LoaderOptions{true, cfg.no_fentry, cfg.gap_sampling, cfg.max_rings,
                                            cfg.max_sq_threads, true},
                              err);
}

void print_probes(const BpfCollector& bpf) {
    std::printf("%-24s %-8s %-9s %s\n", "PROBE", "KIND", "STATE", "DETAIL");
    for (const auto& p : bpf.probes())
        std::printf("%-24s %-8s %-9s %s\n", p.probe.c_str(), p.attached ? p.kind.c_str() : "-",
                    p.attached ? "attached" : "off", p.reason.c_str());
}

// --probe-report: which variant of each probe this kernel takes, then exit.
int probe_report(const DaemonConfig& cfg, const KernelFeatures& kf) {
    std::string err;
    auto bpf = load_every_probe(cfg, kf, err);
    if (!bpf) {
        spdlog::error("{}", err);
        return 1;
    }
    std::printf("kernel %s\n", kf.release().c_str());
    print_probes(*bpf);
    return 0;
}

// --version: the build, the kernel and, as root, every probe's attach kind. Always exits 0: what
// could not be found out is said in its place.
int print_version() {
    std::fputs(build_report().c_str(), stdout);
    KernelFeatures kf;
    const auto btf_error = KernelFeatures::load(kf);
    std::fputs(kernel_report(btf_error ? nullptr : &kf, btf_error).c_str(), stdout);
    if (btf_error) return 0;
    if (auto why = missing_bpf_privileges()) {
        std::printf("probes:     not loaded: %s\n", why->c_str());
        return 0;
    }
    std::string err;
    auto bpf = load_every_probe(DaemonConfig{}, kf, err);
    if (!bpf) {
        std::printf("probes:     none load: %s\n", err.c_str());
        return 0;
    }
    std::printf("probes (as the daemon with --probes.deep --probes.requests would attach them):\n");
    print_probes(*bpf);
    return 0;
}

// Binds the port before anything is loaded, so a busy port fails first. Sets exit_code on
// failure: 2 for a bad web config, 1 for a port that cannot be served.
std::unique_ptr<HttpServer> serve(const DaemonConfig& cfg, WebConfig& web, int& exit_code) {
    if (!cfg.web_config.empty()) {
        if (auto why = load_web_config(cfg.web_config, web)) {
            std::cerr << "iouscoped: " << *why << "\n";
            exit_code = 2;
            return nullptr;
        }
    }
    std::string err;
    auto http = HttpServer::make(cfg.listen_address, web, err);
    if (!http) {
        spdlog::error(
            "cannot serve on {}: {} (address in use or not on this host, or the TLS files in the "
            "web config)",
            cfg.listen_address, err);
        exit_code = 1;
    }
    return http;
}

// /metrics and the JSON API, each rendered once per snapshot.
void add_routes(HttpServer& http, const DaemonConfig& cfg, std::shared_ptr<SnapshotStore> store) {
    auto metrics = std::make_shared<RenderCache>([](const Snapshot& s) { return render_text(s); });
    auto json = std::make_shared<RenderCache>(snapshot_to_json);
    auto cached = [store](std::shared_ptr<RenderCache> cache, const char* type) {
        return [store, cache, type] {
            const auto snap = store->latest();
            return HttpResponse{.status = 200,
                                .content_type = type,
                                .body = {},
                                .shared_body = cache->get(snap),
                                .gzip_body = [cache, snap] { return cache->gzip(snap); }};
        };
    };
    http.route(cfg.telemetry_path, cached(metrics, "text/plain; version=0.0.4; charset=utf-8"));
    http.route("/api/v1/snapshot", cached(json, "application/json"));
}

// The checks that need nothing loaded: the user to run as, BPF privileges, the kernel's BTF.
int preflight(const DaemonConfig& cfg, KernelFeatures& kf) {
    if (!cfg.runas_user.empty() && !getpwnam(cfg.runas_user.c_str())) {
        std::cerr << "iouscoped: --runas.user: no user \"" << cfg.runas_user << "\"\n";
        return 2;
    }
    if (auto err = missing_bpf_privileges()) {
        spdlog::error("{}", *err);
        return 1;
    }
    if (auto err = KernelFeatures::load(kf)) {
        spdlog::error("{}", *err);
        return 1;
    }
    return 0;
}

// --probes.sched-gate=auto settles on lazy or on from the kernel's nohz_full CPUs.
bool gate_is_lazy(SchedGateMode mode) {
    if (mode != SchedGateMode::automatic) return mode == SchedGateMode::lazy;
    std::ifstream f("/sys/devices/system/cpu/nohz_full");
    std::string cpus;
    std::getline(f, cpus);
    const bool lazy = auto_gate_is_lazy(cpus);
    if (!lazy)
        spdlog::info(
            "scheduler gate: on, not lazy: CPUs {} are nohz_full, where only sched_switch's "
            "note of a polling thread's switch-in charges its CPU time exactly",
            cpus);
    return lazy;
}

// Loads and attaches, takes the first sample, drops privileges, serves until SIGINT/SIGTERM.
int run(const DaemonConfig& cfg, const KernelFeatures& kf, const sigset_t& sigs) {
    WebConfig web;
    int exit_code = 0;
    auto http = serve(cfg, web, exit_code);
    if (!http) return exit_code;
    // Measured before any probe is attached: its ring is not one to report.
    AdviseOptions advise_opts;
    advise_opts.min_cpu_saving_cores = cfg.advise_min_saving;
    if (cfg.advise_window.count() > 0) measure_submit_cost(advise_opts);
    std::string err;
    auto bpf = BpfCollector::make(
        kf,
        LoaderOptions{cfg.deep, cfg.no_fentry, cfg.gap_sampling, cfg.max_rings, cfg.max_sq_threads,
                      cfg.requests, static_cast<std::uint64_t>(cfg.stuck_after.count())},
        err);
    if (!bpf) {
        spdlog::error("{}", err);
        return 1;
    }
    const KernelTraits traits = kf.traits();
    spdlog::info("kernel {}: SQ thread work time {}; sq_thread_idle in {}", kf.release(),
                 traits.work_time_per_thread ? "from the kernel (per-thread sqd->work_time)"
                                             : "estimated (sqd->work_time absent or process-wide)",
                 traits.idle_ns_supported ? "ms or ns (IORING_SETUP_IDLE_NS)" : "ms (jiffies)");
    auto store = std::make_shared<SnapshotStore>();
    Sampler sampler(*bpf, traits, store, kf.release(), kf.config_hz());
    sampler.set_ring_series_limit(cfg.ring_series_limit);
    sampler.set_plain_interval(cfg.plain_interval, cfg.interval);
    if (cfg.advise_window.count() > 0)
        sampler.enable_advice(std::chrono::duration<double>(cfg.advise_window).count(),
                              advise_opts);
    if (cfg.sched_gate != SchedGateMode::off)
        sampler.enable_sched_gate(gate_is_lazy(cfg.sched_gate));
    if (!sampler.sample_once()) return 1;
    // Everything privileged is done: programs attached, port bound, first walk taken.
    if (auto why = drop_privileges(cfg.runas_user)) {
        spdlog::error("{}", *why);
        return 1;
    }
    spdlog::info("dropped every capability but CAP_BPF{}",
                 cfg.runas_user.empty() ? "" : ", running as " + cfg.runas_user);
    add_routes(*http, cfg, store);
    spdlog::info("serving metrics on {}://{}{}{} every {} ms", web.tls() ? "https" : "http",
                 cfg.listen_address, cfg.telemetry_path,
                 web.users.empty() ? "" : " with basic auth",
                 std::chrono::duration_cast<std::chrono::milliseconds>(cfg.interval).count());

    std::jthread worker([&](std::stop_token st) { sampler.run(st, cfg.interval); });
    int sig = 0;
    sigwait(&sigs, &sig);
    spdlog::info("received {}, detaching", sig == SIGINT ? "SIGINT" : "SIGTERM");
    worker.request_stop();
    worker.join();
    http.reset();
    bpf.reset();
    spdlog::info("all probes detached");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    auto flags = parse_daemon_flags(argc, argv);
    if (flags.version) return print_version();
    if (!flags.config) {
        (flags.exit_code ? std::cerr : std::cout) << flags.output << "\n";
        return flags.exit_code;
    }
    const DaemonConfig& cfg = *flags.config;
    setup_logging(cfg);
    const sigset_t sigs = block_stop_signals();
    KernelFeatures kf;
    if (int rc = preflight(cfg, kf)) return rc;
    return cfg.probe_report ? probe_report(cfg, kf) : run(cfg, kf, sigs);
}
