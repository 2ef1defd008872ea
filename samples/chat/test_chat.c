/* test_chat.c — test_sample_chat: drives ember-chat through a pipe, as a user at a terminal would.
 *
 *  1. Two turns (greedy, stories15M: no chat template, so ChatML): the first prefills the whole
 *     rendering, the second only what the session does not hold yet. The expected counts are computed
 *     here, independently of the app: the conversation is rendered with ember_chat_apply_template and
 *     tokenized, and what the session holds before turn 2 is the first rendering followed by the reply.
 *  2. /save, one more turn; then a new process /loads and takes the same turn: same prefill counts,
 *     same reply.
 *  3. Ctrl-C (SIGINT) during a long reply: a cancel notice, the process stays, answers the next turn;
 *     Ctrl-C at the prompt then quits.
 *
 * usage: test_chat EMBER_CHAT_BINARY (the model from $EMBER_REPO_MODELS; exit 77 without it). */
#define _POSIX_C_SOURCE 200809L
#include <ember/ember.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_failures = 0;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "FAIL (%s:%d): %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            ++g_failures;                                                       \
        }                                                                       \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- a child process with its stdin and (stdout + stderr) on pipes ---- */

typedef struct child {
    pid_t pid;
    int in, out;
    char *buf; /* everything it printed so far */
    size_t len, cap;
} child;

static child spawn(char *const argv[]) {
    child c;
    memset(&c, 0, sizeof c);
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
        perror("pipe");
        exit(1);
    }
    c.pid = fork();
    if (c.pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        dup2(from[1], 2);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        execv(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c.in = to[1];
    c.out = from[0];
    c.cap = 1 << 16;
    c.buf = malloc(c.cap);
    c.buf[0] = '\0';
    return c;
}

/* Reads until `marker` occurs at or after offset `from` of the output, or the time-out. Returns the
 * offset just after the marker, or -1. */
static long read_until(child *c, size_t from, const char *marker, double timeout_s) {
    const double deadline = now_s() + timeout_s;
    for (;;) {
        const char *f = c->len > from ? strstr(c->buf + from, marker) : NULL;
        if (f) return (long)(f - c->buf) + (long)strlen(marker);
        const double left = deadline - now_s();
        if (left <= 0) return -1;
        struct pollfd p = {c->out, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        if (c->len + 4096 + 1 > c->cap) {
            c->cap *= 2;
            c->buf = realloc(c->buf, c->cap);
        }
        const ssize_t n = read(c->out, c->buf + c->len, 4096);
        if (n <= 0) return -1; /* it exited */
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
    }
}

static void send_line(child *c, const char *line) {
    const size_t n = strlen(line);
    if (write(c->in, line, n) != (ssize_t)n || write(c->in, "\n", 1) != 1) perror("write to ember-chat");
}

/* Waits for the child to exit (killing it after the time-out); returns its exit status, or -1. */
static int finish(child *c, double timeout_s) {
    const double deadline = now_s() + timeout_s;
    int status = 0;
    for (;;) {
        const pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid) break;
        if (now_s() > deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            status = -1;
            break;
        }
        read_until(c, c->len, "\x01never", 0.05); /* keep draining its output */
    }
    close(c->in);
    close(c->out);
    free(c->buf);
    return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A turn: sends `line`, waits for the next prompt. Returns the offset where the turn's output starts
 * and sets *end after the prompt (or -1 on time-out). */
static size_t turn(child *c, const char *line, long *end) {
    const size_t start = c->len;
    send_line(c, line);
    *end = read_until(c, start, "\n> ", 15);
    return start;
}

/* "prefill: N new tokens (M reused" in out[from, to). */
static bool prefill_counts(const child *c, size_t from, long to, size_t *n_new, size_t *n_reused) {
    if (to < 0) return false;
    const char *p = strstr(c->buf + from, "prefill: ");
    if (!p || p - c->buf >= to) return false;
    return sscanf(p, "prefill: %zu new tokens (%zu reused", n_new, n_reused) == 2;
}

/* ---- expectations from the API ---- */

static ember_token *tokenize(const ember_model *m, const char *text, size_t *n) {
    const uint32_t flags = EMBER_TOKENIZE_ADD_SPECIAL | EMBER_TOKENIZE_PARSE_SPECIAL;
    ember_tokenize(m, text, strlen(text), flags, NULL, 0, n);
    ember_token *t = malloc((*n + 1) * sizeof *t);
    if (ember_tokenize(m, text, strlen(text), flags, t, *n, n) != EMBER_OK) *n = 0;
    return t;
}

static char *render(const ember_model *m, const ember_chat_message *msgs, size_t n) {
    size_t len = 0;
    if (ember_chat_apply_template(m, NULL, msgs, n, true, NULL, 0, &len) != EMBER_OK) return NULL;
    char *s = malloc(len + 1);
    if (ember_chat_apply_template(m, NULL, msgs, n, true, s, len + 1, &len) != EMBER_OK) {
        free(s);
        return NULL;
    }
    return s;
}

/* The messages of a file written by /save (format: samples/chat/conversation.c). */
static size_t read_saved(const char *path, ember_chat_message *msgs, size_t cap, ember_token **tokens, size_t *n_tokens) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[64];
    size_t n = 0;
    if (!fgets(magic, sizeof magic, f) || fscanf(f, "messages %zu\n", &n) != 1 || n > cap) n = 0;
    for (size_t i = 0; i < n; ++i) {
        size_t rl = 0, cl = 0;
        if (fscanf(f, "%zu %zu", &rl, &cl) != 2 || fgetc(f) != '\n') return 0;
        char *r = calloc(rl + 1, 1), *t = calloc(cl + 1, 1);
        if (fread(r, 1, rl, f) != rl || fread(t, 1, cl, f) != cl) return 0;
        fgetc(f);
        msgs[i].role = r;
        msgs[i].content = t;
    }
    *n_tokens = 0;
    if (fscanf(f, "tokens %zu", n_tokens) == 1) {
        *tokens = malloc((*n_tokens + 1) * sizeof **tokens);
        for (size_t i = 0; i < *n_tokens; ++i) {
            int t = 0;
            if (fscanf(f, "%d", &t) != 1) break;
            (*tokens)[i] = t;
        }
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_chat EMBER_CHAT_BINARY\n");
        return 1;
    }
    const char *dir = getenv("EMBER_REPO_MODELS");
    char model_path[4096];
    snprintf(model_path, sizeof model_path, "%s/stories15M-q8_0.gguf", dir ? dir : "");
    if (!dir || access(model_path, R_OK) != 0) {
        printf("SKIP: %s not found (EMBER_REPO_MODELS)\n", model_path);
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);
    char tmpdir[] = "/tmp/ember-chat-test-XXXXXX";
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char save_path[256];
    snprintf(save_path, sizeof save_path, "%s/conv", tmpdir);
    char save_cmd[300];
    snprintf(save_cmd, sizeof save_cmd, "/save %s", save_path);
    char load_cmd[300];
    snprintf(load_cmd, sizeof load_cmd, "/load %s", save_path);
    const double t0 = now_s();

    char *const args[] = {argv[1], "-m", model_path, "--temp", "0", "-n", "12", "-c", "512", "-t", "1", "--verbose", NULL};

    /* ---- 1. two turns, then /save and a third ---- */
    const char *q1 = "Hello! What is your name?", *q2 = "Tell me about your dog.", *q3 = "What happened next?";
    child a = spawn(args);
    CHECK(read_until(&a, 0, "> ", 15) >= 0, "no first prompt; output:\n%s", a.buf);
    long e1, e2, e3, es;
    const size_t s1 = turn(&a, q1, &e1);
    const size_t s2 = turn(&a, q2, &e2);
    size_t n1 = 0, m1 = 0, n2 = 0, m2 = 0;
    CHECK(prefill_counts(&a, s1, e1, &n1, &m1), "turn 1 printed no prefill line:\n%s", a.buf + s1);
    CHECK(prefill_counts(&a, s2, e2, &n2, &m2), "turn 2 printed no prefill line:\n%s", a.buf + s2);
    const size_t ss = a.len;
    send_line(&a, save_cmd);
    es = read_until(&a, ss, "\n> ", 15);
    CHECK(es >= 0 && strstr(a.buf + ss, "(saved 4 messages"), "/save: %s", a.buf + ss);
    const size_t s3 = turn(&a, q3, &e3);
    CHECK(e3 >= 0, "turn 3 did not end");
    char *turn3_a = e3 >= 0 ? strndup(a.buf + s3, (size_t)e3 - s3) : strdup("");
    send_line(&a, "/quit");
    CHECK(finish(&a, 10) == 0, "ember-chat did not quit cleanly after /quit");
    printf("turn 1: %zu new, %zu reused; turn 2: %zu new, %zu reused\n", n1, m1, n2, m2);

    /* The expectation, from the saved messages. */
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *model = NULL;
    CHECK(ember_model_load(model_path, &mp, &model) == EMBER_OK, "loading the vocabulary: %s", ember_last_error());
    ember_chat_message msgs[8];
    ember_token *saved_tokens = NULL;
    size_t n_saved = 0;
    const size_t n_msgs = read_saved(save_path, msgs, 8, &saved_tokens, &n_saved);
    CHECK(n_msgs == 4, "the saved conversation has %zu messages, not 4", n_msgs);
    if (model && n_msgs == 4) {
        CHECK(!strcmp(msgs[0].role, "user") && !strcmp(msgs[0].content, q1) && !strcmp(msgs[1].role, "assistant") &&
                  !strcmp(msgs[2].content, q2),
              "saved messages are not the conversation");
        char *r1 = render(model, msgs, 1), *r2 = render(model, msgs, 3);
        CHECK(r1 && r2, "rendering failed: %s", ember_last_error());
        if (r1 && r2) {
            CHECK(strstr(r1, "<|im_start|>user\n") != NULL, "no ChatML fallback: %s", r1);
            size_t t1 = 0, t2 = 0, th = 0;
            ember_token *k1 = tokenize(model, r1, &t1), *k2 = tokenize(model, r2, &t2);
            /* What the session holds before turn 2: the first rendering, then the reply as generated.
             * (Greedy output of this model is the tokenizer's own spelling of its text, so tokenizing
             * the two together gives those tokens.) */
            char *held = malloc(strlen(r1) + strlen(msgs[1].content) + 1);
            strcpy(held, r1);
            strcat(held, msgs[1].content);
            ember_token *kh = tokenize(model, held, &th);
            size_t common = 0;
            while (common < t2 && common < th && k2[common] == kh[common]) ++common;
            printf("expected: turn 1 %zu new; turn 2 %zu new, %zu reused (rendering %zu tokens, first turn %zu)\n", t1,
                   t2 - common, common, t2, t1);
            CHECK(n1 == t1 && m1 == 0, "turn 1 prefilled %zu (reused %zu), expected %zu (0)", n1, m1, t1);
            CHECK(m2 == common && n2 == t2 - common, "turn 2 prefilled %zu, reused %zu; expected %zu, %zu", n2, m2,
                  t2 - common, common);
            CHECK(m2 > t1, "turn 2 reused %zu tokens: not even the first turn's %zu and its reply", m2, t1);
            /* The session's mirror in the save file begins with turn 2's rendering. */
            CHECK(n_saved > t2 && memcmp(saved_tokens, k2, t2 * sizeof *k2) == 0,
                  "the saved tokens do not start with the second rendering (%zu saved)", n_saved);
            free(k1);
            free(k2);
            free(kh);
            free(held);
        }
        free(r1);
        free(r2);
        for (size_t i = 0; i < n_msgs; ++i) {
            free((char *)msgs[i].role);
            free((char *)msgs[i].content);
        }
    }
    free(saved_tokens);
    ember_model_free(model);

    /* ---- 2. /load in a new process, the same third turn ---- */
    child b = spawn(args);
    CHECK(read_until(&b, 0, "> ", 15) >= 0, "no first prompt");
    const size_t sl = b.len;
    send_line(&b, load_cmd);
    CHECK(read_until(&b, sl, "\n> ", 15) >= 0 && strstr(b.buf + sl, "(loaded 4 messages"), "/load: %s", b.buf + sl);
    long e3b;
    const size_t s3b = turn(&b, q3, &e3b);
    char *turn3_b = e3b >= 0 ? strndup(b.buf + s3b, (size_t)e3b - s3b) : strdup("");
    CHECK(strcmp(turn3_a, turn3_b) == 0, "after /load the turn differs:\n--- continuous:\n%s\n--- loaded:\n%s", turn3_a,
          turn3_b);
    printf("turn 3, continuous and after /load:\n%s\n", turn3_b);
    send_line(&b, "/quit");
    CHECK(finish(&b, 10) == 0, "ember-chat did not quit cleanly after /load");
    free(turn3_a);
    free(turn3_b);

    /* ---- 3. Ctrl-C ---- */
    char *const long_args[] = {argv[1], "-m", model_path, "--temp", "1", "--seed", "7", "-n", "2000", "-c", "2048",
                               "-t", "1", "--verbose", NULL};
    child c = spawn(long_args);
    CHECK(read_until(&c, 0, "> ", 15) >= 0, "no first prompt");
    /* Wait for the reply to be under way (the prefill line, then some text), then interrupt it. A
     * sampled reply that ends by itself first (a CPU whose arithmetic rounds differently can draw
     * other tokens) is no failure: the next prompt is tried. */
    const char *const prompts[] = {"Once upon a time there was a little girl named Lily. Tell me a long story about her day.",
                                   "Tell me a long story about a dragon and a boat.",
                                   "Tell me the longest story you know."};
    size_t sc = 0;
    bool interrupted = false;
    long pre = -1, mid = -1;
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0] && !interrupted; ++i) {
        sc = c.len;
        send_line(&c, prompts[i]);
        pre = read_until(&c, sc, "reused", 15);
        mid = pre >= 0 ? read_until(&c, (size_t)pre + 40, " ", 15) : -1;
        if (mid < 0) break;
        if (strstr(c.buf + sc, "\n> ")) continue; /* it ended already */
        kill(c.pid, SIGINT);
        interrupted = true;
    }
    CHECK(interrupted, "no reply ran long enough to be interrupted:\n%s", c.buf);
    const long ec = read_until(&c, sc, "\n> ", 15);
    CHECK(ec >= 0 && strstr(c.buf + sc, "[cancelled]"), "no cancel notice and prompt after Ctrl-C:\n%s", c.buf + sc);
    /* The process is alive and answers the next turn. */
    const size_t sn = c.len;
    send_line(&c, "Thank you!");
    pre = read_until(&c, sn, "reused", 15);
    mid = pre >= 0 ? read_until(&c, (size_t)pre + 40, " ", 15) : -1;
    size_t nn = 0, mn = 0;
    CHECK(mid >= 0 && prefill_counts(&c, sn, mid, &nn, &mn) && mn > 0, "no answer to the turn after Ctrl-C:\n%s",
          c.buf + sn);
    /* Stop this reply too if it still runs (had it just ended, this Ctrl-C lands at the prompt and
     * quits, which the last check accepts as well). */
    if (!strstr(c.buf + sn, "\n> ")) {
        kill(c.pid, SIGINT);
        read_until(&c, sn, "\n> ", 15);
    }
    printf("Ctrl-C transcript:\n%s\n", c.buf + sc);
    kill(c.pid, SIGINT); /* at the prompt: quits */
    CHECK(finish(&c, 10) == 0, "Ctrl-C at the prompt did not quit cleanly");

    /* ---- 4. A conversation that outgrows the context ---- */
    /* Default (slide): the oldest turns go, saying so, and every turn is answered. */
    char *const small_args[] = {argv[1], "-m", model_path, "--temp", "0", "-n", "16", "-c", "96", "-t", "1", NULL};
    child d = spawn(small_args);
    CHECK(read_until(&d, 0, "> ", 15) >= 0 && strstr(d.buf, "context 96 tokens (trained: 256"), "no context line:\n%s", d.buf);
    for (int i = 0; i < 6; ++i) {
        long ed;
        turn(&d, "Tell me about the cat.", &ed);
        CHECK(ed >= 0, "turn %d of the sliding chat got no prompt back:\n%s", i, d.buf);
    }
    CHECK(strstr(d.buf, "(context: the oldest 2 messages were dropped to fit the 96-token context") != NULL,
          "the sliding chat never said it dropped turns:\n%s", d.buf);
    CHECK(strstr(d.buf, "the context holds") == NULL && strstr(d.buf, "context is full") == NULL,
          "the sliding chat refused a turn:\n%s", d.buf);
    send_line(&d, "/quit");
    CHECK(finish(&d, 10) == 0, "the sliding chat did not quit cleanly");
    /* --context-policy stop: a turn that does not fit is refused with a message that says what to do. */
    char *const stop_args[] = {argv[1], "-m", model_path, "--temp", "0", "-n", "16", "-c", "96", "-t", "1",
                               "--context-policy", "stop", NULL};
    child e = spawn(stop_args);
    CHECK(read_until(&e, 0, "> ", 15) >= 0, "no first prompt (stop policy)");
    for (int i = 0; i < 6; ++i) {
        long ee;
        turn(&e, "Tell me about the cat.", &ee);
        CHECK(ee >= 0, "turn %d of the stopping chat got no prompt back:\n%s", i, e.buf);
    }
    CHECK(strstr(e.buf, "--context-policy slide") != NULL, "no message when the context filled up:\n%s", e.buf);
    send_line(&e, "/quit");
    CHECK(finish(&e, 10) == 0, "the stopping chat did not quit cleanly");

    unlink(save_path);
    char spath[300];
    snprintf(spath, sizeof spath, "%s.session", save_path);
    unlink(spath);
    rmdir(tmpdir);
    printf("%s in %.1f s\n", g_failures ? "FAILED" : "PASSED", now_s() - t0);
    return g_failures ? 1 : 0;
}
