// cmd_perplexity.cpp — `ember perplexity`: how well a model predicts a text, and how much a cheaper
// KV cache changes that.
//
// The text is tokenized (no BOS) and cut into windows of c - 1 tokens; each window is evaluated from BOS
// one token at a time, so every prediction reads the KV cache the way decoding does, and token i + 1 is
// scored from the logits after token i. Perplexity = exp(mean negative log-likelihood) over all scored
// tokens. With --compare-kv T, a second session with cache type T runs in lockstep on the same tokens
// and the output adds its perplexity, the top-1 agreement of the two (fraction of positions whose argmax
// is the same) and the mean KL divergence KL(reference || tested) of their next-token distributions.
#include "cli.hpp"
#include "progress.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace cli {

namespace {

// log-softmax statistics of one logit row, in double.
struct Dist {
    std::vector<double> logp;
    size_t argmax = 0;
    void set(const float *logits, size_t n) {
        logp.resize(n);
        double m = -INFINITY;
        for (size_t i = 0; i < n; ++i)
            if (logits[i] > m) m = logits[i], argmax = i;
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += std::exp(logits[i] - m);
        const double lse = m + std::log(sum);
        for (size_t i = 0; i < n; ++i) logp[i] = logits[i] - lse;
    }
};

bool logits_of(ember_session *s, Dist &d) {
    const float *l = nullptr;
    size_t n = 0;
    const ember_status st = ember_session_logits(s, &l, &n);
    if (st != EMBER_OK) return fail("logits", st), false;
    d.set(l, n);
    return true;
}

} // namespace

int cmd_perplexity(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, {"-m", "--model", "-f", "-c", "-t", "--backend", "--kv-type", "--compare-kv", "--max-tokens", "--precision", EMBER_CLI_PLACEMENT_OPTIONS}, {});
    const std::string model_path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    const std::string text_path = a.str("-f", "");
    if (model_path.empty() || text_path.empty()) return usage_error("perplexity: -m MODEL and -f TEXT_FILE are required (a text to try with the stories "
                                                                   "models: bench/data/heldout-stories.txt)");
    ember_kv_type type = EMBER_KV_F16, ref_type = EMBER_KV_F16;
    if (!kv_type_option(a, "--kv-type", &type) || !kv_type_option(a, "--compare-kv", &ref_type)) return 2;
    std::ifstream f(text_path, std::ios::binary);
    if (!f) return usage_error("perplexity: cannot read '" + text_path + "'");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());

    ember_model *model = load_model(model_path, false, true);
    if (!model) return 1;
    std::vector<ember_token> tokens;
    if (!tokenize(model, text, 0, tokens)) return ember_model_free(model), 1;
    const long max_tokens = a.integer("--max-tokens", 0);
    if (max_tokens > 0 && tokens.size() > static_cast<size_t>(max_tokens)) tokens.resize(static_cast<size_t>(max_tokens));

    // Sessions: the tested cache type, and the reference one when comparing.
    Args sa = a;
    if (!a.has("-c")) sa.opts["-c"] = "256";
    ember_session *s = create_session(model, sa);
    ember_session *ref = nullptr;
    bool ok = s != nullptr;
    if (ok && a.has("--compare-kv")) {
        Args ra = sa;
        ra.opts["--kv-type"] = kv_type_name(ref_type);
        ok = (ref = create_session(model, ra)) != nullptr;
    }
    uint32_t n_ctx = 0;
    if (ok) ember_session_context_length(s, &n_ctx);
    const ember_token bos = ember_token_bos(model);
    if (ok && (n_ctx < 2 || bos < 0)) ok = (usage_error("perplexity: needs a context of >= 2 and a model with BOS"), false);

    double nll = 0, ref_nll = 0, kl = 0;
    size_t scored = 0, agree = 0, windows = 0;
    Dist d, rd;
    const size_t window = n_ctx - 1;
    // Token by token is slow (stories15M: about 10 ms a token on 2 cores): show where it is.
    Progress progress("perplexity");
    const size_t n_windows = window ? (tokens.size() + window - 2) / window : 0;
    char detail[64];
    for (size_t w0 = 0; ok && w0 + 1 < tokens.size(); w0 += window, ++windows) {
        const size_t n = std::min(window, tokens.size() - w0);
        for (ember_session *x : {s, ref})
            if (x && (ember_session_truncate(x, 0) != EMBER_OK || ember_session_feed(x, &bos, 1) != EMBER_OK))
                ok = (fail("feed", EMBER_ERR_INTERNAL), false);
        for (size_t i = 0; ok && i < n; ++i) {
            const ember_token target = tokens[w0 + i];
            if (progress.enabled()) {
                std::snprintf(detail, sizeof detail, "window %zu/%zu", windows + 1, n_windows);
                progress.update(static_cast<double>(w0 + i) / static_cast<double>(tokens.size()), detail);
            }
            if (!logits_of(s, d) || (ref && !logits_of(ref, rd))) { ok = false; break; }
            if (i > 0) {  // the first token of a window is predicted from BOS alone: skip it, as is usual
                nll -= d.logp[static_cast<size_t>(target)];
                if (ref) {
                    ref_nll -= rd.logp[static_cast<size_t>(target)];
                    agree += d.argmax == rd.argmax;
                    double k = 0;
                    for (size_t v = 0; v < d.logp.size(); ++v) k += std::exp(rd.logp[v]) * (rd.logp[v] - d.logp[v]);
                    kl += k;
                }
                ++scored;
            }
            for (ember_session *x : {s, ref}) {
                if (!x) continue;
                const ember_status st = ember_session_feed(x, &target, 1);
                if (st != EMBER_OK) { ok = (fail("feed", st), false); break; }
            }
        }
    }
    if (ok && scored == 0) ok = (usage_error("perplexity: the text has too few tokens"), false);
    if (ok) {
        std::printf("{\"model\":\"%s\",\"text\":\"%s\",\"context\":%u,\"windows\":%zu,\"tokens_scored\":%zu,"
                    "\"kv_type\":\"%s\",\"ppl\":%.4f",
                    model_path.c_str(), text_path.c_str(), n_ctx, windows, scored, kv_type_name(type),
                    std::exp(nll / static_cast<double>(scored)));
        if (ref)
            std::printf(",\"ref_kv_type\":\"%s\",\"ref_ppl\":%.4f,\"top1_agreement\":%.4f,\"mean_kl\":%.6f",
                        kv_type_name(ref_type), std::exp(ref_nll / static_cast<double>(scored)),
                        static_cast<double>(agree) / static_cast<double>(scored), kl / static_cast<double>(scored));
        std::printf("}\n");
    }
    ember_session_free(s);
    ember_session_free(ref);
    ember_model_free(model);
    return ok ? 0 : 1;
}

} // namespace cli
