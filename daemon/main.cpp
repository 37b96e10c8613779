// uringscoped: the daemon. Parses flags, binds the HTTP port, loads and attaches the BPF
// programs the kernel supports, then samples until SIGINT or SIGTERM.
#include <prometheus/exposer.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include "daemon/bpf_loader.hpp"
#include "daemon/flags.hpp"
#include "daemon/kernel_features.hpp"
#include "daemon/privileges.hpp"
#include "daemon/sampler.hpp"
#include "exporters/prometheus_exporter.hpp"

using namespace uringscope;

namespace {

// civetweb spells "every interface" as a bare port.
std::string civetweb_port(const std::string& address) {
    return address.front() == ':' ? address.substr(1) : address;
}

}  // namespace

int main(int argc, char** argv) {
    auto flags = parse_daemon_flags(argc, argv);
    if (!flags.config) {
        (flags.exit_code ? std::cerr : std::cout) << flags.output << "\n";
        return flags.exit_code;
    }
    const DaemonConfig& cfg = *flags.config;
    spdlog::set_level(spdlog::level::from_str(cfg.log_level));
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");

    // Signals are taken synchronously by main via sigwait; block them before any thread exists
    // so civetweb's and the sampler's threads inherit the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    if (auto err = missing_bpf_privileges()) {
        spdlog::error("{}", *err);
        return 1;
    }
    KernelFeatures kf;
    if (auto err = KernelFeatures::load(kf)) {
        spdlog::error("{}", *err);
        return 1;
    }

    std::unique_ptr<prometheus::Exposer> exposer;
    try {
        exposer = std::make_unique<prometheus::Exposer>(civetweb_port(cfg.listen_address), 4);
    } catch (const std::exception& e) {
        spdlog::error("cannot listen on {}: {} (is the address in use, or not on this host?)",
                      cfg.listen_address, e.what());
        return 1;
    }

    std::string err;
    auto bpf = BpfCollector::make(kf, err);
    if (!bpf) {
        spdlog::error("{}", err);
        return 1;
    }
    const bool per_thread = kf.work_time_per_thread();
    spdlog::info("kernel {}: SQ thread work time {}", kf.release(),
                 per_thread ? "from the kernel (per-thread sqd->work_time)"
                            : "estimated (sqd->work_time absent or process-wide)");

    auto store = std::make_shared<SnapshotStore>();
    Sampler sampler(*bpf, per_thread, store);
    if (!sampler.sample_once()) return 1;
    // The exposer holds only a weak_ptr: the collectable must outlive it, so it lives here.
    auto collectable = std::make_shared<SnapshotCollectable>(store);
    exposer->RegisterCollectable(collectable, cfg.telemetry_path);
    spdlog::info("serving metrics on http://{}{} every {} ms", cfg.listen_address,
                 cfg.telemetry_path,
                 std::chrono::duration_cast<std::chrono::milliseconds>(cfg.interval).count());

    std::jthread worker([&](std::stop_token st) { sampler.run(st, cfg.interval); });
    int sig = 0;
    sigwait(&sigs, &sig);
    spdlog::info("received {}, detaching", sig == SIGINT ? "SIGINT" : "SIGTERM");
    worker.request_stop();
    worker.join();
    exposer.reset();
    bpf.reset();
    spdlog::info("all probes detached");
    return 0;
}
