package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unsafe"
)

// Token is a token id (ember_token).
type Token int32

// Version is the release string of the loaded library, e.g. "0.4.0".
func Version() string { return C.GoString(C.ember_version()) }

// LibraryABIVersion is the ABI generation of the loaded library; compare with ABIVersion.
func LibraryABIVersion() uint32 { return uint32(C.ember_abi_version()) }

// LoadOptions are the options of Load; nil means the defaults.
type LoadOptions struct {
	// VocabOnly loads only the metadata and tokenizer (no weights): it tokenizes but cannot run sessions.
	VocabOnly bool
	// MetadataOnly loads only the metadata and tensor table (ember_model_load_metadata): neither tokenizer
	// nor weights, so it describes a file whatever its architecture or tokenizer, but cannot tokenize
	// (ErrUnsupported) or run sessions. VocabOnly is then ignored.
	MetadataOnly bool
	// Progress, if set, is called with the load progress in [0, 1] on the loading goroutine; returning
	// false cancels the load (Load then fails with StatusCancelled).
	Progress func(progress float32) bool
	// Log, if set, receives this model's log messages instead of the SetLogger sink, from any thread
	// running the model's work (so it must be safe for concurrent use), until the model is closed.
	Log func(level LogLevel, message string)
}

// Model is a loaded GGUF model. It is immutable and safe for concurrent use by any number of
// goroutines and sessions. Close it after every Session and Engine created on it is closed.
type Model struct {
	mu       sync.RWMutex // read: any call; write: Close
	h        *C.ember_model
	children int        // open sessions and engines: Close refuses while there are any
	log      cgo.Handle // LoadOptions.Log, deleted when the model is freed (0: none)
}

// Load loads a GGUF model file. Errors: ErrIO (cannot open; the message names the path),
// ErrInvalidModel, ErrUnsupported, ErrCancelled (Progress returned false), ErrOutOfMemory.
func Load(path string, opts *LoadOptions) (*Model, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, argError("ember_model_load", "path contains a NUL byte")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var vocabOnly, metadataOnly C.bool
	var handle, logHandle cgo.Handle
	var call *progressCall
	if opts != nil {
		vocabOnly = C.bool(opts.VocabOnly)
		metadataOnly = C.bool(opts.MetadataOnly)
		if opts.Progress != nil {
			call = &progressCall{fn: opts.Progress}
			handle = cgo.NewHandle(call)
			defer handle.Delete()
		}
		if opts.Log != nil {
			logHandle = cgo.NewHandle(logFunc(opts.Log))
		}
	}
	var h *C.ember_model
	var msg *C.char
	st := C.eg_model_load(cpath, vocabOnly, metadataOnly, C.uintptr_t(handle), C.uintptr_t(logHandle), &h, &msg)
	if call != nil && call.panicked != nil {
		C.ember_model_free(h)
		C.free(unsafe.Pointer(msg))
		if logHandle != 0 {
			logHandle.Delete()
		}
		panic(call.panicked)
	}
	op := "ember_model_load"
	if metadataOnly {
		op = "ember_model_load_metadata"
	}
	if err := result(op, st, msg); err != nil {
		if logHandle != 0 {
			logHandle.Delete()
		}
		return nil, err
	}
	m := &Model{h: h, log: logHandle}
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

// Close frees the model. It is idempotent. It fails with ErrInvalidState while sessions or engines
// created on the model are still open (the C library requires them to be freed first).
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return nil
	}
	if m.children > 0 {
		return &Error{Status: StatusInvalidState, Op: "ember_model_free",
			Message: "sessions or engines on this model are still open"}
	}
	C.ember_model_free(m.h)
	m.h = nil
	if m.log != 0 {
		m.log.Delete() // nothing of the model's runs any more
		m.log = 0
	}
	runtime.SetFinalizer(m, nil)
	return nil
}

// use runs f with the C handle under the read lock (concurrent calls are fine; Close waits).
func (m *Model) use(op string, f func(h *C.ember_model) error) error {
	if m == nil {
		return argError(op, "model is nil")
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.h == nil {
		return closedError(op, "model")
	}
	return f(m.h)
}

// adopt/release count the sessions and engines that need the model to stay open.
func (m *Model) adopt(op string) (*C.ember_model, error) {
	if m == nil {
		return nil, argError(op, "model is nil")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return nil, closedError(op, "model")
	}
	m.children++
	return m.h, nil
}

func (m *Model) release() {
	m.mu.Lock()
	m.children--
	m.mu.Unlock()
}

// ModelInfo summarizes a model (ember_model_info).
type ModelInfo struct {
	Architecture    string // general.architecture, e.g. "llama"
	Name            string // general.name, or ""
	NParams         uint64 // number of weights (0 for a vocab-only load)
	SizeBytes       uint64 // bytes of tensor data in the file
	NCtxTrain       uint32
	NVocab          uint32
	NEmbd           uint32
	NLayer          uint32
	NHead           uint32
	NHeadKV         uint32
	KVBytesPerToken uint64 // KV-cache bytes one token of context takes (f16 cache)
	// Recurrent-state bytes one sequence carries whatever its length (hybrid models; 0 otherwise).
	StateBytesPerSequence uint64
	NKVLayers             uint32 // layers that keep KV rows
	NRecurrentLayers      uint32 // layers that carry a recurrent state instead
}

// Info describes the model.
func (m *Model) Info() (ModelInfo, error) {
	var info ModelInfo
	err := m.use("ember_model_get_info", func(h *C.ember_model) error {
		var ci C.ember_model_info
		C.ember_model_info_init(&ci)
		var msg *C.char
		if err := result("ember_model_get_info", C.eg_model_get_info(h, &ci, &msg), msg); err != nil {
			return err
		}
		info = ModelInfo{
			Architecture: C.GoString(ci.architecture), Name: C.GoString(ci.name),
			NParams: uint64(ci.n_params), SizeBytes: uint64(ci.size_bytes), NCtxTrain: uint32(ci.n_ctx_train),
			NVocab: uint32(ci.n_vocab), NEmbd: uint32(ci.n_embd), NLayer: uint32(ci.n_layer),
			NHead: uint32(ci.n_head), NHeadKV: uint32(ci.n_head_kv), KVBytesPerToken: uint64(ci.kv_bytes_per_token),
			StateBytesPerSequence: uint64(ci.state_bytes_per_sequence), NKVLayers: uint32(ci.n_kv_layers),
			NRecurrentLayers: uint32(ci.n_recurrent_layers),
		}
		return nil
	})
	return info, err
}

// Meta is a metadata value rendered as text. ErrNotFound if the key is absent.
func (m *Model) Meta(key string) (string, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return "", argError("ember_model_meta_string", "key contains a NUL byte")
	}
	var out string
	err := m.use("ember_model_meta_string", func(h *C.ember_model) error {
		ckey := C.CString(key)
		defer C.free(unsafe.Pointer(ckey))
		var n C.size_t
		var msg *C.char
		st := C.eg_model_meta_string(h, ckey, nil, 0, &n, &msg)
		if st != C.EMBER_ERR_BUFFER_TOO_SMALL {
			if err := result("ember_model_meta_string", st, msg); err != nil {
				return err
			}
		} else {
			C.free(unsafe.Pointer(msg))
		}
		buf := (*C.char)(C.malloc(n + 1))
		defer C.free(unsafe.Pointer(buf))
		if err := result("ember_model_meta_string", C.eg_model_meta_string(h, ckey, buf, n+1, &n, &msg), msg); err != nil {
			return err
		}
		out = C.GoStringN(buf, C.int(n))
		return nil
	})
	return out, err
}

// Tokenize turns text into token ids.
func (m *Model) Tokenize(text string, flags TokenizeFlags) ([]Token, error) {
	var toks []Token
	err := m.use("ember_tokenize", func(h *C.ember_model) error {
		// The text goes to C as a C copy: a Go string's bytes may not be passed where C expects char *.
		ctext := C.CString(text)
		defer C.free(unsafe.Pointer(ctext))
		n := C.size_t(len(text))
		var count C.size_t
		var msg *C.char
		st := C.eg_tokenize(h, ctext, n, C.uint32_t(flags), nil, 0, &count, &msg)
		if st == C.EMBER_ERR_BUFFER_TOO_SMALL {
			C.free(unsafe.Pointer(msg))
		} else if err := result("ember_tokenize", st, msg); err != nil {
			return err
		}
		toks = make([]Token, int(count))
		if count == 0 {
			return nil
		}
		st = C.eg_tokenize(h, ctext, n, C.uint32_t(flags), (*C.ember_token)(unsafe.Pointer(&toks[0])), count, &count, &msg)
		if err := result("ember_tokenize", st, msg); err != nil {
			return err
		}
		toks = toks[:int(count)]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return toks, nil
}

// Detokenize is the text of a token sequence (invalid UTF-8 replaced by U+FFFD).
func (m *Model) Detokenize(tokens []Token, flags DetokenizeFlags) (string, error) {
	var out string
	err := m.use("ember_detokenize", func(h *C.ember_model) error {
		var ptr *C.ember_token
		if len(tokens) > 0 {
			ptr = (*C.ember_token)(unsafe.Pointer(&tokens[0]))
		}
		var n C.size_t
		var msg *C.char
		st := C.eg_detokenize(h, ptr, C.size_t(len(tokens)), C.uint32_t(flags), nil, 0, &n, &msg)
		if st == C.EMBER_ERR_BUFFER_TOO_SMALL {
			C.free(unsafe.Pointer(msg))
		} else if err := result("ember_detokenize", st, msg); err != nil {
			return err
		}
		buf := (*C.char)(C.malloc(n + 1))
		defer C.free(unsafe.Pointer(buf))
		st = C.eg_detokenize(h, ptr, C.size_t(len(tokens)), C.uint32_t(flags), buf, n+1, &n, &msg)
		if err := result("ember_detokenize", st, msg); err != nil {
			return err
		}
		out = C.GoStringN(buf, C.int(n))
		return nil
	})
	return out, err
}

// TokenToPiece is the bytes one token stands for (a byte token gives one raw byte, possibly part of a
// UTF-8 character). ErrInvalidArgument for an id outside the vocabulary.
func (m *Model) TokenToPiece(token Token, flags DetokenizeFlags) ([]byte, error) {
	var out []byte
	err := m.use("ember_token_to_piece", func(h *C.ember_model) error {
		var n C.size_t
		var msg *C.char
		st := C.eg_token_to_piece(h, C.ember_token(token), C.uint32_t(flags), nil, 0, &n, &msg)
		if st == C.EMBER_ERR_BUFFER_TOO_SMALL {
			C.free(unsafe.Pointer(msg))
		} else if err := result("ember_token_to_piece", st, msg); err != nil {
			return err
		}
		buf := (*C.char)(C.malloc(n + 1))
		defer C.free(unsafe.Pointer(buf))
		st = C.eg_token_to_piece(h, C.ember_token(token), C.uint32_t(flags), buf, n+1, &n, &msg)
		if err := result("ember_token_to_piece", st, msg); err != nil {
			return err
		}
		out = C.GoBytes(unsafe.Pointer(buf), C.int(n))
		return nil
	})
	return out, err
}

// BOS is the beginning-of-sequence token, -1 if the model has none (or the model is closed).
func (m *Model) BOS() Token {
	t := Token(-1)
	_ = m.use("ember_token_bos", func(h *C.ember_model) error { t = Token(C.ember_token_bos(h)); return nil })
	return t
}

// EOS is the end-of-sequence token, -1 if the model has none (or the model is closed).
func (m *Model) EOS() Token {
	t := Token(-1)
	_ = m.use("ember_token_eos", func(h *C.ember_model) error { t = Token(C.ember_token_eos(h)); return nil })
	return t
}

// IsEOG says whether a token ends generation (EOS, EOT, ...).
func (m *Model) IsEOG(token Token) bool {
	eog := false
	_ = m.use("ember_token_is_eog", func(h *C.ember_model) error {
		eog = bool(C.ember_token_is_eog(h, C.ember_token(token)))
		return nil
	})
	return eog
}
