/* test_cli.c — the ember CLI as a user runs it: the golden story, token ids as JSON, the bench JSON line,
 * perplexity with both cache types, and errors as a message and a non-zero exit, never a signal. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *cli(void) {
    const char *p = getenv("EMBER_CLI");
    if (!p || !*p) {
        printf("SKIP: EMBER_CLI is not set (run under ctest)\n");
        exit(EMBER_TEST_SKIP);
    }
    return p;
}

/* Runs a shell command, captures stdout (and stderr when merge_stderr), returns the exit status; fails
 * the test if the process died from a signal. */
static int run(const char *cmd, char *out, size_t cap, int merge_stderr) {
    char full[8192];
    snprintf(full, sizeof full, "%s%s", cmd, merge_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    assert_false(WIFSIGNALED(st));
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static const char *model15(void) {
    static char buf[4096];
    const char *p = test_repo_model("stories15M-q8_0.gguf");
    test_require(p, "models/stories15M-q8_0.gguf");
    snprintf(buf, sizeof buf, "%s", p);
    return buf;
}

static void test_run_golden(void **state) {
    (void)state;
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 40 --temp 0", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    const char *want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                       "sunshine. One day, she saw a big, red ball in the sky. It";
    if (strncmp(out, want, strlen(want)) != 0) fprintf(stderr, "got: %s\n", out);
    assert_int_equal(strncmp(out, want, strlen(want)), 0);
}

/* run --tools: the prompt rendered with the tools by a Qwen3 template, the reply constrained to a call
 * of the named tool, printed as a JSON line; a template without tool support is refused, naming why. */
static void test_run_tools(void **state) {
    (void)state;
    const char *src = getenv("EMBER_SOURCE_DIR");
    if (!src) src = ".";
    char tools[4096], cmd[16384], out[16384];
    snprintf(tools, sizeof tools, "%s/tests/data/cli_tools.json", src);
    snprintf(cmd, sizeof cmd,
             "'%s' run -m '%s' -p 'Greet the knight.' --tools '%s' --tool-choice say --chat-template "
             "'%s/tests/data/chat_templates/Qwen3-0.6B.jinja' -c 512 -n 120 --seed 4",
             cli(), model15(), tools, src);
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    const char *call = strstr(out, "\n{\"id\": \"");
    if (!call || !strstr(call, "\"name\": \"say\", \"arguments\": {\"text\":")) fprintf(stderr, "got: %s\n", out);
    assert_non_null(call);
    assert_non_null(strstr(call, "\"name\": \"say\", \"arguments\": {\"text\":"));
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Hi' --tools '%s' --tool-choice required", cli(), model15(), tools);
    assert_int_not_equal(run(cmd, out, sizeof out, 1), 0);
    assert_non_null(strstr(out, "no tool support"));
}

static void test_tokenize(void **state) {
    (void)state;
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' 'Once upon a time'", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_string_equal(out, "[1, 9038, 2501, 263, 931]\n");
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' --no-bos 'Once upon a time'", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_string_equal(out, "[9038, 2501, 263, 931]\n");
    /* Special tokens are text unless --special. */
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' --no-bos --special '<s>Hi'", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_int_equal(strncmp(out, "[1, ", 4), 0);
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' --no-bos '<s>Hi'", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_null(strstr(out, "[1,"));
    /* Vocab-only files of other architectures tokenize too. */
    const char *vocab = test_shared_model("ggml-vocab/ggml-vocab-qwen2.gguf");
    if (vocab) {
        snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' 'Hello world'", cli(), vocab);
        assert_int_equal(run(cmd, out, sizeof out, 0), 0);
        assert_string_equal(out, "[9707, 1879]\n");
    }
}

/* Copies the GGUF file `src` to a new temporary file (`tmpl`, a mkstemp template, receives its name) with
 * the string value of metadata `key` replaced by `value`, which must have the old value's length (so no
 * offset in the file moves). Fails the test when the key is absent or its value has another length. */
static void copy_with_string(const char *src, char *tmpl, const char *key, const char *value) {
    FILE *in = fopen(src, "rb");
    assert_non_null(in);
    fseek(in, 0, SEEK_END);
    const long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)size, in), (size_t)size);
    fclose(in);
    /* A key is its u64 length then its bytes; a string value follows as type 8, u64 length, bytes. */
    const uint64_t klen = strlen(key), vlen = strlen(value);
    unsigned char pat[8 + 256];
    memcpy(pat, &klen, 8);
    memcpy(pat + 8, key, klen);
    int done = 0;
    for (long i = 0; i + 8 + (long)klen + 12 + (long)vlen <= size && !done; ++i) {
        if (memcmp(b + i, pat, 8 + klen) != 0) continue;
        unsigned char *v = b + i + 8 + klen;
        uint32_t type;
        uint64_t len;
        memcpy(&type, v, 4);
        memcpy(&len, v + 4, 8);
        assert_int_equal(type, 8);
        assert_int_equal(len, vlen);
        memcpy(v + 12, value, vlen);
        done = 1;
    }
    assert_true(done);
    const int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, (size_t)size), size);
    close(fd);
    free(b);
}

/* `ember info -m PATH` into out; it must exit 0 (a file it describes, whether or not it runs here). */
static void info_of(const char *path, char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' info -m '%s'", cli(), path);
    assert_int_equal(run(cmd, out, cap, 0), 0);
}

static void test_info_and_bench(void **state) {
    (void)state;
    char cmd[8192], out[65536];
    info_of(model15(), out, sizeof out);
    assert_non_null(strstr(out, "architecture:  llama"));
    assert_non_null(strstr(out, "Q8_0"));
    assert_non_null(strstr(out, "KV cache"));
    assert_non_null(strstr(out, "runs here:     yes (cpu, "));
    assert_non_null(strstr(out, "by type: F32 0.0% Q8_0 100.0%"));
    /* A file this build does not run (a vocabulary without weights): described, with the library's reason,
     * and an error (exit 1: the file lacks what its architecture needs, it is not merely unsupported). */
    const char *phi3 = test_shared_model("ggml-vocab/ggml-vocab-phi-3.gguf");
    if (phi3) {
        snprintf(cmd, sizeof cmd, "'%s' info -m '%s'", cli(), phi3);
        assert_int_equal(run(cmd, out, sizeof out, 0), 1);
        assert_non_null(strstr(out, "architecture:  phi3"));
        assert_non_null(strstr(out, "vocabulary:    32064 tokens (tokenizer llama"));
        assert_non_null(strstr(out, "runs here:     no: "));
    } else {
        printf("SKIP part: ../shared/models/ggml-vocab/ggml-vocab-phi-3.gguf absent\n");
    }
    /* A tokenizer this build does not know no longer hides what the file is: the weights' file with an
     * unknown tokenizer model is still llama, 24 M parameters of Q8_0, with the tokenizer's refusal. */
    char edited[] = "/tmp/ember_info_XXXXXX";
    copy_with_string(model15(), edited, "tokenizer.ggml.model", "bogus");
    info_of(edited, out, sizeof out);
    unlink(edited);
    assert_non_null(strstr(out, "architecture:  llama"));
    assert_non_null(strstr(out, "(tokenizer bogus)"));
    assert_non_null(strstr(out, "parameters:    24.4"));
    assert_non_null(strstr(out, "by type: F32 0.0% Q8_0 100.0%"));
    assert_non_null(strstr(out, "shape:         6 layers, embedding 288"));
    assert_non_null(strstr(out, "runs here:     no: "));
    assert_non_null(strstr(out, "'bogus'"));
    /* The same for an unknown pre-tokenizer (the vocabulary of Qwen2 with its pre-tokenizer renamed). */
    const char *qwen2 = test_shared_model("ggml-vocab/ggml-vocab-qwen2.gguf");
    if (qwen2) {
        char edited_pre[] = "/tmp/ember_info_XXXXXX";
        copy_with_string(qwen2, edited_pre, "tokenizer.ggml.pre", "nopre");
        info_of(edited_pre, out, sizeof out);
        unlink(edited_pre);
        assert_non_null(strstr(out, "architecture:  qwen2"));
        assert_non_null(strstr(out, "tokens (tokenizer gpt2, pre-tokenizer nopre)"));
        assert_non_null(strstr(out, "runs here:     no: "));
        assert_non_null(strstr(out, "unsupported pre-tokenizer 'nopre'"));
    } else {
        printf("SKIP part: ../shared/models/ggml-vocab/ggml-vocab-qwen2.gguf absent\n");
    }
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -t 1 -p 16 -n 4", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_non_null(strstr(out, "\"prefill_tok_s\":"));
    assert_non_null(strstr(out, "\"decode_tok_s\":"));
    assert_non_null(strstr(out, "\"load_s\":"));
    assert_non_null(strstr(out, "\"peak_rss_mb\":"));
    assert_int_equal(out[0], '{');
    /* With speculation the plain target runs in turn: greedy lookup decoding must give its tokens. */
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -t 1 -p 16 -n 12 --lookup --rounds 2", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_non_null(strstr(out, "\"rounds\":2"));
    assert_non_null(strstr(out, "\"baseline_decode_tok_s\":"));
    assert_non_null(strstr(out, "\"speedup\":"));
    assert_non_null(strstr(out, "\"same_tokens_as_baseline\":true"));
}

static double json_number(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("no %s in %s", key, json);
    return atof(p + strlen(pat));
}

/* Perplexity of stories15M on our held-out stories (bench/data) is that of a model that has learned
 * English stories (a broken forward pass gives hundreds or thousands), and the Q8_0 cache changes it
 * by well under a per cent, agreeing with f16 on the top token almost everywhere; the Q4_0 cache by a
 * few per cent. An unknown cache type is a usage error naming the three. */
static void test_perplexity(void **state) {
    (void)state;
    const char *src = getenv("EMBER_SOURCE_DIR");
    if (!src) src = ".";
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' perplexity -m '%s' -f '%s/bench/data/heldout-stories.txt' -c 128 --max-tokens 400 -t 2 "
             "--kv-type q8_0 --compare-kv f16",
             cli(), model15(), src);
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    const double ppl = json_number(out, "ppl"), ref = json_number(out, "ref_ppl");
    const double top1 = json_number(out, "top1_agreement"), kl = json_number(out, "mean_kl");
    printf("%s", out);
    assert_true(ppl > 2 && ppl < 20);
    assert_true(fabs(ppl - ref) < 0.01 * ref);
    assert_true(top1 > 0.9);
    assert_true(kl > 0 && kl < 0.01);
    /* The Q4_0 cache: a few per cent (3.5 % over the whole text, docs/benchmarks.md), top-1 agreement
     * near 90 %. */
    snprintf(cmd, sizeof cmd,
             "'%s' perplexity -m '%s' -f '%s/bench/data/heldout-stories.txt' -c 128 --max-tokens 400 -t 2 "
             "--kv-type q4_0 --compare-kv f16",
             cli(), model15(), src);
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    printf("%s", out);
    const double ppl4 = json_number(out, "ppl"), ref4 = json_number(out, "ref_ppl");
    assert_true(fabs(ref4 - ref) < 1e-3 * ref); /* the same f16 reference */
    assert_true(fabs(ppl4 - ref4) < 0.1 * ref4);
    assert_true(json_number(out, "top1_agreement") > 0.8);
    const double kl4 = json_number(out, "mean_kl");
    assert_true(kl4 > kl && kl4 < 0.1); /* further from f16 than Q8_0, still close */
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f /nonexistent.txt", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s' -f '%s/README.md' --kv-type q4", cli(), model15(), src);
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    assert_non_null(strstr(out, "f16, q8_0 or q4_0"));
}

/* ember-convert-llama2c turns the original fp32 stories15M checkpoint into an F32 GGUF that tells the
 * golden story, and refuses a file that is not a checkpoint. */
static void test_convert_llama2c(void **state) {
    (void)state;
    const char *conv = getenv("EMBER_CONVERT");
    const char *found = test_shared_model("stories15M/stories15M.bin");
    if (!conv || !found) {
        printf("SKIP part: %s absent\n", conv ? "../shared/models/stories15M/stories15M.bin" : "EMBER_CONVERT");
        return;
    }
    char bin[2048], cmd[12288], out[8192], gguf[] = "/tmp/ember_f32_XXXXXX";
    snprintf(bin, sizeof bin, "%s", found); /* the helper's buffer is reused by model15() */
    const int fd = mkstemp(gguf);
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", conv, bin, model15(), gguf);
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_non_null(strstr(out, "\"type\":\"F32\""));
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 40 --temp 0", cli(), gguf);
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    const char *want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                       "sunshine. One day, she saw a big, red ball in the sky. It";
    if (strncmp(out, want, strlen(want)) != 0) fprintf(stderr, "got: %s\n", out);
    assert_int_equal(strncmp(out, want, strlen(want)), 0);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", conv, model15(), model15(), gguf);
    assert_int_equal(run(cmd, out, sizeof out, 1), 1);
    unlink(gguf);
}

static void test_errors(void **state) {
    (void)state;
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' run -m /nonexistent.gguf -p hi", cli());
    assert_int_equal(run(cmd, out, sizeof out, 1), 1);
    assert_non_null(strstr(out, "/nonexistent.gguf"));
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi --bogus", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    assert_non_null(strstr(out, "--bogus"));
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi --top-p 7", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 1);
    assert_non_null(strstr(out, "top_p"));
    /* --mtp on a file without multi-token-prediction layers: refused, saying what is missing. */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi -n 4 --mtp", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 1);
    assert_non_null(strstr(out, "no multi-token-prediction layers"));
    snprintf(cmd, sizeof cmd, "'%s' frobnicate", cli());
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    /* A file that is not a model. */
    snprintf(cmd, sizeof cmd, "'%s' info -m '%s'", cli(), cli());
    assert_int_equal(run(cmd, out, sizeof out, 1), 1);
    assert_non_null(strstr(out, "magic"));
}

/* Every command explains itself: `ember help CMD` and `ember CMD --help` print its usage (exit 0), an
 * unknown one is a usage error (2). */
static void test_help(void **state) {
    (void)state;
    static const char *const cmds[] = {"run", "tokenize", "info", "bench", "perplexity", "version", "help"};
    char cmd[8192], out[16384], out2[16384], want[64];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
        snprintf(want, sizeof want, "usage: ember %s", cmds[i]);
        snprintf(cmd, sizeof cmd, "'%s' help %s", cli(), cmds[i]);
        assert_int_equal(run(cmd, out, sizeof out, 0), 0);
        assert_int_equal(strncmp(out, want, strlen(want)), 0);
        assert_non_null(strstr(out, "--verbose"));
        snprintf(cmd, sizeof cmd, "'%s' %s --help", cli(), cmds[i]);
        assert_int_equal(run(cmd, out2, sizeof out2, 0), 0);
        assert_string_equal(out, out2);
    }
    /* --help wins over missing required options. */
    snprintf(cmd, sizeof cmd, "'%s' run -h", cli());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_non_null(strstr(out, "usage: ember run"));
    snprintf(cmd, sizeof cmd, "'%s' help nosuch", cli());
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    assert_non_null(strstr(out, "unknown command 'nosuch'"));
    snprintf(cmd, sizeof cmd, "'%s' help", cli());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
        snprintf(want, sizeof want, "ember %s", cmds[i]);
        assert_non_null(strstr(out, want));
    }
}

/* -v shows the library's log (which backend `auto` took, and why) on stderr; --stats names the backend and
 * its real thread count; bench reports the threads it ran, never 0 for "default"; perplexity without a
 * text points to the one in bench/data. Progress bars stay off when stderr is not a terminal. */
static void test_verbose_stats_threads(void **state) {
    (void)state;
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "'%s' -v run -m '%s' -p 'Once upon a time' -n 4 --temp 0 -t 2 --backend cpu --stats",
             cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 0);
    assert_non_null(strstr(out, "ember[info]: loaded"));
    assert_non_null(strstr(out, "backend: cpu, 2 threads"));
    assert_null(strchr(out, '\r'));
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once upon a time' -n 4 --temp 0 --backend cpu", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 0);
    assert_null(strstr(out, "ember[info]"));
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 16 -n 4 --backend cpu", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    const double threads = json_number(out, "threads");
    assert_true(threads >= 1 && threads <= 8);
    assert_non_null(strstr(out, "\"backend\":\"cpu\""));
    /* With `auto`, bench names the backend the session ran on, as --stats does: a CUDA one where AUTO took
     * CUDA (the JSON once said "cpu" there), with its device. */
    char where[64] = "", want[96];
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'Once' -n 1 --temp 0 --stats", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 0);
    const char *b = strstr(out, "backend: ");
    assert_non_null(b);
    sscanf(b + strlen("backend: "), "%63[a-z]", where);
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 8 -n 2", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    snprintf(want, sizeof want, strcmp(where, "cpu") == 0 ? "\"backend\":\"%s\",\"threads\"" : "\"backend\":\"%s\",\"device\":\"",
             where);
    if (!strstr(out, want)) fail_msg("run --stats says %s; bench: %s", where, out);
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 16 -n 4 --parallel 2 -t 1", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 0), 0);
    assert_true(json_number(out, "threads") == 1);
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m '%s'", cli(), model15());
    assert_int_equal(run(cmd, out, sizeof out, 1), 2);
    assert_non_null(strstr(out, "bench/data/heldout-stories.txt"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_golden),
        cmocka_unit_test(test_tokenize),
        cmocka_unit_test(test_info_and_bench),
        cmocka_unit_test(test_perplexity),
        cmocka_unit_test(test_convert_llama2c),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_run_tools),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_verbose_stats_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
