// iouscope-bpf-load-bench: what loading a tier's BPF programs costs, object against object.
//
//   iouscope-bpf-load-bench [--repeats N] [--set VAR=VALUE]... [--progs P,P,...] A.bpf.o B.bpf.o
//
// Each repeat opens and loads A, then B, then A again (A2) from their files, with only the named
// programs autoloaded (default: the default tier's four) and each --set .rodata constant written
// first, as the loader does (e.g. --set gap_cutoff_ns=2147483648 for the default gap sampling).
// It prints, per series, the median and the 10th and 90th percentile of the open+load wall time,
// and the ratios B/A (the A/B) and A2/A (the A/A: the method's noise floor, the same object
// measured twice); then, per object, its file size and, per loaded program, the instructions in
// the object, after load (xlated) and those the verifier processed (bpf_prog_info
// verified_insns, 5.16+). Needs root or CAP_BPF and CAP_PERFMON. Not installed.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
    int repeats = 20;
    std::map<std::string, unsigned long long> set;
    std::set<std::string> progs = {"iou_iter_rings", "iou_sched_switch", "iou_sched_waking",
                                   "iou_io_uring_create"};
    std::string a, b;
};

struct ProgFigures {
    std::string name;
    std::size_t insns = 0;  // in the object
    unsigned xlated = 0;    // after load, in instructions
    unsigned verified = 0;  // processed by the verifier
};

int quiet(enum libbpf_print_level, const char*, va_list) {
    return 0;
}

// Writes `value` into the .rodata variable `name` of an opened object; false if it has none.
bool set_rodata(bpf_object* obj, const std::string& name, unsigned long long value) {
    const btf* b = bpf_object__btf(obj);
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, obj) {
        const char* mname = bpf_map__name(map);
        if (!bpf_map__is_internal(map) || !std::strstr(mname, ".rodata")) continue;
        const int sec = btf__find_by_name_kind(b, ".rodata", BTF_KIND_DATASEC);
        if (sec < 0) return false;
        const btf_type* t = btf__type_by_id(b, static_cast<unsigned>(sec));
        const btf_var_secinfo* v = btf_var_secinfos(t);
        for (unsigned i = 0; i < btf_vlen(t); ++i, ++v) {
            const btf_type* var = btf__type_by_id(b, v->type);
            if (name != btf__name_by_offset(b, var->name_off)) continue;
            std::size_t size = 0;
            const auto* init = static_cast<const char*>(bpf_map__initial_value(map, &size));
            if (!init || v->offset + v->size > size) return false;
            std::vector<char> data(init, init + size);
            std::memcpy(data.data() + v->offset, &value,
                        std::min<std::size_t>(v->size, sizeof value));
            return bpf_map__set_initial_value(map, data.data(), size) == 0;
        }
    }
    return false;
}

// Opens and loads path with only opts.progs autoloaded; the wall time in ms, or -1.
double load_once(const Options& opts, const std::string& path, std::vector<ProgFigures>* figs) {
    const auto t0 = std::chrono::steady_clock::now();
    bpf_object* obj = bpf_object__open_file(path.c_str(), nullptr);
    if (!obj) return -1;
    for (const auto& [name, value] : opts.set) set_rodata(obj, name, value);
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, obj)
        bpf_program__set_autoload(prog, opts.progs.count(bpf_program__name(prog)) != 0);
    const int err = bpf_object__load(obj);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!err && figs) {
        figs->clear();
        bpf_object__for_each_program(prog, obj) {
            if (!bpf_program__autoload(prog)) continue;
            bpf_prog_info info{};
            __u32 len = sizeof info;
            bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len);
            figs->push_back({bpf_program__name(prog), bpf_program__insn_cnt(prog),
                             info.xlated_prog_len / 8, info.verified_insns});
        }
    }
    bpf_object__close(obj);
    return err ? -1 : ms;
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

void print_series(const char* label, const std::vector<double>& v) {
    std::printf("%-4s open+load ms: median %8.2f  p10 %8.2f  p90 %8.2f  (n=%zu)\n", label,
                quantile(v, 0.5), quantile(v, 0.1), quantile(v, 0.9), v.size());
}

void print_object(const char* label, const std::string& path,
                  const std::vector<ProgFigures>& figs) {
    struct stat st {};
    stat(path.c_str(), &st);
    std::printf("%s %s: %lld bytes\n", label, path.c_str(), static_cast<long long>(st.st_size));
    std::size_t insns = 0, xlated = 0, verified = 0;
    for (const auto& f : figs) {
        std::printf("  %-24s insns %6zu  xlated %6u  verified %8u\n", f.name.c_str(), f.insns,
                    f.xlated, f.verified);
        insns += f.insns;
        xlated += f.xlated;
        verified += f.verified;
    }
    std::printf("  %-24s insns %6zu  xlated %6zu  verified %8zu\n", "total", insns, xlated,
                verified);
}

bool parse(int argc, char** argv, Options& o) {
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--repeats" && i + 1 < argc) {
            o.repeats = std::atoi(argv[++i]);
        } else if (arg == "--set" && i + 1 < argc) {
            const std::string kv = argv[++i];
            const auto eq = kv.find('=');
            if (eq == std::string::npos) return false;
            o.set[kv.substr(0, eq)] = std::strtoull(kv.c_str() + eq + 1, nullptr, 0);
        } else if (arg == "--progs" && i + 1 < argc) {
            o.progs.clear();
            std::stringstream list(argv[++i]);
            for (std::string p; std::getline(list, p, ',');) o.progs.insert(p);
        } else {
            files.push_back(arg);
        }
    }
    if (files.size() != 2 || o.repeats < 1) return false;
    o.a = files[0];
    o.b = files[1];
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options opts;
    if (!parse(argc, argv, opts)) {
        std::fprintf(stderr,
                     "usage: %s [--repeats N] [--set VAR=VALUE]... [--progs P,P,...] A.bpf.o "
                     "B.bpf.o\n",
                     argv[0]);
        return 2;
    }
    libbpf_set_print(quiet);
    std::vector<ProgFigures> fa, fb;
    if (load_once(opts, opts.a, &fa) < 0 || load_once(opts, opts.b, &fb) < 0) {
        std::fprintf(stderr, "cannot load A or B (root? the programs named?)\n");
        return 1;
    }
    std::vector<double> a, b, a2;
    for (int i = 0; i < opts.repeats; ++i) {
        a.push_back(load_once(opts, opts.a, nullptr));
        b.push_back(load_once(opts, opts.b, nullptr));
        a2.push_back(load_once(opts, opts.a, nullptr));
    }
    print_series("A", a);
    print_series("B", b);
    print_series("A2", a2);
    std::printf("A/B: B/A median %.3f    A/A: A2/A median %.3f\n",
                quantile(b, 0.5) / quantile(a, 0.5), quantile(a2, 0.5) / quantile(a, 0.5));
    print_object("A", opts.a, fa);
    print_object("B", opts.b, fb);
    return 0;
}
