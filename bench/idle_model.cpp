// iouscope-idle-model: the advisor's idle model, asked for any sq_thread_idle.
//
//   iouscope-idle-model FROM.json TO.json TID SETTING_NS...
//
// FROM and TO are two /api/v1/snapshot documents of a daemon with the deep tier (the work-gap
// histogram). For each setting it prints "setting_ns cpu_cores wakeups_per_second": what SQ
// thread TID would have used over the window between the two had it spun exactly that long
// after each SQE (model/advisor's idle_cost_fixed, the curve `iouscope advise` draws). The
// advisor itself only offers its fixed candidates; bench/seed002 needs the seed's grid.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "exporters/json_exporter.hpp"
#include "model/advisor.hpp"

using namespace iouscope;

namespace {

Snapshot read_snapshot(const char* path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(std::string("cannot read ") + path);
    std::stringstream text;
    text << in.rdbuf();
    return snapshot_from_json(text.str());
}

const ThreadSnapshot& thread_of(const Snapshot& s, long tid, const char* which) {
    for (const auto& t : s.threads)
        if (t.tid == tid) return t;
    throw std::runtime_error(std::string("SQ thread ") + std::to_string(tid) + " is not in " +
                             which);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s FROM.json TO.json TID SETTING_NS...\n", argv[0]);
        return 2;
    }
    try {
        const Snapshot a = read_snapshot(argv[1]), b = read_snapshot(argv[2]);
        const long tid = std::stol(argv[3]);
        const ThreadSnapshot& ta = thread_of(a, tid, argv[1]);
        const ThreadSnapshot& tb = thread_of(b, tid, argv[2]);
        if (!ta.has_gaps || !tb.has_gaps)
            throw std::runtime_error("no work gaps for that thread: run iouscoped --probes.deep");
        const double window = seconds_between(a, b);
        const GapWindow w = thread_gap_window(ta, tb, window);
        for (int i = 4; i < argc; ++i) {
            const double ns = std::stod(argv[i]);
            const IdleCost c = idle_cost_fixed(w, ns * 1e-9);
            std::printf("%.0f %.6f %.3f\n", ns, c.cpu_seconds / window, c.wakeups / window);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "iouscope-idle-model: %s\n", e.what());
        return 1;
    }
    return 0;
}
