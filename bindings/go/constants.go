package ember

// The C enums and #define constants of ember.h, declared again in Go so that they show in the
// documentation. layout_test.go compares every one with bindings/layout/ember.layout, which the C
// compiler checked against the header: a value that drifts fails that test.

// Status is ember_status: 0 success, > 0 a non-error outcome, < 0 an error.
type Status int32

const (
	StatusOK              Status = 0 // EMBER_OK
	StatusEndOfGeneration Status = 1 // EMBER_END_OF_GENERATION
	StatusStopped         Status = 2 // EMBER_STOPPED
	StatusInvalidArgument Status = -1
	StatusOutOfMemory     Status = -2
	StatusIO              Status = -3
	StatusInvalidModel    Status = -4
	StatusUnsupported     Status = -5
	StatusCancelled       Status = -6
	StatusContextFull     Status = -7
	StatusBufferTooSmall  Status = -8
	StatusNotFound        Status = -9
	StatusTypeMismatch    Status = -10
	StatusBackend         Status = -11
	StatusInvalidState    Status = -12
	StatusCorruptData     Status = -13
	StatusGrammarDeadEnd  Status = -14
	StatusInternal        Status = -100
)

// statusNames are the C names, as ember_status_string gives them.
var statusNames = map[Status]string{
	StatusOK:              "EMBER_OK",
	StatusEndOfGeneration: "EMBER_END_OF_GENERATION",
	StatusStopped:         "EMBER_STOPPED",
	StatusInvalidArgument: "EMBER_ERR_INVALID_ARGUMENT",
	StatusOutOfMemory:     "EMBER_ERR_OUT_OF_MEMORY",
	StatusIO:              "EMBER_ERR_IO",
	StatusInvalidModel:    "EMBER_ERR_INVALID_MODEL",
	StatusUnsupported:     "EMBER_ERR_UNSUPPORTED",
	StatusCancelled:       "EMBER_ERR_CANCELLED",
	StatusContextFull:     "EMBER_ERR_CONTEXT_FULL",
	StatusBufferTooSmall:  "EMBER_ERR_BUFFER_TOO_SMALL",
	StatusNotFound:        "EMBER_ERR_NOT_FOUND",
	StatusTypeMismatch:    "EMBER_ERR_TYPE_MISMATCH",
	StatusBackend:         "EMBER_ERR_BACKEND",
	StatusInvalidState:    "EMBER_ERR_INVALID_STATE",
	StatusCorruptData:     "EMBER_ERR_CORRUPT_DATA",
	StatusGrammarDeadEnd:  "EMBER_ERR_GRAMMAR_DEAD_END",
	StatusInternal:        "EMBER_ERR_INTERNAL",
}

// String is the C constant's name ("EMBER_ERR_IO").
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "unknown status"
}

// LogLevel is ember_log_level.
type LogLevel int32

const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
)

// Backend is ember_backend_kind.
type Backend int32

const (
	BackendAuto   Backend = 0 // the best backend on this machine
	BackendCPU    Backend = 1
	BackendCUDA   Backend = 2
	BackendVulkan Backend = 3
)

// KVType is ember_kv_type: the element type of the KV cache.
type KVType int32

const (
	KVF16  KVType = 0
	KVQ8_0 KVType = 1
	KVQ4_0 KVType = 2 // EMBER_1.10
)

// Precision is ember_precision: how a session's products with quantized weights (Q8_0, Q4_0,
// K-quants, ...) round the activations (Session.SetPrecision; ember.h documents both values in full).
// Float weights are unaffected.
type Precision int32

const (
	// PrecisionDefault: 8-bit activations with a scale per block of 32, as llama.cpp does; the fastest.
	PrecisionDefault Precision = 0
	// PrecisionHigh: the remainder of that rounding multiplied too; logits 30-100 times closer to exact
	// arithmetic, prefill up to twice as long. For evaluation and exact references. CPU backend only.
	PrecisionHigh Precision = 1
)

// SpecMode is ember_spec_mode.
type SpecMode int32

const (
	SpecOff    SpecMode = 0 // no speculation
	SpecDraft  SpecMode = 1 // a draft model proposes
	SpecLookup SpecMode = 2 // n-gram lookup in the session's own tokens proposes
	SpecMTP    SpecMode = 3 // the model's own multi-token-prediction layers propose
)

// RequestState is ember_request_state.
type RequestState int32

const (
	RequestQueued    RequestState = 0
	RequestRunning   RequestState = 1
	RequestDone      RequestState = 2
	RequestCancelled RequestState = 3
	RequestFailed    RequestState = 4
)

// TokenizeFlags are the flags of Model.Tokenize.
type TokenizeFlags uint32

const (
	TokenizeAddSpecial   TokenizeFlags = 1 << 0 // add BOS/EOS where the model asks for them
	TokenizeParseSpecial TokenizeFlags = 1 << 1 // parse "<s>" etc. in the text as special tokens
)

// DetokenizeFlags are the flags of Model.Detokenize and Model.TokenToPiece.
type DetokenizeFlags uint32

const (
	DetokenizeRenderSpecial    DetokenizeFlags = 1 << 0 // render control tokens as their text
	DetokenizeKeepLeadingSpace DetokenizeFlags = 1 << 1 // keep SentencePiece's leading space
)

// CPUPriority is ember_cpu_priority: how ember's idle CPU threads treat cores (ember_cpu_budget_set).
type CPUPriority int32

const (
	CPUPriorityNormal CPUPriority = 0 // idle workers spin ~0.2 ms before sleeping
	CPUPriorityLow    CPUPriority = 1 // never hold a core ember is not computing on
	CPUPriorityHigh   CPUPriority = 2 // latency first: spin longer
)

// CPUBudgetFlags are the flags of ember_cpu_budget.
type CPUBudgetFlags uint32

const (
	CPUBudgetFixedThreads CPUBudgetFlags = 1 << 0 // never fewer threads than given (no adaptation)
)

// GPU layer counts of SessionOptions.GPULayers and EngineOptions.GPULayers (placement across devices):
// every layer on the GPU, or the automatic fit to the budget. ExpertsOnCPU takes GPULayersAll too.
const (
	GPULayersAll  = -1
	GPULayersAuto = -2
)

// SessionKeptStates: the recurrent states a session of a model with recurrent layers keeps besides its
// two (a speculative verifying pass's, which truncation takes instead of re-evaluating): a session holds
// 2 + SessionKeptStates states of ModelInfo's state bytes per sequence.
const SessionKeptStates = 4

// The header's version constants (what this binding was written against).
const (
	ABIVersion   = 1
	VersionMajor = 0
	VersionMinor = 4
	VersionPatch = 0
)
