// What the threads of an iouscope-load run share while it runs: the start gate, the stop
// request (a signal, or the last counted ring done), the sleeps it cuts short and the count of
// rings done. Inline (header only) because the submit loop asks it on every pass.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>

#include "schedule.hpp"

namespace iouscope::load {

class RunControl {
public:
    RunControl(std::optional<nanoseconds> duration, std::optional<PauseSpec> pause,
               std::size_t counted_rings, bool stop_when_counted_done)
        // The placeholder schedule is replaced by start() before any worker may read it.
        : duration_(duration),
          pause_(pause),
          schedule_(Clock::now(), duration, pause),
          counted_left_(counted_rings),
          stop_when_counted_done_(stop_when_counted_done) {}

    // Only valid once wait_for_start() has returned.
    const Schedule& schedule() const { return schedule_; }

    // Workers are held back until all threads exist: with hundreds of rings, threads that start
    // early would otherwise starve the main thread of CPU while it is still spawning the rest,
    // and the shared schedule would start before most rings could submit anything. This is an
    // atomic wait rather than the condition variable because notify_all on a condition variable
    // hands the mutex from one woken thread to the next, which serialises a thousand wake-ups
    // behind threads that are already busy submitting.
    void wait_for_start() {
        while (!started_.load(std::memory_order_acquire)) {
            started_.wait(false, std::memory_order_acquire);
        }
    }

    void start() {
        schedule_ = Schedule(Clock::now(), duration_, pause_);
        started_.store(true, std::memory_order_release);
        started_.notify_all();
    }

    bool stop_requested() const { return stop_.load(std::memory_order_acquire); }

    void request_stop() {
        {
            std::lock_guard lock(mu_);
            stop_.store(true, std::memory_order_release);
        }
        cv_.notify_all();
    }

    // A condition variable rather than sleep_until so that a signal or the last counted ring
    // finishing ends every rate-limit or pause sleep at once.
    void sleep_until(Clock::time_point t) {
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, t, [this] { return stop_.load(std::memory_order_acquire); });
    }

    // Called when a ring stops submitting, before it drains, so that rings without a count stop
    // as soon as the last counted ring is done rather than after its drain.
    void submission_ended(bool counted) {
        if (counted && counted_left_.fetch_sub(1) == 1 && stop_when_counted_done_) {
            request_stop();
        }
    }

    void ring_done() { done_.fetch_add(1, std::memory_order_acq_rel); }
    std::size_t rings_done() const { return done_.load(std::memory_order_acquire); }

private:
    const std::optional<nanoseconds> duration_;
    const std::optional<PauseSpec> pause_;
    Schedule schedule_;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::atomic<std::size_t> counted_left_;
    const bool stop_when_counted_done_;
    std::atomic<std::size_t> done_{0};
};

}  // namespace iouscope::load
