#include "collect/kernel_features.hpp"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>
#include <utility>

#include "collect/btf_member.hpp"

namespace iouscope {

// BCC's kernel symbol cache, opened on first use with dlopen. libbcc links LLVM and clang:
// linking it outright cost the daemon 55 MB of resident memory (relocating libLLVM touches its
// pages) and ~4 s of start-up under QEMU, for lookups that only the kprobe tier needs. The
// default tier never calls this, so it never pays for it.
struct KernelFeatures::SymCache {
    std::once_flag once;
    void* lib = nullptr;
    void* cache = nullptr;
    int (*resolve_name)(void*, const char*, const char*, std::uint64_t*) = nullptr;
    void (*free_cache)(void*, int) = nullptr;
    void open() {
        lib = dlopen("libbcc.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        auto make = reinterpret_cast<void* (*)(int, void*)>(dlsym(lib, "bcc_symcache_new"));
        resolve_name =
            reinterpret_cast<decltype(resolve_name)>(dlsym(lib, "bcc_symcache_resolve_name"));
        free_cache = reinterpret_cast<decltype(free_cache)>(dlsym(lib, "bcc_free_symcache"));
        if (make && resolve_name && free_cache) cache = make(-1, nullptr);  // -1: the kernel
    }
    ~SymCache() {
        if (cache) free_cache(cache, -1);
        if (lib) dlclose(lib);
    }
};

struct KernelFeatures::ModuleBtfs {
    std::once_flag once;
    std::vector<struct btf*> btfs;
    ~ModuleBtfs() {
        for (auto* b : btfs) btf__free(b);
    }
};

KernelFeatures::KernelFeatures()
    : modules_(std::make_shared<ModuleBtfs>()), syms_(std::make_unique<SymCache>()) {}
KernelFeatures::~KernelFeatures() {
    btf__free(btf_);
}
KernelFeatures::KernelFeatures(KernelFeatures&& o) noexcept
    : btf_(std::exchange(o.btf_, nullptr)),
      modules_(std::move(o.modules_)),
      syms_(std::move(o.syms_)) {}
KernelFeatures& KernelFeatures::operator=(KernelFeatures&& o) noexcept {
    if (this != &o) {
        btf__free(btf_);
        btf_ = std::exchange(o.btf_, nullptr);
        modules_ = std::move(o.modules_);
        syms_ = std::move(o.syms_);
    }
    return *this;
}

std::optional<std::string> KernelFeatures::load(KernelFeatures& out) {
    struct btf* b = btf__load_vmlinux_btf();
    if (!b) {
        int err = errno;
        return std::string("cannot read the kernel's BTF (/sys/kernel/btf/vmlinux): ") +
               std::strerror(err) + ". iouscope needs a kernel built with CONFIG_DEBUG_INFO_BTF=y.";
    }
    btf__free(out.btf_);
    out.btf_ = b;
    return std::nullopt;
}

std::optional<int> KernelFeatures::btf_func_params(const std::string& name) const {
    auto params = [&](const struct btf* b) -> std::optional<int> {
        int id = btf__find_by_name_kind(b, name.c_str(), BTF_KIND_FUNC);
        if (id <= 0) return std::nullopt;
        const struct btf_type* fn = btf__type_by_id(b, static_cast<__u32>(id));
        const struct btf_type* proto = btf__type_by_id(b, fn->type);
        if (!proto || !btf_is_func_proto(proto)) return std::nullopt;
        return btf_vlen(proto);
    };
    if (!btf_) return std::nullopt;
    if (auto n = params(btf_)) return n;
    if (!modules_) return std::nullopt;
    std::call_once(modules_->once, [&] {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator("/sys/kernel/btf", ec)) {
            auto mod = e.path().filename().string();
            if (mod == "vmlinux") continue;
            if (auto* b = btf__load_module_btf(mod.c_str(), btf_)) modules_->btfs.push_back(b);
        }
    });
    for (const auto* b : modules_->btfs)
        if (auto n = params(b)) return n;
    return std::nullopt;
}

bool KernelFeatures::has_btf_func(const std::string& name) const {
    return btf_func_params(name).has_value();
}

bool KernelFeatures::has_kprobes() const {
    return std::filesystem::exists("/sys/bus/event_source/devices/kprobe/type");
}
bool KernelFeatures::has_btf_typedef(const std::string& name) const {
    return btf_ && btf__find_by_name_kind(btf_, name.c_str(), BTF_KIND_TYPEDEF) > 0;
}
std::optional<int> KernelFeatures::btf_tracepoint_params(const std::string& name) const {
    if (!btf_) return std::nullopt;
    const int id = btf__find_by_name_kind(btf_, ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF);
    if (id <= 0) return std::nullopt;
    // typedef -> pointer -> prototype
    const struct btf_type* t = btf__type_by_id(btf_, static_cast<__u32>(id));
    t = t ? btf__type_by_id(btf_, t->type) : nullptr;
    if (!t || !btf_is_ptr(t)) return std::nullopt;
    t = btf__type_by_id(btf_, t->type);
    if (!t || !btf_is_func_proto(t)) return std::nullopt;
    return btf_vlen(t);
}

namespace {

// Calls f(enum type, enumerator name, value) for every enumerator of every enum in b until f
// returns true.
template <class F>
bool for_each_enumerator(const struct btf* b, F f) {
    const __u32 n = btf__type_cnt(b);
    for (__u32 id = 1; id < n; ++id) {
        const struct btf_type* t = btf__type_by_id(b, id);
        if (!btf_is_enum(t)) continue;  // 64-bit enums (ENUM64) hold no io_uring constant
        const struct btf_enum* e = btf_enum(t);
        for (__u16 i = 0; i < btf_vlen(t); ++i, ++e)
            if (f(t, btf__name_by_offset(b, e->name_off), static_cast<std::int64_t>(e->val)))
                return true;
    }
    return false;
}

}  // namespace

std::optional<std::int64_t> KernelFeatures::btf_enumerator(const std::string& name) const {
    if (!btf_) return std::nullopt;
    std::optional<std::int64_t> found;
    for_each_enumerator(btf_, [&](const struct btf_type*, const char* n, std::int64_t v) {
        if (name != n) return false;
        found = v;
        return true;
    });
    return found;
}

std::vector<std::string> KernelFeatures::btf_enum_names(const std::string& member,
                                                        const std::string& prefix,
                                                        const std::string& skip) const {
    std::vector<std::string> names;
    if (!btf_) return names;
    const struct btf_type* holder = nullptr;
    for_each_enumerator(btf_, [&](const struct btf_type* t, const char* n, std::int64_t) {
        if (member != n) return false;
        holder = t;
        return true;
    });
    if (!holder) return names;
    const struct btf_enum* e = btf_enum(holder);
    for (__u16 i = 0; i < btf_vlen(holder); ++i, ++e) {
        const std::string n = btf__name_by_offset(btf_, e->name_off);
        if (n == skip || !n.starts_with(prefix) || e->val < 0 || e->val > 4096) continue;
        const auto v = static_cast<std::size_t>(e->val);
        if (names.size() <= v) names.resize(v + 1);
        names[v] = n.substr(prefix.size());
        for (auto& c : names[v]) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return names;
}

bool KernelFeatures::has_btf_struct(const std::string& name) const {
    return btf_ && btf__find_by_name_kind(btf_, name.c_str(), BTF_KIND_STRUCT) > 0;
}

bool KernelFeatures::has_btf_member(const std::string& type, const std::string& member) const {
    return btf_has_member(btf_, type, member);
}

std::uint64_t KernelFeatures::ksym_address(const std::string& name) const {
    if (!syms_) return 0;
    std::call_once(syms_->once, [&] { syms_->open(); });
    if (!syms_->cache) return 0;
    std::uint64_t addr = 0;
    if (syms_->resolve_name(syms_->cache, nullptr, name.c_str(), &addr) != 0) return 0;
    return addr;
}

std::string KernelFeatures::release() const {
    struct utsname u {};
    if (uname(&u) != 0) return "unknown";
    return u.release;
}

}  // namespace iouscope

namespace iouscope {

unsigned KernelFeatures::config_hz() const {
    // zlib reads plain files too, so one reader serves both places.
    for (const std::string& path : {"/boot/config-" + release(), std::string("/proc/config.gz")}) {
        gzFile f = gzopen(path.c_str(), "rb");
        if (!f) continue;
        char line[256];
        unsigned hz = 0;
        while (gzgets(f, line, sizeof line)) {
            if (std::strncmp(line, "CONFIG_HZ=", 10) == 0) {
                hz = static_cast<unsigned>(std::strtoul(line + 10, nullptr, 10));
                break;
            }
        }
        gzclose(f);
        if (hz) return hz;
    }
    return 0;
}

}  // namespace iouscope

namespace iouscope {

std::uint64_t module_instance(const std::string& name) {
    struct stat st {};
    if (::stat(("/sys/module/" + name).c_str(), &st) != 0) return 0;
    return static_cast<std::uint64_t>(st.st_ino);
}

// A scan of /proc/kallsyms by hand rather than BCC's symbol cache (ksym_address): the cache
// is read once and must be rebuilt whole after a module loads, and libbcc costs 55 MB of
// resident memory (see SymCache), for a few names read again only when a module (re)loads.
std::vector<std::uint64_t> module_symbol_addresses(int kallsyms_fd, const std::string& module,
                                                   const std::vector<std::string>& names) {
    std::vector<std::uint64_t> out(names.size(), 0);
    // From the start again: the kernel walks its symbol tables afresh, modules loaded since
    // included, and keeps the address visibility decided when the file was opened.
    if (::lseek(kallsyms_fd, 0, SEEK_SET) != 0) return out;
    const std::string tag = "[" + module + "]";
    std::string pending;
    std::vector<char> buf(1 << 16);
    auto line = [&](std::string_view l) {
        // "ffffffffc0a01230 t nvme_uring_cmd_end_io\t[nvme_core]"; built-in: no tag.
        const auto sp1 = l.find(' '), sp2 = l.find(' ', sp1 + 1);
        if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) return;
        auto rest = l.substr(sp2 + 1);
        const auto tab = rest.find('\t');
        const auto sym = rest.substr(0, tab);
        if (tab != std::string_view::npos && rest.substr(tab + 1) != tag) return;
        for (std::size_t i = 0; i < names.size(); ++i)
            if (out[i] == 0 && sym == names[i])
                out[i] = std::strtoull(std::string(l.substr(0, sp1)).c_str(), nullptr, 16);
    };
    for (;;) {
        const ssize_t n = ::read(kallsyms_fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        pending.append(buf.data(), static_cast<std::size_t>(n));
        std::size_t start = 0;
        for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
            line(std::string_view(pending).substr(start, nl - start));
        pending.erase(0, start);
    }
    return out;
}

std::pair<std::uint64_t, std::uint64_t> kernel_function_range(const std::string& name) {
    std::ifstream in("/proc/kallsyms");
    std::vector<std::uint64_t> addresses;
    std::uint64_t start = 0;
    for (std::string line; std::getline(in, line);) {
        // "ffffffff813935a0 T task_work_add"; a module's symbols end in "\t[module]".
        const std::uint64_t a = std::strtoull(line.c_str(), nullptr, 16);
        const auto sym = line.find(' ', line.find(' ') + 1);
        if (a == 0 || sym == std::string::npos) continue;
        addresses.push_back(a);
        if (start == 0 && line.compare(sym + 1, std::string::npos, name) == 0) start = a;
    }
    std::uint64_t end = ~std::uint64_t{0};
    for (const std::uint64_t a : addresses)
        if (a > start && a < end) end = a;
    if (start == 0 || end == ~std::uint64_t{0}) return {0, 0};
    return {start, end};
}

}  // namespace iouscope
