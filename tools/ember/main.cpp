// main.cpp — `ember`: run, tokenize, info, bench and perplexity on GGUF models.
#include "cli.hpp"

#include <cstdio>
#include <cstring>

static void print_help() {
    std::printf(
        "ember %s — run GGUF language models\n\n"
        "usage:\n"
        "  ember run -m MODEL -p PROMPT [-n N] [--temp T] [--seed S] [--top-k K] [--top-p P] [--min-p P]\n"
        "            [--repeat-penalty R] [--repeat-last-n N] [--frequency-penalty F] [--presence-penalty P]\n"
        "            [-t THREADS] [-c CTX] [--backend auto|cpu|cuda|vulkan] [--kv-type f16|q8_0] [--no-bos]\n"
        "            [--special] [--stats] [--draft MODEL | --lookup] [--draft-k K] [--draft-fixed]\n"
        "            [--grammar FILE.gbnf | --json-schema FILE.json] [--stop TEXT]...\n"
        "      Prints the prompt and streams the continuation. --temp 0 is greedy. Sampling defaults:\n"
        "      temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties, a random seed. --grammar (GBNF) and\n"
        "      --json-schema constrain the output; --stop (repeatable) ends it before the text given.\n"
        "  ember tokenize -m MODEL [--no-bos] [--special] TEXT\n"
        "      Prints the token ids as a JSON array. --special parses special tokens such as <s> in TEXT.\n"
        "  ember info -m MODEL [--tensors] [-c CTX]\n"
        "      Metadata, a tensor summary and the memory a session needs.\n"
        "  ember bench -m MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [-c CTX] [--parallel N]\n"
        "      One JSON line: prefill_tok_s, decode_tok_s, load_s, peak_rss_mb. With --parallel N, N requests\n"
        "      run at once through the batching engine: decode_tok_s_total and mean time to first token.\n"
        "      With --prefix-reuse, two requests sharing a P-token prefix: both times to first token.\n"
        "      Also takes --backend and --kv-type; --temp T (sampled decode, --seed S); speculative decoding\n"
        "      with --draft MODEL or --lookup, --draft-k K (start length), --draft-fixed (no adaptation);\n"
        "      --text T replaces the English text the prompt is built from. --rounds R measured runs (medians);\n"
        "      with speculation (default 3 rounds) the same target without it runs in turn, for the speedup.\n"
        "      --background-load N keeps N busy threads of its own running meanwhile (a busy machine).\n"
        "      --json-schema FILE or --grammar FILE: the grammar's cost per token against a decode step, on\n"
        "      its first generation and warm (--rounds R, default 4); --grammar-vocab VOCAB.gguf builds it\n"
        "      for another file's vocabulary of the same size (a synthetic model with a real vocabulary).\n"
        "  ember perplexity -m MODEL -f TEXT_FILE [-c CTX] [-t THREADS] [--kv-type T] [--compare-kv T]\n"
        "      Perplexity of the text, in windows of CTX tokens (default 256) evaluated token by token. With\n"
        "      --compare-kv, also the reference cache type's perplexity, top-1 agreement and mean KL.\n"
        "  ember version | help\n",
        ember_version());
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help();
        return 2;
    }
    const char *cmd = argv[1];
    if (!std::strcmp(cmd, "run")) return cli::cmd_run(argc, argv);
    if (!std::strcmp(cmd, "tokenize")) return cli::cmd_tokenize(argc, argv);
    if (!std::strcmp(cmd, "info")) return cli::cmd_info(argc, argv);
    if (!std::strcmp(cmd, "bench")) return cli::cmd_bench(argc, argv);
    if (!std::strcmp(cmd, "perplexity")) return cli::cmd_perplexity(argc, argv);
    if (!std::strcmp(cmd, "version") || !std::strcmp(cmd, "--version")) {
        std::printf("ember %s (ABI %u)\n", ember_version(), ember_abi_version());
        return 0;
    }
    if (!std::strcmp(cmd, "help") || !std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h")) {
        print_help();
        return 0;
    }
    return cli::usage_error(std::string("unknown command '") + cmd + "'");
}
