// cli.hpp — shared pieces of the ember CLI: argument parsing and error reporting.
// The CLI uses the public C API only, like any application would.
#pragma once

#include <ember/ember.h>

#include <map>
#include <string>
#include <vector>

namespace cli {

// Parsed command line: options with values ("-m" → "model.gguf"), flags ("--special"), and positionals.
struct Args {
    std::map<std::string, std::string> opts;
    std::vector<std::string> flags;
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> values;   // every value option in order, repeats included

    bool has(const std::string &name) const;
    std::string str(const std::string &name, const std::string &fallback) const;
    long integer(const std::string &name, long fallback) const;       // exits with a message if malformed
    double number(const std::string &name, double fallback) const;
    bool flag(const std::string &name) const;
    std::vector<std::string> all(const std::string &name) const;   // each value of a repeatable option
};

// Parses argv[first..]. `value_opts` lists the options that take a value (long and short spellings);
// `flag_opts` those that do not. Unknown options are an error (message, exit 2).
Args parse(int argc, char **argv, int first, const std::vector<std::string> &value_opts,
           const std::vector<std::string> &flag_opts);

// Prints "ember: <what>: <ember_last_error()>" to stderr and returns 1 (for `return fail(...)`).
int fail(const char *what, ember_status status);
// Prints "ember: <message>" to stderr and returns 2 (usage errors).
int usage_error(const std::string &message);

// Loads a model or reports the error; nullptr on failure. Shows a progress bar on a terminal when asked.
ember_model *load_model(const std::string &path, bool vocab_only, bool progress);

// --grammar FILE (GBNF) or --json-schema FILE: *out is the grammar, or nullptr with neither. False
// (with the message printed) when a file cannot be read or does not compile.
bool grammar_option(const Args &a, const ember_model *model, ember_grammar **out);
// A whole file into *out; false (saying so on stderr) when it cannot be read.
bool read_text_file(const std::string &path, std::string *out);

// `run --tools FILE` (tools_option.cpp): the prompt rendered with the tools, the tool_choice grammar,
// and the reply's parser.
struct ToolRun {
    std::string tools_json, tmpl, prompt, prefix;
    ember_grammar *grammar = nullptr;
    ember_chat_parser *parser = nullptr;
    ToolRun() = default;
    ToolRun(const ToolRun &) = delete;
    ToolRun &operator=(const ToolRun &) = delete;
    ~ToolRun();
};
bool tools_option(const Args &a, const ember_model *model, const std::string &user, ToolRun *out);
// Feeds a piece of the reply to the parser and prints what became certain (content to stdout,
// reasoning to stderr, calls as JSON lines); finish: the reply ended.
void tools_print(ember_chat_parser *parser, const char *text, size_t len, bool finish);

// `ember bench --json-schema FILE | --grammar FILE` (bench_grammar.cpp).
int bench_grammar(const Args &a, const std::string &model_path, long G);
// The sampler `ember bench` decodes with: --temp T (default 0: greedy), --top-k K (default 40), --top-p P
// (default 1), --min-p P (default 0), --repeat-penalty R (default 1), --seed S (default 1). False (after
// a message) for values the library refuses.
bool bench_sampler_params(const Args &a, ember_sampler_params *sp);

// help.cpp: every command's usage, or one command's (false: no such command).
void print_help();
bool print_command_help(const char *command);

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);    // cmd_embed.cpp
int cmd_rerank(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

} // namespace cli

namespace cli {
// Tokenizes with the two-call idiom; false (after reporting) on error.
bool tokenize(const ember_model *model, const std::string &text, uint32_t flags, std::vector<ember_token> &out);
// Creates a session from the common options (-t, -c, --backend, --kv-type); nullptr (after reporting) on error.
ember_session *create_session(const ember_model *model, const Args &a);
// Reads --backend, or a KV cache type option (f16 | q8_0 | q4_0; *out is the default); false after reporting.
bool backend_option(const Args &a, ember_backend_kind *out);
// JSON fields naming the backend the session runs on and, on a GPU backend, its device, e.g.
// "\"backend\":\"cuda\",\"device\":\"NVIDIA H200\"," (for bench output); "" if the session cannot say.
std::string backend_json(const ember_session *s);
// The same for an engine.
std::string backend_json(const ember_engine *e);
bool kv_type_option(const Args &a, const char *name, ember_kv_type *out);
// Reads the placement options --gpu-layers N|auto|all, --experts-on-cpu N|all and --vram-budget MiB
// into the params' fields (left as they are where an option is absent); false after reporting.
bool placement_options(const Args &a, int32_t *gpu_layers, int32_t *experts_on_cpu, uint64_t *gpu_budget_bytes);
// The names of those options, for a command's list of the options it takes.
#define EMBER_CLI_PLACEMENT_OPTIONS "--gpu-layers", "--experts-on-cpu", "--vram-budget"
// The backend's name as the CLI spells it ("cpu", "cuda", "vulkan", "auto").
const char *backend_name(ember_backend_kind kind);
// "cpu, 4 threads" or "vulkan": where a session runs (ember_session_backend).
std::string session_backend_text(const ember_session *s);
// Feeds a prompt; one longer than a few chunks goes in chunks with a progress bar on a terminal.
ember_status feed_prompt(ember_session *s, const std::vector<ember_token> &tokens);
const char *kv_type_name(ember_kv_type t);
// Attaches speculation from --draft MODEL / --lookup, --draft-k K, --draft-fixed (no options: nothing).
// *draft receives the loaded draft model (the caller frees it after the session). False after reporting.
bool attach_speculation(ember_session *s, const Args &a, ember_model **draft);
} // namespace cli
