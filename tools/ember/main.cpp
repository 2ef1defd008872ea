// main.cpp — `ember`: run, tokenize, info, bench and perplexity on GGUF models.
#include "cli.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {
// -v / --verbose: the library's log on stderr (its own lines say which backend `auto` chose and why).
void log_to_stderr(ember_log_level level, const char *message, void *) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    std::fprintf(stderr, "ember[%s]: %s\n", names[level <= EMBER_LOG_ERROR ? level : EMBER_LOG_ERROR], message);
}
} // namespace

int main(int argc, char **argv) {
    // Options of every command, taken out before the command parses its own.
    std::vector<char *> args;
    int verbose = 0;
    bool help = false;
    for (int i = 0; i < argc; ++i) {
        if (i > 0 && (!std::strcmp(argv[i], "-v") || !std::strcmp(argv[i], "--verbose"))) verbose = verbose ? verbose : 1;
        else if (i > 0 && !std::strcmp(argv[i], "-vv")) verbose = 2;
        else if (i > 1 && (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))) help = true;
        else args.push_back(argv[i]);
        if (!std::strcmp(argv[i], "--")) {  // everything after -- is the command's, as given
            for (++i; i < argc; ++i) args.push_back(argv[i]);
        }
    }
    if (verbose) ember_log_set(log_to_stderr, nullptr, verbose > 1 ? EMBER_LOG_DEBUG : EMBER_LOG_INFO);
    const int n = static_cast<int>(args.size());
    args.push_back(nullptr);
    char **av = args.data();
    if (n < 2) {
        cli::print_help();
        return 2;
    }
    const char *cmd = av[1];
    if (!std::strcmp(cmd, "--version")) cmd = "version";
    if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h")) cmd = "help";
    if (help) {
        if (!cli::print_command_help(cmd)) return cli::usage_error(std::string("unknown command '") + cmd + "'");
        return 0;
    }
    if (!std::strcmp(cmd, "run")) return cli::cmd_run(n, av);
    if (!std::strcmp(cmd, "tokenize")) return cli::cmd_tokenize(n, av);
    if (!std::strcmp(cmd, "embed")) return cli::cmd_embed(n, av);
    if (!std::strcmp(cmd, "rerank")) return cli::cmd_rerank(n, av);
    if (!std::strcmp(cmd, "info")) return cli::cmd_info(n, av);
    if (!std::strcmp(cmd, "bench")) return cli::cmd_bench(n, av);
    if (!std::strcmp(cmd, "perplexity")) return cli::cmd_perplexity(n, av);
    if (!std::strcmp(cmd, "version")) {
        std::printf("ember %s (ABI %u)\n", ember_version(), ember_abi_version());
        return 0;
    }
    if (!std::strcmp(cmd, "help")) {
        if (n > 3) return cli::usage_error("help takes at most one command");
        if (n == 3) {
            if (!cli::print_command_help(av[2])) return cli::usage_error(std::string("unknown command '") + av[2] + "'");
            return 0;
        }
        cli::print_help();
        return 0;
    }
    return cli::usage_error(std::string("unknown command '") + cmd + "'");
}
