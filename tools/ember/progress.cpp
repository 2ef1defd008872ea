#include "progress.hpp"

#include <cstdio>
#include <unistd.h>

namespace cli {

Progress::Progress(const char *what) : what_(what), enabled_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() {
    if (drawn_) std::fprintf(stderr, "\r%72s\r", "");
}

void Progress::update(double fraction, const char *detail) {
    if (!enabled_) return;
    const int pct = static_cast<int>(fraction * 100 + 0.5);
    if (pct == last_) return;
    last_ = pct;
    const int width = 30, filled = pct * width / 100;
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %s", what_, filled, "##############################", width - filled, "",
                 pct, detail ? detail : "");
    std::fflush(stderr);
    drawn_ = true;
}

} // namespace cli
