// background_load.hpp — `ember bench --background-load N`: N busy threads of the benchmark's own for
// the whole run, so that anyone can measure Ember on a machine whose cores are partly taken (a game
// rendering beside it, a build) without arranging a second process.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace cli {

// Starts n threads that spin on arithmetic until the object is destroyed. They touch no shared memory
// (only registers and their own stack), so they take CPU time but leave the caches and memory
// bandwidth to the benchmark: the load of a compute-bound neighbour.
class BackgroundLoad {
public:
    explicit BackgroundLoad(long n);
    ~BackgroundLoad();
    BackgroundLoad(const BackgroundLoad &) = delete;
    BackgroundLoad &operator=(const BackgroundLoad &) = delete;

private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

} // namespace cli
