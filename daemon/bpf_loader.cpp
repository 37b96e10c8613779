#include "daemon/bpf_loader.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "uringscope.skel.h"

namespace uringscope {

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

std::unique_ptr<AttachedProbe> AttachedProbe::make(bpf_program* prog, std::string& error) {
    bpf_link* l = bpf_program__attach(prog);
    if (!l) {
        error = std::string("attach failed: ") + std::strerror(errno);
        return nullptr;
    }
    return std::unique_ptr<AttachedProbe>(new AttachedProbe(l));
}

AttachedProbe::~AttachedProbe() { bpf_link__destroy(link_); }

void SkeletonDeleter::operator()(uringscope_bpf* s) const { uringscope_bpf__destroy(s); }

const std::vector<ProbeSpec>& probe_table() {
    using K = Requirement::Kind;
    static const std::vector<ProbeSpec> table = {
        {"iter_rings", "iter", [](uringscope_bpf* s) { return s->progs.usc_iter_rings; },
         {{K::btf_struct, "bpf_iter__task_file"},
          {K::btf_struct, "io_ring_ctx"},
          {K::ksym, "io_uring_poll"}},
         true},
        {"sched_switch", "tp_btf", [](uringscope_bpf* s) { return s->progs.usc_sched_switch; },
         {{K::btf_typedef, "btf_trace_sched_switch"}},
         false},
        {"sched_wakeup", "tp_btf", [](uringscope_bpf* s) { return s->progs.usc_sched_wakeup; },
         {{K::btf_typedef, "btf_trace_sched_wakeup"}},
         false},
        {"io_uring_create", "tp_btf",
         [](uringscope_bpf* s) { return s->progs.usc_io_uring_create; },
         {{K::btf_typedef, "btf_trace_io_uring_create"}},
         false},
    };
    return table;
}

namespace {

int libbpf_to_spdlog(enum libbpf_print_level level, const char* fmt, va_list args) {
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf, fmt, args);
    std::string_view msg(buf, n > 0 ? std::min<std::size_t>(n, sizeof buf - 1) : 0);
    while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
    // libbpf warns about every failed load, including the ones the tier fallback expects and
    // reports itself; keep them at debug so the log says what matters once.
    spdlog::debug("libbpf{}: {}", level == LIBBPF_WARN ? " warning" : "", msg);
    return 0;
}

std::optional<std::string> missing_requirement(const KernelFeatures& kf, const ProbeSpec& spec) {
    for (const auto& r : spec.needs) {
        bool ok = false;
        const char* what = "";
        switch (r.kind) {
        case Requirement::Kind::btf_typedef: ok = kf.has_btf_typedef(r.name); what = "BTF type"; break;
        case Requirement::Kind::btf_struct: ok = kf.has_btf_struct(r.name); what = "BTF struct"; break;
        case Requirement::Kind::btf_func: ok = kf.has_btf_func(r.name); what = "BTF function"; break;
        case Requirement::Kind::ksym: ok = kf.has_ksym(r.name); what = "kernel symbol"; break;
        }
        if (!ok) return std::string("kernel lacks ") + what + " " + r.name;
    }
    return std::nullopt;
}

std::string load_error_text(int err) {
    if (err == -EPERM || err == -EACCES)
        return "permission denied loading BPF programs: run uringscoped as root, or with "
               "CAP_BPF, CAP_PERFMON and CAP_SYSLOG";
    return std::string("loading BPF programs failed: ") + std::strerror(-err) +
           " (run with --log.level=debug for the verifier log)";
}

using SkelPtr = std::unique_ptr<uringscope_bpf, SkeletonDeleter>;

// Opens a fresh skeleton with only `enabled` programs autoloaded and tries to load it.
int try_load(const std::set<std::size_t>& enabled, SkelPtr& out) {
    SkelPtr skel(uringscope_bpf__open());
    if (!skel) return -errno;
    const auto& table = probe_table();
    for (std::size_t i = 0; i < table.size(); ++i)
        bpf_program__set_autoload(table[i].program(skel.get()), enabled.count(i) != 0);
    int err = uringscope_bpf__load(skel.get());
    if (err) return err;
    out = std::move(skel);
    return 0;
}

}  // namespace

std::unique_ptr<BpfCollector> BpfCollector::make(const KernelFeatures& kf, std::string& error) {
    libbpf_set_print(libbpf_to_spdlog);
    const auto& table = probe_table();
    std::unique_ptr<BpfCollector> c(new BpfCollector);
    c->probes_.resize(table.size());

    std::set<std::size_t> enabled;
    for (std::size_t i = 0; i < table.size(); ++i) {
        auto& st = c->probes_[i];
        st.probe = table[i].name;
        st.kind = table[i].kind;
        if (auto why = missing_requirement(kf, table[i])) {
            st.reason = *why;
            if (table[i].essential) {
                error = "cannot observe io_uring on this kernel: " + *why;
                return nullptr;
            }
            continue;
        }
        enabled.insert(i);
    }

    int err = try_load(enabled, c->skel_);
    if (err && (err == -EPERM || err == -EACCES)) {
        error = load_error_text(err);
        return nullptr;
    }
    if (err) {
        // One program the verifier rejects fails the whole object. Find which ones by loading
        // each optional program beside the essential ones; this only runs on the failure path.
        std::set<std::size_t> essential, good;
        for (auto i : enabled)
            if (table[i].essential) essential.insert(i);
        for (auto i : enabled) {
            if (table[i].essential) continue;
            auto trial = essential;
            trial.insert(i);
            SkelPtr probe;
            if (int e = try_load(trial, probe); e == 0)
                good.insert(i);
            else
                c->probes_[i].reason = "verifier rejected it: " + std::string(std::strerror(-e));
        }
        good.insert(essential.begin(), essential.end());
        err = try_load(good, c->skel_);
        if (err) {
            error = load_error_text(err);
            return nullptr;
        }
        enabled = good;
    }

    for (auto i : enabled) {
        auto& st = c->probes_[i];
        std::string why;
        auto probe = AttachedProbe::make(table[i].program(c->skel_.get()), why);
        if (!probe) {
            st.reason = why;
            if (table[i].essential) {
                error = std::string("cannot attach ") + table[i].name + ": " + why;
                return nullptr;
            }
            continue;
        }
        if (table[i].program(c->skel_.get()) == c->skel_->progs.usc_iter_rings)
            c->iter_link_ = probe->link();
        st.attached = true;
        c->links_.push_back(std::move(probe));
    }
    for (const auto& st : c->probes_) {
        if (st.attached)
            spdlog::info("probe {} ({}): attached", st.probe, st.kind);
        else
            spdlog::warn("probe {} ({}): off, {}", st.probe, st.kind, st.reason);
    }
    return c;
}

BpfCollector::~BpfCollector() {
    links_.clear();  // detach before the skeleton unloads the programs
}

bool BpfCollector::walk_rings(std::vector<usc_ring_record>& out, std::string& error) {
    UniqueFd fd(bpf_iter_create(bpf_link__fd(iter_link_)));
    if (!fd) {
        error = std::string("cannot start the ring iterator: ") + std::strerror(errno);
        return false;
    }
    // The seq_file hands out whole records: a BPF program's bpf_seq_write either fits in the
    // buffer or is retried in the next read(), so records never straddle reads. A partial
    // record would mean a layout mismatch, which is reported rather than misparsed.
    std::vector<char> buf(64 * 1024);
    std::size_t have = 0;
    for (;;) {
        if (buf.size() - have < sizeof(usc_ring_record)) buf.resize(buf.size() * 2);
        ssize_t n = ::read(fd.get(), buf.data() + have, buf.size() - have);
        if (n < 0) {
            if (errno == EINTR) continue;
            // EAGAIN: the kernel asks us to restart the walk (task list changed); the rings
            // read so far are still valid, the rest will be in the next sample.
            if (errno == EAGAIN) break;
            error = std::string("reading the ring iterator: ") + std::strerror(errno);
            return false;
        }
        if (n == 0) break;
        have += static_cast<std::size_t>(n);
    }
    if (have % sizeof(usc_ring_record) != 0) {
        error = "ring iterator returned a partial record: BPF object and daemon disagree on "
                "struct usc_ring_record";
        return false;
    }
    std::size_t count = have / sizeof(usc_ring_record);
    auto first = out.size();
    out.resize(first + count);
    std::memcpy(out.data() + first, buf.data(), have);
    return true;
}

namespace {

template <typename K, typename V>
void read_hash(int map_fd, std::vector<std::pair<K, V>>& out) {
    K key{}, next{};
    K* prev = nullptr;
    while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
        V val{};
        if (bpf_map_lookup_elem(map_fd, &next, &val) == 0) out.emplace_back(next, val);
        key = next;
        prev = &key;
    }
}

}  // namespace

void BpfCollector::read_sched(std::vector<std::pair<std::uint32_t, usc_sched_state>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.sched_state), out);
}

void BpfCollector::read_wakers(std::vector<std::pair<usc_waker_key, usc_waker_val>>& out) const {
    read_hash(bpf_map__fd(skel_->maps.wakers), out);
}

void BpfCollector::drain_created(std::vector<usc_created_ring>& out) {
    std::vector<std::pair<std::uint64_t, usc_created_ring>> all;
    int fd = bpf_map__fd(skel_->maps.created_rings);
    read_hash(fd, all);
    for (const auto& [ctx, rec] : all) {
        bpf_map_delete_elem(fd, &ctx);
        out.push_back(rec);
    }
}

usc_stats BpfCollector::stats() const {
    usc_stats s;
    std::memcpy(&s, const_cast<const usc_stats*>(&skel_->bss->stats), sizeof s);
    return s;
}

void BpfCollector::forget_thread(std::uint32_t tid) {
    bpf_map_delete_elem(bpf_map__fd(skel_->maps.sched_state), &tid);
    std::vector<std::pair<usc_waker_key, usc_waker_val>> w;
    read_wakers(w);
    int fd = bpf_map__fd(skel_->maps.wakers);
    for (const auto& [k, v] : w)
        if (k.sq_tid == tid) bpf_map_delete_elem(fd, &k);
}

}  // namespace uringscope
