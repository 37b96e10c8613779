// Finding an SQPOLL ring's SQ thread from /proc (sq_thread.hpp), including a seeds-kernel
// per-CPU thread that another process made.
#include "sq_thread.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "schedule.hpp"

namespace iouscope::load {

namespace {

using namespace std::chrono_literals;

int read_fdinfo_sq_thread(int ring_fd) {
    std::ifstream in("/proc/self/fdinfo/" + std::to_string(ring_fd));
    std::string line;
    constexpr std::string_view kKey = "SqThread:";
    while (std::getline(in, line)) {
        if (line.starts_with(kKey)) {
            try {
                return std::stoi(line.substr(kKey.size()));
            } catch (const std::exception&) {
                return -1;
            }
        }
    }
    return -1;
}

}  // namespace

// Right after io_uring_setup the kernel reports the creating task's pid as SqThread until the
// new SQ thread has run and stored its own, so keep reading until the value is a different,
// live thread of this process.
int sq_thread_tid(const RingState& st) {
    if (!uses_sqpoll(st.spec.mode)) {
        return -1;
    }
    const int creator = static_cast<int>(getpid());
    const auto give_up = Clock::now() + 2s;
    int tid = -1;
    for (;;) {
        tid = read_fdinfo_sq_thread(st.ring.ring_fd);
        if (tid > 0 && tid != creator) {
            struct stat sb {};
            const std::string task = "/proc/self/task/" + std::to_string(tid);
            if (stat(task.c_str(), &sb) == 0) {
                return tid;
            }
            // A per-CPU shared thread can be another process's; fdinfo shows that process's
            // pid until its thread has started, so only the thread's own comm settles it.
            if (st.spec.percpu) {
                std::ifstream comm("/proc/" + std::to_string(tid) + "/comm");
                std::string name;
                if (std::getline(comm, name) && name.starts_with("iou-sqp-")) {
                    return tid;
                }
            }
        }
        if (Clock::now() >= give_up) {
            return -1;
        }
        std::this_thread::sleep_for(1ms);
    }
}

}  // namespace iouscope::load
