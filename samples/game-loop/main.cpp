// ember-game-loop — eight (or --npcs N) NPCs talk at once inside a fixed 60 Hz game loop.
//
// The point of this sample is the shape of the loop, not the dialogue: a game thread must never wait for
// inference. The engine (ember_engine) runs its own worker thread that batches every NPC's request into
// one forward pass per step; the game thread only submits, polls and reads text, calls that take a
// short lock and copy. Each frame this program measures the time it spent inside Ember calls and, at the
// end, prints its distribution (p50/p99/max per frame) against a 1 ms budget.
//
// With --json, each NPC's line is a JSON action the game can act on, {"say": "...", "action": "wave"}:
// a grammar made from a JSON Schema (ember_grammar_create_json_schema) constrains every request, so the
// text always has that shape (unless the token limit cuts it short, which the counters show).
//
// With --tools, each NPC's line is a call of one of the game's tools (open_door, say, attack, flee),
// each with a JSON Schema of its arguments: ember_chat_tool_grammar constrains every request to the
// Hermes/Qwen call syntax (tool_choice "required", one call), and ember_chat_parser reads the call out
// of the finished line: the name the game dispatches on and arguments that fit the tool's schema.
//
// Uses the public C API only (include/ember/ember.h), as a game would.
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kFrameSeconds = 1.0 / 60.0;
// What the game thread may spend in Ember per frame: the rest of the 16.7 ms belong to the game.
constexpr double kBudgetMs = 1.0;

// Each NPC's voice: the start of a story the model (a TinyStories model in the README's example)
// continues in character. Cycled when --npcs asks for more than there are.
struct Persona {
    const char *name, *prompt;
};
constexpr Persona kPersonas[] = {
    {"baker", "The old baker smiled at the children and said,"},
    {"knight", "The knight lifted his shield and told the dragon,"},
    {"fox", "The little fox looked at the moon and whispered,"},
    {"shopkeeper", "The shopkeeper counted the coins and said to the girl,"},
    {"wizard", "The wizard opened his big book and said,"},
    {"fisherman", "The fisherman pulled in his net and shouted,"},
    {"queen", "The queen looked out of the castle window and said,"},
    {"farmer", "The farmer patted his cow and said,"},
};
constexpr size_t kNumPersonas = sizeof kPersonas / sizeof kPersonas[0];

struct Options {
    std::string model;
    double seconds = 10;
    int npcs = 8;
    ember_backend_kind backend = EMBER_BACKEND_AUTO;
    int threads = 0;
    int line_tokens = 40;
    bool line_tokens_given = false;
    bool quiet = false;
    bool json = false;
    bool tools = false;
};

void usage(FILE *to) {
    std::fprintf(to,
                 "usage: ember-game-loop -m MODEL [--seconds S] [--npcs N] [--backend auto|cpu|vulkan|cuda]\n"
                 "                       [-t THREADS] [--line-tokens N] [--quiet] [--json | --tools]\n"
                 "  Runs a 60 Hz loop that drives N NPC conversations (default 8) on one engine for S seconds\n"
                 "  (default 10) and reports the time each frame spent in Ember calls. --json: each line is a\n"
                 "  JSON action {\"say\", \"action\"} (a JSON Schema grammar; --line-tokens defaults to 64).\n"
                 "  --tools: each line is a tool call (open_door, say, attack, flee; --line-tokens 64).\n");
}

bool parse_number(const char *s, double lo, double hi, double *out) {
    char *end = nullptr;
    const double v = std::strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

// Returns 0 to run, 1 on a usage error, 2 after --help.
int parse_args(int argc, char **argv, Options &o) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 2;
        }
        if (a == "--quiet") {
            o.quiet = true;
            continue;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (a == "--tools") {
            o.tools = true;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "ember-game-loop: %s needs a value (or is unknown)\n", argv[i]);
            return 1;
        }
        const char *v = argv[++i];
        double x = 0;
        if (a == "-m" || a == "--model") {
            o.model = v;
        } else if (a == "--seconds" && parse_number(v, 0.1, 86400, &x)) {
            o.seconds = x;
        } else if (a == "--npcs" && parse_number(v, 1, 256, &x)) {
            o.npcs = static_cast<int>(x);
        } else if ((a == "-t" || a == "--threads") && parse_number(v, 0, 256, &x)) {
            o.threads = static_cast<int>(x);
        } else if (a == "--line-tokens" && parse_number(v, 1, 1024, &x)) {
            o.line_tokens = static_cast<int>(x);
            o.line_tokens_given = true;
        } else if (a == "--backend") {
            const std::string_view b = v;
            if (b == "auto") o.backend = EMBER_BACKEND_AUTO;
            else if (b == "cpu") o.backend = EMBER_BACKEND_CPU;
            else if (b == "vulkan") o.backend = EMBER_BACKEND_VULKAN;
            else if (b == "cuda") o.backend = EMBER_BACKEND_CUDA;
            else {
                std::fprintf(stderr, "ember-game-loop: unknown backend '%s' (auto, cpu, vulkan, cuda)\n", v);
                return 1;
            }
        } else {
            std::fprintf(stderr, "ember-game-loop: bad option or value: %s %s\n", argv[i - 1], v);
            return 1;
        }
    }
    if (o.model.empty()) {
        std::fprintf(stderr, "ember-game-loop: -m MODEL is required\n");
        usage(stderr);
        return 1;
    }
    return 0;
}

int fail(const char *what, ember_status st) {
    std::fprintf(stderr, "ember-game-loop: %s: %s (%s)\n", what, ember_status_string(st), ember_last_error());
    return 1;
}

// Times the Ember calls of one frame: every call goes through measure(), which adds its duration.
struct FrameTimer {
    Clock::duration in_ember{};
    template <class F>
    auto measure(F &&f) {
        const auto t0 = Clock::now();
        auto r = f();
        in_ember += Clock::now() - t0;
        return r;
    }
};

// The NPCs' actions in --json mode: what the game would dispatch on.
constexpr const char *kActionSchema =
    R"({"type":"object","properties":{"say":{"type":"string","maxLength":48},)"
    R"("action":{"enum":["wave","attack","flee","trade","idle"]}},"required":["say","action"]})";

// The action of a complete --json line ("" when the token limit cut it short). The grammar fixes the
// layout (compact JSON, "say" first), so a game needs no JSON parser for this.
std::string action_of(std::string_view line) {
    if (line.empty() || line.back() != '}') return "";
    const size_t key = line.rfind("\"action\"");
    if (key == std::string_view::npos) return "";
    const size_t open = line.find('"', line.find(':', key));
    const size_t close = open == std::string_view::npos ? open : line.find('"', open + 1);
    return close == std::string_view::npos ? "" : std::string(line.substr(open + 1, close - open - 1));
}

// The NPCs' actions in --tools mode: the game's functions, each with the JSON Schema of its arguments.
constexpr ember_chat_tool kNpcTools[] = {
    {"open_door", "Opens a door of the room.",
     R"({"type":"object","properties":{"door":{"enum":["north","south","east","west"]}},"required":["door"]})"},
    {"say", "Says a line aloud.",
     R"({"type":"object","properties":{"text":{"type":"string","maxLength":40}},"required":["text"]})"},
    {"attack", "Attacks a target.",
     R"({"type":"object","properties":{"target":{"enum":["dragon","wolf","bandit"]},"power":{"type":"integer","minimum":1,"maximum":10}},"required":["target"]})"},
    {"flee", "Runs away.", nullptr},
};

// The call of a finished --tools line as "name(arguments)" ("" when the token limit cut it short).
std::string call_of(std::string_view line) {
    ember_chat_parser_params pp;
    ember_chat_parser_params_init(&pp);
    pp.format = EMBER_CHAT_FORMAT_HERMES;
    pp.tools = kNpcTools;
    pp.n_tools = sizeof kNpcTools / sizeof kNpcTools[0];
    ember_chat_parser *p = nullptr;
    if (ember_chat_parser_create(nullptr, &pp, &p) != EMBER_OK) return "";
    std::string out;
    ember_chat_delta d;
    ember_chat_delta_init(&d);
    ember_chat_tool_call c;
    if (ember_chat_parser_feed(p, line.data(), line.size()) == EMBER_OK && ember_chat_parser_finish(p) == EMBER_OK &&
        ember_chat_parser_result(p, &d) == EMBER_OK && d.n_calls == 1 && ember_chat_parser_call(p, 0, &c) == EMBER_OK)
        out = std::string(c.name) + "(" + c.arguments + ")";
    ember_chat_parser_free(p);
    return out;
}

struct Npc {
    const char *name = nullptr;
    const char *persona = nullptr;
    std::vector<ember_token> persona_tokens;
    std::vector<ember_token> line;  // tokens of the line being spoken (polled so far)
    std::vector<ember_token> last;  // the previous line: the next prompt continues from it
    ember_request *request = nullptr;
    uint64_t seed = 0;
    size_t lines = 0;
};

double percentile(std::vector<double> sorted, double p) {
    if (sorted.empty()) return 0;
    std::sort(sorted.begin(), sorted.end());
    // Nearest rank: the smallest value with at least p of the samples at or below it.
    size_t rank = static_cast<size_t>(p * static_cast<double>(sorted.size()) + 0.999999);
    rank = std::clamp<size_t>(rank, 1, sorted.size());
    return sorted[rank - 1];
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    if (const int rc = parse_args(argc, argv, o)) return rc == 2 ? 0 : 1;
    if (o.json && o.tools) {
        std::fprintf(stderr, "ember-game-loop: --json and --tools exclude each other\n");
        return 1;
    }

    ember_model *model = nullptr;
    ember_status st = ember_model_load(o.model.c_str(), nullptr, &model);
    if (st != EMBER_OK) return fail("loading the model", st);

    if ((o.json || o.tools) && !o.line_tokens_given) o.line_tokens = 64;
    ember_grammar *actions = nullptr;   // shared by every request (the requests hold references)
    if (o.json && (st = ember_grammar_create_json_schema(model, kActionSchema, std::strlen(kActionSchema), &actions)) != EMBER_OK) {
        ember_model_free(model);
        return fail("compiling the action schema", st);
    }
    if (o.tools) {
        ember_tool_grammar_params tg;
        ember_tool_grammar_params_init(&tg);   // tool_choice required
        tg.format = EMBER_CHAT_FORMAT_HERMES;
        tg.tools = kNpcTools;
        tg.n_tools = sizeof kNpcTools / sizeof kNpcTools[0];
        tg.parallel = false;                   // one action per line
        if ((st = ember_chat_tool_grammar(model, &tg, &actions)) != EMBER_OK) {
            ember_model_free(model);
            return fail("compiling the tools' grammar", st);
        }
    }

    std::vector<Npc> npcs(static_cast<size_t>(o.npcs));
    for (size_t i = 0; i < npcs.size(); ++i) {
        Npc &n = npcs[i];
        n.name = kPersonas[i % kNumPersonas].name;
        n.persona = kPersonas[i % kNumPersonas].prompt;
        n.seed = 1000 + i;
        size_t count = 0;
        const size_t len = std::strlen(n.persona);
        ember_tokenize(model, n.persona, len, EMBER_TOKENIZE_ADD_SPECIAL, nullptr, 0, &count);
        n.persona_tokens.resize(count);
        st = ember_tokenize(model, n.persona, len, EMBER_TOKENIZE_ADD_SPECIAL, n.persona_tokens.data(), count, &count);
        if (st != EMBER_OK) return fail("tokenizing a persona", st);
    }

    // One slot per NPC, so that none waits in the queue; a context that holds a persona, the previous
    // line and the new one.
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = static_cast<uint32_t>(o.npcs);
    ep.n_ctx = 64 + 2 * static_cast<uint32_t>(o.line_tokens);
    ep.n_threads = static_cast<uint32_t>(o.threads);
    ep.backend = o.backend;
    ember_engine *engine = nullptr;
    st = ember_engine_create(model, &ep, &engine);
    if (st != EMBER_OK) {
        ember_grammar_free(actions);
        ember_model_free(model);
        return fail("creating the engine", st);
    }

    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.top_p = 0.95f;

    // Submits an NPC's next line: its persona, then the line it said last, so that it goes on talking.
    std::vector<ember_token> prompt;
    auto submit = [&](Npc &n, FrameTimer &timer) -> ember_status {
        prompt.assign(n.persona_tokens.begin(), n.persona_tokens.end());
        prompt.insert(prompt.end(), n.last.begin(), n.last.end());
        sp.seed = n.seed++;
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompt.data();
        rp.n_prompt = prompt.size();
        rp.max_tokens = static_cast<uint32_t>(o.line_tokens);
        rp.sampling = &sp;
        rp.grammar = actions;
        return timer.measure([&] { return ember_request_submit(engine, &rp, &n.request); });
    };

    std::printf("ember-game-loop: %d NPCs, %.1f s at 60 Hz, budget %.1f ms of Ember calls per frame\n", o.npcs,
                o.seconds, kBudgetMs);
    std::fflush(stdout);

    std::vector<double> frame_ms;  // time in Ember calls, per frame
    frame_ms.reserve(static_cast<size_t>(o.seconds * 60) + 64);
    std::vector<char> text(4096);
    ember_token polled[64];
    uint64_t tokens = 0, lines = 0, over_budget = 0, late = 0, json_complete = 0;
    int rc = 0;

    const auto start = Clock::now();
    const auto frame = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kFrameSeconds));
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    auto next_frame = start;
    auto next_report = start + std::chrono::seconds(1);
    uint64_t tokens_at_report = 0;
    size_t frames_at_report = 0;

    while (Clock::now() < end && rc == 0) {
        FrameTimer timer;
        for (Npc &n : npcs) {
            if (!n.request) {
                if ((st = submit(n, timer)) != EMBER_OK) {
                    rc = fail("submitting a line", st);
                    break;
                }
                continue;
            }
            size_t got = 0;
            ember_request_state state = EMBER_REQUEST_RUNNING;
            st = timer.measure([&] { return ember_request_poll(n.request, polled, 64, &got, &state); });
            if (st != EMBER_OK) {
                rc = fail("polling", st);
                break;
            }
            n.line.insert(n.line.end(), polled, polled + got);
            tokens += got;
            if (state == EMBER_REQUEST_QUEUED || state == EMBER_REQUEST_RUNNING) continue;
            if (state == EMBER_REQUEST_FAILED) {
                ember_status why = EMBER_OK;
                const char *msg = nullptr;
                ember_request_error(n.request, &why, &msg);
                std::fprintf(stderr, "ember-game-loop: a request failed: %s (%s)\n", ember_status_string(why), msg);
                rc = 1;
                break;
            }
            // The line is finished (tokens still unpolled are at most the 64 above; poll again for them).
            do {
                st = timer.measure([&] { return ember_request_poll(n.request, polled, 64, &got, &state); });
                n.line.insert(n.line.end(), polled, polled + got);
                tokens += got;
            } while (st == EMBER_OK && got > 0);
            size_t len = 0;
            st = timer.measure([&] { return ember_request_text(n.request, text.data(), text.size(), &len); });
            if (st == EMBER_ERR_BUFFER_TOO_SMALL) {
                text.resize(len + 1);
                st = timer.measure([&] { return ember_request_text(n.request, text.data(), text.size(), &len); });
            }
            if (st != EMBER_OK) {
                rc = fail("reading a line", st);
                break;
            }
            timer.measure([&] {
                ember_request_free(n.request);
                return 0;
            });
            n.request = nullptr;
            ++n.lines;
            ++lines;
            const std::string_view said(text.data(), len);
            const std::string action = o.json    ? action_of(said)
                                       : o.tools ? timer.measure([&] { return call_of(said); })
                                                 : "";
            if (!action.empty()) ++json_complete;   // here the game would make the NPC wave, flee, open a door...
            if (!o.quiet) {
                // Printing is the game's work, not Ember's: it stays outside the measured time.
                std::replace(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(len), '\n', ' ');
                if (o.tools && !action.empty())
                    std::printf("  [%s %zu] %s\n", n.name, static_cast<size_t>(&n - npcs.data()), action.c_str());
                else
                    std::printf("  [%s %zu] %.*s\n", n.name, static_cast<size_t>(&n - npcs.data()), static_cast<int>(len),
                                text.data());
            }
            n.last.swap(n.line);
            n.line.clear();
            if ((st = submit(n, timer)) != EMBER_OK) {
                rc = fail("submitting a line", st);
                break;
            }
        }

        const double ms = std::chrono::duration<double, std::milli>(timer.in_ember).count();
        frame_ms.push_back(ms);
        if (ms > kBudgetMs) ++over_budget;

        const auto now = Clock::now();
        if (now >= next_report) {
            const size_t frames = frame_ms.size() - frames_at_report;
            std::vector<double> last_second(frame_ms.end() - static_cast<std::ptrdiff_t>(frames), frame_ms.end());
            std::printf("t=%4.1fs frames %zu, ember per frame p99 %.3f ms max %.3f ms, %llu tok/s, %llu lines\n",
                        std::chrono::duration<double>(now - start).count(), frames, percentile(last_second, 0.99),
                        *std::max_element(last_second.begin(), last_second.end()),
                        static_cast<unsigned long long>(tokens - tokens_at_report), static_cast<unsigned long long>(lines));
            std::fflush(stdout);
            tokens_at_report = tokens;
            frames_at_report = frame_ms.size();
            next_report += std::chrono::seconds(1);
        }
        // The game's own work would go here. Then sleep to the next frame boundary; a frame that ran past
        // it is late, and the loop skips the boundaries it missed instead of bunching frames to catch up.
        next_frame += frame;
        if (Clock::now() > next_frame) {
            ++late;
            while (next_frame < Clock::now()) next_frame += frame;
        }
        std::this_thread::sleep_until(next_frame);
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

    for (Npc &n : npcs) ember_request_free(n.request);
    ember_engine_free(engine);
    ember_grammar_free(actions);
    ember_model_free(model);
    if (rc != 0) return rc;

    const double p50 = percentile(frame_ms, 0.50), p99 = percentile(frame_ms, 0.99);
    const double mx = frame_ms.empty() ? 0 : *std::max_element(frame_ms.begin(), frame_ms.end());
    std::printf("\n%zu frames in %.2f s (%.1f per second), %llu late\n", frame_ms.size(), elapsed,
                static_cast<double>(frame_ms.size()) / elapsed, static_cast<unsigned long long>(late));
    std::printf("time in Ember calls per frame: p50 %.3f ms, p99 %.3f ms, max %.3f ms; %llu frames over the %.1f ms budget\n",
                p50, p99, mx, static_cast<unsigned long long>(over_budget), kBudgetMs);
    std::printf("generated %llu tokens in %llu lines: %.1f tokens/s\n", static_cast<unsigned long long>(tokens),
                static_cast<unsigned long long>(lines), static_cast<double>(tokens) / elapsed);
    if (o.json || o.tools)
        std::printf("%s: %llu complete, %llu cut by --line-tokens\n", o.json ? "JSON actions" : "tool calls",
                    static_cast<unsigned long long>(json_complete),
                    static_cast<unsigned long long>(lines - json_complete));
    // One line with every figure, for scripts (the sample's test reads it).
    std::printf("stats: frames=%zu seconds=%.3f late=%llu p50_ms=%.4f p99_ms=%.4f max_ms=%.4f over_budget=%llu tokens=%llu "
                "lines=%llu tok_per_s=%.1f json_complete=%llu\n",
                frame_ms.size(), elapsed, static_cast<unsigned long long>(late), p50, p99, mx,
                static_cast<unsigned long long>(over_budget), static_cast<unsigned long long>(tokens),
                static_cast<unsigned long long>(lines), static_cast<double>(tokens) / elapsed,
                static_cast<unsigned long long>(json_complete));
    return 0;
}
