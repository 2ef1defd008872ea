// help.cpp — the CLI's help: one text per command, shown by `ember help CMD`, `ember CMD --help` and
// (all of them) `ember help`.
#include "cli.hpp"

#include <cstdio>
#include <cstring>

namespace cli {

namespace {
struct CommandHelp {
    const char *name;
    const char *text;
};

const CommandHelp kHelp[] = {
    {"run",
     "ember run -m MODEL -p PROMPT [-n N] [--temp T] [--seed S] [--top-k K] [--top-p P] [--min-p P]\n"
     "          [--repeat-penalty R] [--repeat-last-n N] [--frequency-penalty F] [--presence-penalty P]\n"
     "          [-t THREADS] [-c CTX] [--backend auto|cpu|cuda|vulkan] [--kv-type f16|q8_0|q4_0] [--no-bos]\n"
     "          [--precision default|high]\n"
     "          [--special] [--stats] [--draft MODEL | --lookup | --mtp] [--draft-k K] [--draft-fixed]\n"
     "          [--grammar FILE.gbnf | --json-schema FILE.json] [--stop TEXT]...\n"
     "          [--tools FILE.json [--tool-choice auto|none|required|NAME] [--chat-template FILE]]\n"
     "    Prints the prompt and streams the continuation (-n, default 128 tokens). --temp 0 is greedy.\n"
     "    Sampling defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalties, a random seed\n"
     "    (--seed S repeats a run). -c defaults to the model's trained context, at most 4096; -t to the\n"
     "    physical cores, at most 8. --grammar (GBNF) and --json-schema constrain the output; --stop\n"
     "    (repeatable) ends it before the text given. --stats prints speeds and the backend to stderr.\n"
     "    --precision high: activations carried with ~15 bits in the products with quantized weights\n"
     "    (ember_session_set_precision; CPU only): closer to exact arithmetic, prefill up to 2x slower.\n"
     "    --tools: the prompt is a user message, rendered by the chat template (--chat-template, else the\n"
     "    model's) with the tools of FILE (OpenAI's JSON array); --tool-choice required or a tool's name\n"
     "    constrain the reply to calls; auto (the default) leaves text free until the model opens a call,\n"
     "    whose grammar then switches on (docs/tools.md). The reply is parsed: content to stdout, reasoning\n"
     "    to stderr, each call as a JSON line {\"id\", \"name\", \"arguments\"}.\n"
     "    Speculative decoding (same output, fewer passes): --draft MODEL (a smaller model), --lookup\n"
     "    (n-grams of the text so far) or --mtp (the model's own multi-token-prediction layers; `ember\n"
     "    info` counts them); --stats prints the acceptance.\n"
     "    --gpu-layers N|auto|all, --experts-on-cpu N|all, --vram-budget MiB (also for bench, perplexity,\n"
     "    info --fit): with a GPU backend, the last N layers on the GPU, the rest on the CPU; auto fits the\n"
     "    budget (default the device's free memory less a margin); MoE experts of the first N GPU layers\n"
     "    on the CPU (docs/offload.md).\n"
     "    example: ember run -m models/stories15M-q8_0.gguf -p \"Once upon a time\" -n 40 --temp 0\n"},
    {"tokenize",
     "ember tokenize -m MODEL [--no-bos] [--special] TEXT\n"
     "    Prints the token ids of TEXT as a JSON array. --special parses special tokens such as <s> in\n"
     "    TEXT. Only the vocabulary is loaded, so vocab-only files work.\n"},
    {"embed",
     "ember embed -m MODEL [--normalize] [--dimensions N] [--pooling model|mean|cls|last] [--max-tokens N]\n"
     "            [--truncate] [-t THREADS] [--backend B] TEXT...\n"
     "    Embeds each TEXT with an embedding model (BERT encoders, nomic-embed-text, EmbeddingGemma,\n"
     "    Qwen3-Embedding: docs/embeddings.md) and prints {\"dim\": D, \"embeddings\": [[...], ...]}.\n"
     "    --normalize: unit vectors; --dimensions: the first N values (Matryoshka); a text over\n"
     "    --max-tokens (default: the model's context) is an error unless --truncate.\n"},
    {"rerank",
     "ember rerank -m MODEL -q QUERY [--max-tokens N] [--truncate] [-t THREADS] [--backend B] DOC...\n"
     "    Scores each DOC for QUERY with a reranking model (BERT cross-encoders, Qwen3-Reranker) and prints\n"
     "    {\"scores\": [...]} in the documents' order (higher: more relevant).\n"},
    {"info",
     "ember info -m MODEL [--tensors] [-c CTX] [--backend cpu|cuda|vulkan]\n"
     "          [--fit [--gpu-layers N|auto|all] [--experts-on-cpu N|all] [--vram-budget MiB]]\n"
     "    What the file is (architecture, name, parameters, tokenizer, the tensor types it uses) and\n"
     "    whether this build can run it on the backend (default cpu; if not, the library's reason),\n"
     "    then its metadata and the memory a session of CTX tokens needs. --tensors lists every tensor.\n"
     "    A file this build does not support (architecture, tokenizer, weight type) is still described\n"
     "    (exit 0); a malformed one is described as far as its metadata goes and exits 1.\n"
     "    --fit: the placement across GPU and CPU that fits (default --gpu-layers auto, the best backend),\n"
     "    with the memory per device, chosen before anything is allocated; exits 1 when none fits.\n"
     "    Run it first on a model you downloaded.\n"},
    {"bench",
     "ember bench -m MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [-c CTX] [--parallel N]\n"
     "    One JSON line: prefill_tok_s, decode_tok_s, load_s, peak_rss_mb, the backend and the thread\n"
     "    count used. With --parallel N, N requests run at once through the batching engine:\n"
     "    decode_tok_s_total and mean time to first token; with --mtp or --lookup (--draft-k K, 1..8)\n"
     "    every request speculates, and the drafts, accepted ones and tokens per step are reported.\n"
     "    With --prefix-reuse, two requests sharing a\n"
     "    P-token prefix: both times to first token. Also takes --backend, --kv-type and --precision; --temp T\n"
     "    (sampled decode, --seed S, --top-k K (default 40; 0: off), --top-p P, --min-p P,\n"
     "    --repeat-penalty R); speculative decoding with --draft MODEL, --lookup or --mtp, --draft-k K\n"
     "    (start length), --draft-fixed (no adaptation); --text T replaces the English text the prompt\n"
     "    is built from. --rounds R measured runs (medians); with speculation (default 3 rounds) the same\n"
     "    target without it runs in turn, for the speedup. --background-load N keeps N busy threads of\n"
     "    its own running meanwhile (a busy machine). --json-schema FILE or --grammar FILE: the grammar's\n"
     "    cost per token against a decode step, on its first generation and warm (--rounds R, default 4),\n"
     "    and the plain sampler's own time (sample_ms); --fresh-grammar compiles it anew every round (all\n"
     "    rounds first); --grammar-vocab VOCAB.gguf builds it for another file's vocabulary of the same size.\n"},
    {"perplexity",
     "ember perplexity -m MODEL -f TEXT_FILE [-c CTX] [-t THREADS] [--max-tokens N] [--kv-type T]\n"
     "                 [--compare-kv T] [--backend B] [--precision default|high]\n"
     "    Perplexity of the text, in windows of CTX tokens (default 256) evaluated token by token, as\n"
     "    one JSON line; progress on stderr when it is a terminal. With --compare-kv, also the reference\n"
     "    cache type's perplexity, top-1 agreement and mean KL. A text to try: the held-out stories in\n"
     "    bench/data/heldout-stories.txt (for the stories models).\n"},
    {"version", "ember version\n    The library's version and ABI version.\n"},
    {"help", "ember help [COMMAND]\n    This text, or one command's (also: ember COMMAND --help).\n"},
};

const char kCommon[] =
    "Options every command takes: -v / --verbose prints the library's log (info level; -vv: debug) on\n"
    "stderr, e.g. which backend `auto` chose and why. Errors go to stderr with exit status 1 (2 for usage).\n";
} // namespace

bool print_command_help(const char *command) {
    for (const CommandHelp &h : kHelp)
        if (!std::strcmp(h.name, command)) {
            std::printf("usage: %s\n%s", h.text, kCommon);
            return true;
        }
    return false;
}

void print_help() {
    std::printf("ember %s — run GGUF language models\n\nusage:\n", ember_version());
    for (const CommandHelp &h : kHelp) std::printf("  %s", h.text);
    std::printf("\n%s", kCommon);
}

} // namespace cli
