// session_state.cpp — saving a session's state (tokens, KV rows, last logits) to bytes and back.
//
// Format, version 4, little-endian:
//   "EMBERSES"  u32 version  u32 header_bytes (48)  u64 model fingerprint
//   u32 n_tokens  u32 n_vocab  u32 kv_bytes_per_token  u32 has_logits  u32 kv_type (GGUF type id)  u32 flags
//   i32 tokens[n_tokens]  KV rows [n_tokens * kv_bytes_per_token]  f32 logits[n_vocab] if has_logits
//   u32 state_floats  f32 state[state_floats]   (the recurrent layers' state after the last token; 0 floats
//                                                for a model without recurrent layers)
//   u64 checksum of every byte before it
// Version 3 is version 4 without the state part: such states still restore into models without
// recurrent layers; a model with them refuses one (its state is not there).
// The fingerprint covers every weight (model_fingerprint.hpp). Versions 1 and 2 (ember 0.4 and before)
// had the same layout with a fingerprint of the shapes and the first 4 KiB of the embeddings, which let
// a state of one model restore into a modified copy of it; they are refused with a message saying so
// (such a state is a cache: feeding its tokens again rebuilds it).
// flags, bit 0: the keys were rotated with LongRoPE's long factors (a session whose context exceeds the
// model's rope.scaling.original_context_length, model.hpp uses_long). Keys rotated with one set of factors
// read with the other would give wrong attention without any error, so such a state restores only into a
// session that uses the same set. Other bits are 0 (states written before the flag had 0 there: short
// factors, which is what a session of such a file used unless its context passed the original length).
// The KV rows are in the backend's read_kv layout, whose rows have the format every backend
// shares (backend.hpp), so a state saved on one backend restores on another with the same cache type.
// Everything is validated before the session is touched: a truncated, corrupted, older, newer or foreign
// state is an error (EMBER_ERR_CORRUPT_DATA) and the session keeps what it had.
#include "session/session.hpp"

#include "core/error.hpp"
#include "session/model_fingerprint.hpp"
#include "session/state_checksum.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ember {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'S', 'E', 'S'};
constexpr uint32_t kVersion = 4;
constexpr uint32_t kVersionNoState = 3;
constexpr uint32_t kHeaderBytes = 48;
constexpr size_t kVersionEnd = 12;   // magic and version: enough to tell what the bytes are
constexpr uint32_t kFlagLongRope = 1u;

template <class T>
void put(std::vector<uint8_t> &out, T v) {
    const auto *p = reinterpret_cast<const uint8_t *>(&v);
    out.insert(out.end(), p, p + sizeof v);
}

template <class T>
T get(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

std::vector<uint8_t> Session::save() {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    ensure_window();
    const uint32_t n = position();
    const size_t kv_tok = kv_->ctx->kv_bytes_per_token();
    // Built from the magic rather than inserting it into an empty reserved vector: GCC 12 misreads that
    // insert as an 8-byte write into a smaller region (-Wstringop-overflow, -Warray-bounds).
    std::vector<uint8_t> out(kMagic, kMagic + 8);
    out.reserve(kHeaderBytes + n * (4 + kv_tok) + logits_.size() * 4 + 8);
    put<uint32_t>(out, kVersion);
    put<uint32_t>(out, kHeaderBytes);
    put<uint64_t>(out, fingerprint_->get(model_));
    put<uint32_t>(out, n);
    put<uint32_t>(out, n_vocab());
    put<uint32_t>(out, static_cast<uint32_t>(kv_tok));
    put<uint32_t>(out, logits_valid_ ? 1 : 0);
    put<uint32_t>(out, static_cast<uint32_t>(kv_type_));
    put<uint32_t>(out, model_.uses_long(n_ctx_) ? kFlagLongRope : 0u);
    for (int32_t t : seq_->tokens()) put<int32_t>(out, t);
    const size_t at = out.size();
    out.resize(at + n * kv_tok);
    kv_->ctx->read_kv(io_table(*seq_, win_.get(), n).data(), n, out.data() + at);
    if (logits_valid_)
        out.insert(out.end(), reinterpret_cast<const uint8_t *>(logits_.data()),
                   reinterpret_cast<const uint8_t *>(logits_.data() + logits_.size()));
    const size_t sb = state_bytes(model_.desc().c);
    put<uint32_t>(out, static_cast<uint32_t>(sb / sizeof(float)));
    if (sb > 0) {
        const size_t at_state = out.size();
        out.resize(at_state + sb, 0);   // position 0: the zero state
        if (n > 0) {
            std::vector<float> st(sb / sizeof(float));
            kv_->ctx->read_state(cur_state_, st.data());
            std::memcpy(out.data() + at_state, st.data(), sb);
        }
    }
    put<uint64_t>(out, state_checksum(out.data(), out.size()));
    return out;
}

uint32_t Session::check_state_header(const uint8_t *data, size_t size) const {
    auto corrupt = [](const char *why) { fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: %s", why); };
    if (size < kVersionEnd) corrupt("it is shorter than a header");
    if (std::memcmp(data, kMagic, 8) != 0) corrupt("bad magic (not a saved ember session)");
    const uint32_t version = get<uint32_t>(data + 8);
    if (version == 1 || version == 2)
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: it has format version %u (ember 0.4 or before), whose "
             "model fingerprint does not cover the weights, so it cannot be checked against this model; feed its tokens "
             "again and save a new one", version);
    if (version != kVersion && version != kVersionNoState)
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state has format version %u; this build reads versions %u and %u",
             version, kVersionNoState, kVersion);
    const uint64_t sb = state_bytes(model_.desc().c);
    if (version == kVersionNoState && sb > 0)
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: it has format version %u, which has no place for "
             "the recurrent state this model's layers keep", version);
    const uint32_t header = kHeaderBytes;
    if (size < header + 8) corrupt("it is shorter than a header");
    if (get<uint32_t>(data + 12) != header) corrupt("unexpected header size");
    if (get<uint64_t>(data + 16) != fingerprint_->get(model_)) corrupt("it was saved from a different model");
    const uint32_t n = get<uint32_t>(data + 24), nv = get<uint32_t>(data + 28), kv_tok = get<uint32_t>(data + 32);
    const bool has_logits = get<uint32_t>(data + 36) != 0;
    const uint32_t kv_type = get<uint32_t>(data + 40);
    if (kv_type != static_cast<uint32_t>(kv_type_))
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state has a %s KV cache; this session's is %s", dtype_name(kv_type),
             dtype_name(kv_type_));
    if (nv != n_vocab() || kv_tok != kv_->ctx->kv_bytes_per_token()) corrupt("vocabulary or cache layout differs");
    const uint32_t flags = get<uint32_t>(data + 44);
    if (flags & ~kFlagLongRope) corrupt("unknown flags in its header");
    const bool saved_long = (flags & kFlagLongRope) != 0, long_here = model_.uses_long(n_ctx_);
    if (saved_long && model_.n_ctx_orig() == 0) corrupt("its flags name LongRoPE factors, which this model has not");
    if (saved_long != long_here)
        fail(EMBER_ERR_INVALID_ARGUMENT,
             "saved session state was made with LongRoPE's %s rope factors (a context %s the model's original %u); "
             "this session's context of %u uses the %s ones: restore it into a session whose context is %s %u",
             saved_long ? "long" : "short", saved_long ? "above" : "within", model_.n_ctx_orig(), n_ctx_,
             long_here ? "long" : "short", saved_long ? "above" : "at most", model_.n_ctx_orig());
    const uint64_t expect = uint64_t{header} + uint64_t{n} * (4 + kv_tok) + (has_logits ? uint64_t{nv} * 4 : 0) +
                            (version == kVersion ? 4 + sb : 0) + 8;
    if (expect != size) corrupt("its length does not match its header");
    if (n > n_ctx_) fail(EMBER_ERR_CONTEXT_FULL, "the saved state has %u tokens; this session holds %u", n, n_ctx_);
    return header;
}

void Session::restore(const uint8_t *data, size_t size) {
    // Short, foreign or of another version: check_state_header says which (before the checksum: no pass
    // over a large foreign buffer).
    if (size < kHeaderBytes + 8 || std::memcmp(data, kMagic, 8) != 0 ||
        (get<uint32_t>(data + 8) != kVersion && get<uint32_t>(data + 8) != kVersionNoState))
        check_state_header(data, size);
    // The checksum before the fields, so that a corrupted header is reported as corruption, not as what
    // it now says.
    if (get<uint64_t>(data + size - 8) != state_checksum(data, size - 8))
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: checksum mismatch (truncated or corrupted)");
    std::lock_guard<std::mutex> lock(kv_->mutex);
    const uint32_t header = check_state_header(data, size);
    const uint32_t n = get<uint32_t>(data + 24), nv = get<uint32_t>(data + 28), kv_tok = get<uint32_t>(data + 32);
    const bool has_logits = get<uint32_t>(data + 36) != 0;
    auto corrupt = [](const char *why) { fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: %s", why); };
    const uint8_t *tokens = data + header;
    const size_t sb = state_bytes(model_.desc().c);
    const uint8_t *state = tokens + 4ull * n + uint64_t{n} * kv_tok + (has_logits ? 4ull * nv : 0);
    if (get<uint32_t>(data + 8) == kVersion && get<uint32_t>(state) != sb / sizeof(float))
        corrupt("its recurrent state is not of this model's size");
    state += 4;
    for (uint32_t i = 0; i < n; ++i) {
        const int32_t t = get<int32_t>(tokens + 4 * i);
        if (t < 0 || static_cast<uint32_t>(t) >= nv) corrupt("a token is outside the vocabulary");
    }

    // Valid. A cache shared with forks may be short of blocks: check before dropping the old state, so
    // that the session is unchanged then. What this session alone holds comes back when its state goes.
    uint32_t available = kv_->pool->n_free();
    for (int32_t b : seq_->blocks()) available += kv_->pool->refcount(b) == 1 ? 1 : 0;
    if ((n + kv::kBlockSize - 1) / kv::kBlockSize > available)
        fail(EMBER_ERR_OUT_OF_MEMORY,
             "the KV cache this session shares with its forks has too few free blocks for %u restored tokens", n);
    if (win_) {   // the same for the window layers' pool, of which only the last window comes back
        uint32_t wavailable = kv_->window_pool->n_free();
        for (int32_t b : win_->blocks()) wavailable += b >= 0 && kv_->window_pool->refcount(b) == 1 ? 1 : 0;
        kv::WindowTable probe(*kv_->window_pool, kv_->window, kv_->window_keep);
        const uint32_t bs = kv::kBlockSize;
        if ((n + bs - 1) / bs - probe.first_needed(n) / bs > wavailable)
            fail(EMBER_ERR_OUT_OF_MEMORY,
                 "the window layers' KV blocks this session shares with its forks are too few for %u restored tokens", n);
    }
    std::vector<int32_t> ids(n);  // before the old state goes: out of memory here leaves it in place
    if (n) std::memcpy(ids.data(), tokens, 4ull * n);  // (an empty vector's data() may be NULL)
    seq_->clear();
    if (win_) win_->clear();
    window_stale_ = false;
    kv::KvSequence restored(*kv_->pool);
    if (!restored.reserve(n, copy_fn())) fail(EMBER_ERR_INTERNAL, "KV blocks exhausted restoring %u tokens", n);
    std::unique_ptr<kv::WindowTable> rwin;
    if (win_) {
        rwin = std::make_unique<kv::WindowTable>(*kv_->window_pool, kv_->window, kv_->window_keep);
        if (!rwin->restore(n)) fail(EMBER_ERR_INTERNAL, "window KV blocks exhausted restoring %u tokens", n);
    }
    kv_->ctx->write_kv(io_table(restored, rwin.get(), n).data(), n, tokens + 4ull * n);
    if (sb > 0) {
        std::vector<float> st(sb / sizeof(float));
        std::memcpy(st.data(), state, sb);
        kv_->ctx->write_state(cur_state_, st.data());
        checkpoint_ = -1;
        n_kept_ = 0;
    }
    restored.commit(ids.data(), n);
    *seq_ = std::move(restored);
    if (win_) *win_ = std::move(*rwin);
    forget_hidden(0);   // a saved state carries no hidden rows: they are recorded again from here on
    hidden_start_ = position();
    utf8_.reset();
    logits_valid_ = false;
    if (has_logits) {
        std::memcpy(logits_.data(), tokens + 4ull * n + uint64_t{n} * kv_tok, 4ull * nv);
        logits_valid_ = true;
    }
}

namespace {
// Closes a file descriptor on every path out.
struct Fd {
    int fd;
    ~Fd() { if (fd >= 0) ::close(fd); }
};

// Reads exactly n bytes at offset `at` (EINTR and short reads retried); false at an early end of file.
bool read_at(int fd, uint8_t *out, size_t n, off_t at) {
    while (n) {
        const ssize_t r = ::pread(fd, out, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail(EMBER_ERR_IO, "cannot read: %s", std::strerror(errno));
        if (r == 0) return false;
        out += r, n -= static_cast<size_t>(r), at += r;
    }
    return true;
}
} // namespace

void Session::restore_file(const char *path) {
    const Fd f{::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)};   // O_NONBLOCK: a FIFO does not hang open()
    if (f.fd < 0) fail(EMBER_ERR_IO, "cannot open '%s': %s", path, std::strerror(errno));
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(EMBER_ERR_IO, "cannot stat '%s': %s", path, std::strerror(errno));
    // A directory, a device (/dev/zero never ends) or a FIFO is no saved state.
    if (!S_ISREG(st.st_mode)) fail(EMBER_ERR_IO, "'%s' is not a regular file", path);
    const size_t size = static_cast<size_t>(st.st_size);
    uint8_t head[kHeaderBytes];
    const size_t head_len = std::min<size_t>(size, sizeof head);
    if (!read_at(f.fd, head, head_len, 0)) fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: '%s' shrank while read", path);
    {
        std::lock_guard<std::mutex> lock(kv_->mutex);
        check_state_header(head, size);   // the whole file is read only when its header fits this session
    }
    std::vector<uint8_t> bytes(size);
    if (!read_at(f.fd, bytes.data(), size, 0))
        fail(EMBER_ERR_CORRUPT_DATA, "saved session state rejected: '%s' shrank while read", path);
    restore(bytes.data(), size);
}

} // namespace ember
