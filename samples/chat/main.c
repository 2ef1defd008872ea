/* ember-chat — a terminal chat on the public C API (samples/README.md).
 *
 * Each turn renders the whole conversation with the model's chat template (ChatML when the model has
 * none) but evaluates only what is new: the session keeps the tokens of earlier turns (reply.c).
 * Ctrl-C stops a reply and keeps the chat going; Ctrl-C at the prompt quits. */
#define _GNU_SOURCE /* ppoll */
#include "conversation.h"
#include "reply.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *model, *draft, *system;
    ember_backend_kind backend;
    ember_sampler_params sampling;
    uint32_t max_tokens, n_ctx, n_threads;
    bool verbose;
    bool slide;       /* --context-policy slide (default): drop the oldest turns when the context is full */
    size_t n_keep;    /* messages never dropped: the system prompt */
} options;

static void usage(FILE *to) {
    fprintf(to,
            "usage: ember-chat -m MODEL [options]\n"
            "  -c CTX            context length in tokens (default: the model's trained length, at most 4096;\n"
            "                    a longer one than the model was trained for degrades its replies)\n"
            "  --context-policy slide|stop   when the conversation outgrows the context: drop the oldest\n"
            "                    turns, saying so (slide, the default), or refuse the turn (stop)\n"
            "  -n N              most tokens per reply (default 256)\n"
            "  -t THREADS        CPU threads (default: physical cores)\n"
            "  --backend B       auto, cpu, vulkan or cuda (default auto)\n"
            "  --temp T --top-k K --top-p P --seed S   sampling (default 0.8, 40, 0.95, random seed; T 0: greedy)\n"
            "  --system TEXT     a system message opening the conversation\n"
            "  --draft MODEL     speculative decoding with a smaller model of the same vocabulary\n"
            "  --verbose         report, each turn, how many tokens were evaluated and how many reused\n"
            "commands: /reset  /save FILE  /load FILE  /quit   (Ctrl-C stops a reply; at the prompt it quits)\n");
}

static bool parse_num(const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    const double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* 0: run; 1: usage error; 2: --help done. */
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    ember_sampler_params_init(&o->sampling);
    o->sampling.temperature = 0.8f;
    o->sampling.top_k = 40;
    o->sampling.top_p = 0.95f;
    o->sampling.seed = (uint64_t)time(NULL);
    o->max_tokens = 256;
    o->n_ctx = 0;   /* the session's default: the model's trained context, at most 4096 */
    o->slide = true;
    o->backend = EMBER_BACKEND_AUTO;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 2;
        }
        if (!strcmp(a, "--verbose")) {
            o->verbose = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ember-chat: %s needs a value (or is unknown)\n", a);
            return 1;
        }
        const char *v = argv[++i];
        double x = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--draft")) o->draft = v;
        else if (!strcmp(a, "--system")) o->system = v;
        else if (!strcmp(a, "--context-policy") && (!strcmp(v, "slide") || !strcmp(v, "stop"))) o->slide = !strcmp(v, "slide");
        else if (!strcmp(a, "-c") && parse_num(v, 16, 1 << 20, &x)) o->n_ctx = (uint32_t)x;
        else if (!strcmp(a, "-n") && parse_num(v, 1, 1 << 20, &x)) o->max_tokens = (uint32_t)x;
        else if (!strcmp(a, "-t") && parse_num(v, 0, 256, &x)) o->n_threads = (uint32_t)x;
        else if (!strcmp(a, "--temp") && parse_num(v, 0, 100, &x)) o->sampling.temperature = (float)x;
        else if (!strcmp(a, "--top-k") && parse_num(v, 0, 1e9, &x)) o->sampling.top_k = (int32_t)x;
        else if (!strcmp(a, "--top-p") && parse_num(v, 1e-6, 1, &x)) o->sampling.top_p = (float)x;
        else if (!strcmp(a, "--seed") && parse_num(v, 0, 1.8e19, &x)) o->sampling.seed = (uint64_t)x;
        else if (!strcmp(a, "--backend")) {
            if (!strcmp(v, "auto")) o->backend = EMBER_BACKEND_AUTO;
            else if (!strcmp(v, "cpu")) o->backend = EMBER_BACKEND_CPU;
            else if (!strcmp(v, "vulkan")) o->backend = EMBER_BACKEND_VULKAN;
            else if (!strcmp(v, "cuda")) o->backend = EMBER_BACKEND_CUDA;
            else {
                fprintf(stderr, "ember-chat: unknown backend '%s' (auto, cpu, vulkan, cuda)\n", v);
                return 1;
            }
        } else {
            fprintf(stderr, "ember-chat: bad option or value: %s %s\n", a, v);
            return 1;
        }
    }
    if (!o->model) {
        fprintf(stderr, "ember-chat: -m MODEL is required\n");
        usage(stderr);
        return 1;
    }
    return 0;
}

/* ---- Ctrl-C ----
 * During a turn the handler cancels the session's work (ember_session_cancel only sets a flag, which
 * the header promises is safe in a signal handler) and sets chat_interrupted, which the reply's token
 * callback also checks: a Ctrl-C that lands between the prefill and the generation still counts. At the
 * prompt it asks to quit; the read it interrupts returns with EINTR (no SA_RESTART). */
static ember_session *volatile g_session = NULL;
static volatile sig_atomic_t g_in_turn = 0;
static volatile sig_atomic_t g_quit = 0;

static void on_sigint(int sig) {
    (void)sig;
    if (g_in_turn) {
        chat_interrupted = 1;
        ember_session_cancel(g_session);
    } else {
        g_quit = 1;
    }
}

/* ---- input ----
 * Lines are read with read(2) rather than stdio, so that a Ctrl-C at the prompt can never be missed:
 * SIGINT stays blocked except inside ppoll, which unblocks it atomically while it waits. (With a
 * blocking read, a signal landing between the check of the quit flag and the read would be lost.) */
typedef struct line_reader {
    char *buf;          /* read, not yet handed out */
    size_t len, cap;
    char *line;         /* the line handed out */
    size_t line_cap;
    bool eof;
} line_reader;

/* The next line without its newline (valid until the next call), or NULL at end of input or when
 * Ctrl-C asked to quit. */
static char *read_line(line_reader *r, const sigset_t *unblocked) {
    for (;;) {
        char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
        if (nl || (r->eof && r->len)) {
            const size_t n = nl ? (size_t)(nl - r->buf) : r->len;
            if (n + 1 > r->line_cap) {
                char *l = realloc(r->line, n + 1);
                if (!l) return NULL;
                r->line = l;
                r->line_cap = n + 1;
            }
            memcpy(r->line, r->buf, n);
            r->line[n] = '\0';
            const size_t used = nl ? n + 1 : n;
            memmove(r->buf, r->buf + used, r->len - used);
            r->len -= used;
            return r->line;
        }
        if (r->eof || g_quit) return NULL;
        struct pollfd p = {0, POLLIN, 0};
        if (ppoll(&p, 1, NULL, unblocked) < 0) {
            if (errno == EINTR) continue; /* g_quit is checked above */
            return NULL;
        }
        if (r->len + 4096 > r->cap) {
            const size_t cap = r->cap ? 2 * r->cap : 8192;
            char *b = realloc(r->buf, cap);
            if (!b) return NULL;
            r->buf = b;
            r->cap = cap;
        }
        const ssize_t n = read(0, r->buf + r->len, 4096);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) r->eof = true;
        else r->len += (size_t)n;
    }
}

static int fail(const char *what, ember_status st) {
    fprintf(stderr, "ember-chat: %s: %s (%s)\n", what, ember_status_string(st), ember_last_error());
    return 1;
}

/* Renders the conversation for the next reply. With --context-policy slide, first drops the oldest
 * exchanges after the system prompt until the rendering leaves room for a reply (-n tokens, at most a
 * quarter of the context), saying how many went; the newest message always stays. The session then
 * recomputes from the first dropped message on (chat_prefill keeps the common prefix). */
static char *render_fitting(const options *o, const ember_model *model, ember_session *session, conversation *c) {
    uint32_t n_ctx = 0;
    ember_session_context_length(session, &n_ctx);
    const size_t room = o->max_tokens < n_ctx / 4 ? o->max_tokens : n_ctx / 4;
    size_t dropped = 0;
    for (;;) {
        char *text = conversation_render(c, model, true);
        if (!text || !o->slide) return text;
        ember_token *tokens = NULL;
        size_t n = 0;
        if (chat_tokenize(model, text, &tokens, &n) != EMBER_OK) return text;   /* chat_prefill reports it */
        free(tokens);
        /* Droppable: a user message and its reply, before the newest message. */
        if (n + room <= n_ctx || c->n_messages < o->n_keep + 3) {
            if (dropped)
                fprintf(stderr, "(context: the oldest %zu messages were dropped to fit the %u-token context; "
                                "--context-policy stop refuses instead)\n", dropped, n_ctx);
            return text;
        }
        free(text);
        conversation_drop(c, o->n_keep, 2);
        dropped += 2;
    }
}

/* One user turn: render, prefill what is new, stream the reply, keep it in the conversation. */
static void run_turn(const options *o, const ember_model *model, ember_session *session, ember_sampler *sampler,
                     conversation *c, const char *user) {
    if (!conversation_add(c, "user", user)) {
        fprintf(stderr, "ember-chat: out of memory\n");
        return;
    }
    char *text = render_fitting(o, model, session, c);
    if (!text) {
        conversation_pop(c);
        return;
    }
    size_t n_new = 0, n_reused = 0;
    uint32_t before = 0, after = 0;
    ember_session_position(session, &before);
    ember_status st = chat_prefill(session, model, c, text, &n_new, &n_reused);
    free(text);
    ember_session_position(session, &after);
    if (st == EMBER_OK && o->verbose)
        fprintf(stderr, "prefill: %zu new tokens (%zu reused; position %u -> %u)\n", n_new, n_reused, before, after);
    char *reply = NULL;
    if (st == EMBER_OK) {
        st = chat_reply(session, sampler, c, o->max_tokens, &reply);
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (chat_interrupted) {
        fprintf(stderr, "[cancelled]\n");
    } else if (st < 0 && st != EMBER_ERR_CONTEXT_FULL) { /* a full context was reported where found */
        fprintf(stderr, "ember-chat: %s (%s)\n", ember_status_string(st), ember_last_error());
    }
    if (reply && (st >= 0 || chat_interrupted)) {
        /* The reply as far as it went (cut short by Ctrl-C too) is part of the conversation. */
        if (!conversation_add(c, "assistant", reply)) fprintf(stderr, "ember-chat: out of memory\n");
    } else {
        conversation_pop(c);  /* no answer: the question goes too */
    }
    free(reply);
    if (o->verbose) {
        ember_session_position(session, &after);
        fprintf(stderr, "context: %u tokens\n", after);
    }
}

int main(int argc, char **argv) {
    options o;
    const int prc = parse_args(argc, argv, &o);
    if (prc) return prc == 2 ? 0 : 1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    /* SIGINT is delivered only inside ppoll (read_line) and during a turn. */
    sigset_t with_sigint, unblocked;
    sigemptyset(&with_sigint);
    sigaddset(&with_sigint, SIGINT);
    sigprocmask(SIG_BLOCK, &with_sigint, &unblocked);
    sigdelset(&unblocked, SIGINT);

    int rc = 1;
    ember_model *model = NULL, *draft = NULL;
    ember_session *session = NULL;
    ember_sampler *sampler = NULL;
    conversation c;
    conversation_init(&c);
    line_reader input;
    memset(&input, 0, sizeof input);

    ember_status st = ember_model_load(o.model, NULL, &model);
    if (st != EMBER_OK) {
        rc = fail("loading the model", st);
        goto done;
    }
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = o.n_ctx;
    sp.n_threads = o.n_threads;
    sp.backend = o.backend;
    if ((st = ember_session_create(model, &sp, &session)) != EMBER_OK) {
        rc = fail("creating the session", st);
        goto done;
    }
    g_session = session;
    if (o.draft) {
        if ((st = ember_model_load(o.draft, NULL, &draft)) != EMBER_OK) {
            rc = fail("loading the draft model", st);
            goto done;
        }
        ember_spec_params spec;
        ember_spec_params_init(&spec);
        spec.mode = EMBER_SPEC_DRAFT;
        spec.draft_model = draft;
        if ((st = ember_session_set_speculation(session, &spec)) != EMBER_OK) {
            rc = fail("attaching the draft model", st);
            goto done;
        }
    }
    if ((st = ember_sampler_create(&o.sampling, &sampler)) != EMBER_OK) {
        rc = fail("sampling options", st);
        goto done;
    }
    if (o.system && !conversation_add(&c, "system", o.system)) {
        fprintf(stderr, "ember-chat: out of memory\n");
        goto done;
    }
    const size_t n_keep = o.system ? 1 : 0;
    o.n_keep = n_keep;
    {
        uint32_t n_ctx = 0;
        ember_model_info info;
        ember_model_info_init(&info);
        ember_model_get_info(model, &info);
        ember_session_context_length(session, &n_ctx);
        fprintf(stderr, "ember-chat: %s, context %u tokens (trained: %u%s). Type a message; /reset, /save FILE, "
                        "/load FILE, /quit. Ctrl-C stops a reply.\n",
                o.model, n_ctx, info.n_ctx_train, o.slide ? "; the oldest turns go when it is full" : "");
        if (info.n_ctx_train && n_ctx > info.n_ctx_train)
            fprintf(stderr, "ember-chat: note: -c %u is longer than the model was trained for (%u): expect "
                            "replies to degrade past %u tokens\n", n_ctx, info.n_ctx_train, info.n_ctx_train);
    }

    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        char *line = read_line(&input, &unblocked);
        if (!line) {
            fputc('\n', stdout);
            break; /* end of input, or Ctrl-C at the prompt */
        }
        size_t len = strlen(line);
        while (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
        if (len == 0) continue;
        if (!strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            /* Only the messages go: the next turn rolls the session back to what it shares with them
             * (the system prompt), so that stays evaluated. */
            conversation_keep(&c, n_keep);
            ember_sampler_reset(sampler);
            fprintf(stderr, "(conversation cleared)\n");
        } else if (!strncmp(line, "/save ", 6)) {
            if (conversation_save(&c, session, line + 6)) fprintf(stderr, "(saved %zu messages to %s)\n", c.n_messages, line + 6);
        } else if (!strncmp(line, "/load ", 6)) {
            if (conversation_load(&c, session, line + 6))
                fprintf(stderr, "(loaded %zu messages, %zu tokens from %s)\n", c.n_messages, c.n_tokens, line + 6);
        } else if (line[0] == '/') {
            fprintf(stderr, "unknown command %s (/reset, /save FILE, /load FILE, /quit)\n", line);
        } else {
            /* Ctrl-C is let through during the turn, and then cancels it (on_sigint). */
            chat_interrupted = 0;
            g_in_turn = 1;
            sigprocmask(SIG_SETMASK, &unblocked, NULL);
            run_turn(&o, model, session, sampler, &c, line);
            sigprocmask(SIG_BLOCK, &with_sigint, NULL);
            g_in_turn = 0;
        }
    }
    rc = 0;
    if (o.draft && o.verbose) {
        ember_spec_stats ss;
        ember_spec_stats_init(&ss);
        if (ember_session_spec_stats(session, &ss) == EMBER_OK)
            fprintf(stderr, "speculation: %llu drafted, %llu accepted, %.2f tokens per target pass\n",
                    (unsigned long long)ss.drafted, (unsigned long long)ss.accepted, ss.tokens_per_pass);
    }
done:
    g_session = NULL;
    free(input.buf);
    free(input.line);
    conversation_free(&c);
    ember_sampler_free(sampler);
    ember_session_free(session);
    ember_model_free(draft);
    ember_model_free(model);
    return rc;
}
