// background_load.cpp — see background_load.hpp.
#include "background_load.hpp"

#include <cstdint>

namespace cli {

BackgroundLoad::BackgroundLoad(long n) {
    for (long i = 0; i < n; ++i)
        threads_.emplace_back([this] {
            // An xorshift chain: dependent integer work the compiler cannot fold away. The relaxed
            // stop check every 4096 steps costs nothing next to it.
            uint64_t x = 88172645463325252ull;
            while (!stop_.load(std::memory_order_relaxed))
                for (int k = 0; k < 4096; ++k) x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            volatile uint64_t sink = x;
            (void)sink;
        });
}

BackgroundLoad::~BackgroundLoad() {
    stop_.store(true, std::memory_order_relaxed);
    for (auto &t : threads_) t.join();
}

} // namespace cli
