// run_threads.hpp — one piece of load-time work on up to n threads (the huge-page copy of the weights,
// rewriting them into a backend's layout): the caller and n - 1 helper threads each run `work`, which
// takes its own items (an atomic counter) until none are left. Not for the kernels, which have their
// pool (cpu/threadpool.hpp); this is for work done once, where a pool would outlive its use.
#pragma once

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

// Runs work() on the calling thread and on up to n - 1 helpers, and returns when all have returned. A
// helper the system cannot start leaves its share to the others. What work() throws on any thread is
// rethrown here (the first of them) once all have returned, so an error reaches the caller instead of
// ending the process from a helper thread; work() should then stop taking items (the others go on
// until their items run out).
template <class Work>
void run_on_threads(unsigned n, const Work &work) {
    std::mutex mutex;
    std::exception_ptr first;
    auto guarded = [&] {
        try {
            work();
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!first) first = std::current_exception();
        }
    };
    std::vector<std::thread> helpers;
    try {
        for (unsigned k = 1; k < n; ++k) helpers.emplace_back(guarded);
    } catch (...) {
        // No thread to spare: the ones running do the rest.
    }
    guarded();
    for (std::thread &h : helpers) h.join();
    if (first) std::rethrow_exception(first);
}

} // namespace ember
