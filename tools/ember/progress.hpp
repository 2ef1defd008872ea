// progress.hpp — a percentage on stderr for long steps (model load, long prefills, perplexity), shown
// only when stderr is a terminal so that logs and pipes get no carriage-return noise.
#pragma once

#include <cstddef>

namespace cli {

class Progress {
public:
    // `what` is the label ("loading", "prompt", "perplexity"); it must outlive the object.
    explicit Progress(const char *what);
    ~Progress();   // clears the line
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;

    bool enabled() const { return enabled_; }
    // Redraws when the whole percentage changed; `detail` (may be null) follows it, e.g. "window 3/9".
    void update(double fraction, const char *detail = nullptr);

private:
    const char *what_;
    bool enabled_;
    int last_ = -1;
    bool drawn_ = false;
};

} // namespace cli
