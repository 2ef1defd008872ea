package ember

// The layout test: what this binding declares itself, compared with bindings/layout/ember.layout (the
// table that ember_layout.c prints after the C compiler checked each entry against ember.h).
//
// With cgo the C compiler checks every call and every struct access, so what can drift is what Go
// declares on its own: the constants of constants.go. This test checks
//   - every Go constant against the table's enum or #define value (goConstants maps Go name → C name),
//     and every value of a bound C enum is declared in Go (a new status must get a Go constant);
//   - the C structs as cgo compiled them (layout_cgo.go: sizes, alignments, field offsets and sizes)
//     against the table, and that every table field of those structs is listed there;
//   - every C function the package's sources call (found by scanning them) is in the table, so a
//     renamed or removed function is caught here as well as by the compiler.
// TestLayoutCheckerCatchesDrift runs the same checker on altered tables to show each check can fail.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

type goConstant struct {
	goName string
	cName  string
	value  int64
}

// goConstants lists every constant of constants.go with the C name it mirrors.
var goConstants = []goConstant{
	{"StatusOK", "EMBER_OK", int64(StatusOK)},
	{"StatusEndOfGeneration", "EMBER_END_OF_GENERATION", int64(StatusEndOfGeneration)},
	{"StatusStopped", "EMBER_STOPPED", int64(StatusStopped)},
	{"StatusInvalidArgument", "EMBER_ERR_INVALID_ARGUMENT", int64(StatusInvalidArgument)},
	{"StatusOutOfMemory", "EMBER_ERR_OUT_OF_MEMORY", int64(StatusOutOfMemory)},
	{"StatusIO", "EMBER_ERR_IO", int64(StatusIO)},
	{"StatusInvalidModel", "EMBER_ERR_INVALID_MODEL", int64(StatusInvalidModel)},
	{"StatusUnsupported", "EMBER_ERR_UNSUPPORTED", int64(StatusUnsupported)},
	{"StatusCancelled", "EMBER_ERR_CANCELLED", int64(StatusCancelled)},
	{"StatusContextFull", "EMBER_ERR_CONTEXT_FULL", int64(StatusContextFull)},
	{"StatusBufferTooSmall", "EMBER_ERR_BUFFER_TOO_SMALL", int64(StatusBufferTooSmall)},
	{"StatusNotFound", "EMBER_ERR_NOT_FOUND", int64(StatusNotFound)},
	{"StatusTypeMismatch", "EMBER_ERR_TYPE_MISMATCH", int64(StatusTypeMismatch)},
	{"StatusBackend", "EMBER_ERR_BACKEND", int64(StatusBackend)},
	{"StatusInvalidState", "EMBER_ERR_INVALID_STATE", int64(StatusInvalidState)},
	{"StatusCorruptData", "EMBER_ERR_CORRUPT_DATA", int64(StatusCorruptData)},
	{"StatusGrammarDeadEnd", "EMBER_ERR_GRAMMAR_DEAD_END", int64(StatusGrammarDeadEnd)},
	{"StatusInternal", "EMBER_ERR_INTERNAL", int64(StatusInternal)},
	{"LogDebug", "EMBER_LOG_DEBUG", int64(LogDebug)},
	{"LogInfo", "EMBER_LOG_INFO", int64(LogInfo)},
	{"LogWarn", "EMBER_LOG_WARN", int64(LogWarn)},
	{"LogError", "EMBER_LOG_ERROR", int64(LogError)},
	{"BackendAuto", "EMBER_BACKEND_AUTO", int64(BackendAuto)},
	{"BackendCPU", "EMBER_BACKEND_CPU", int64(BackendCPU)},
	{"BackendCUDA", "EMBER_BACKEND_CUDA", int64(BackendCUDA)},
	{"BackendVulkan", "EMBER_BACKEND_VULKAN", int64(BackendVulkan)},
	{"KVF16", "EMBER_KV_F16", int64(KVF16)},
	{"KVQ8_0", "EMBER_KV_Q8_0", int64(KVQ8_0)},
	{"KVQ4_0", "EMBER_KV_Q4_0", int64(KVQ4_0)},
	{"PrecisionDefault", "EMBER_PRECISION_DEFAULT", int64(PrecisionDefault)},
	{"PrecisionHigh", "EMBER_PRECISION_HIGH", int64(PrecisionHigh)},
	{"SpecOff", "EMBER_SPEC_OFF", int64(SpecOff)},
	{"SpecDraft", "EMBER_SPEC_DRAFT", int64(SpecDraft)},
	{"SpecLookup", "EMBER_SPEC_LOOKUP", int64(SpecLookup)},
	{"SpecMTP", "EMBER_SPEC_MTP", int64(SpecMTP)},
	{"RequestQueued", "EMBER_REQUEST_QUEUED", int64(RequestQueued)},
	{"RequestRunning", "EMBER_REQUEST_RUNNING", int64(RequestRunning)},
	{"RequestDone", "EMBER_REQUEST_DONE", int64(RequestDone)},
	{"RequestCancelled", "EMBER_REQUEST_CANCELLED", int64(RequestCancelled)},
	{"RequestFailed", "EMBER_REQUEST_FAILED", int64(RequestFailed)},
	{"TokenizeAddSpecial", "EMBER_TOKENIZE_ADD_SPECIAL", int64(TokenizeAddSpecial)},
	{"TokenizeParseSpecial", "EMBER_TOKENIZE_PARSE_SPECIAL", int64(TokenizeParseSpecial)},
	{"DetokenizeRenderSpecial", "EMBER_DETOKENIZE_RENDER_SPECIAL", int64(DetokenizeRenderSpecial)},
	{"DetokenizeKeepLeadingSpace", "EMBER_DETOKENIZE_KEEP_LEADING_SPACE", int64(DetokenizeKeepLeadingSpace)},
	{"CPUPriorityNormal", "EMBER_CPU_PRIORITY_NORMAL", int64(CPUPriorityNormal)},
	{"CPUPriorityLow", "EMBER_CPU_PRIORITY_LOW", int64(CPUPriorityLow)},
	{"CPUPriorityHigh", "EMBER_CPU_PRIORITY_HIGH", int64(CPUPriorityHigh)},
	{"CPUBudgetFixedThreads", "EMBER_CPU_BUDGET_FIXED_THREADS", int64(CPUBudgetFixedThreads)},
	{"GPULayersAll", "EMBER_GPU_LAYERS_ALL", GPULayersAll},
	{"GPULayersAuto", "EMBER_GPU_LAYERS_AUTO", GPULayersAuto},
	{"SessionKeptStates", "EMBER_SESSION_KEPT_STATES", SessionKeptStates},
	{"ABIVersion", "EMBER_ABI_VERSION", ABIVersion},
	{"VersionMajor", "EMBER_VERSION_MAJOR", VersionMajor},
	{"VersionMinor", "EMBER_VERSION_MINOR", VersionMinor},
	{"VersionPatch", "EMBER_VERSION_PATCH", VersionPatch},
}

// boundEnums are the C enums constants.go mirrors: each of their values must have a Go constant.
// Every #define constant of the table must have one too.
var boundEnums = []string{"ember_status", "ember_log_level", "ember_backend_kind", "ember_kv_type",
	"ember_precision", "ember_spec_mode", "ember_request_state"}

// layoutTable is the parsed ember.layout.
type layoutTable struct {
	structs    map[string][2]uintptr            // name → size, align
	fields     map[string]map[string][2]uintptr // struct → field → offset, size
	fieldOrder map[string][]string
	enums      map[string]int64  // value name → value
	enumOf     map[string]string // value name → enum type
	consts     map[string]int64
	types      map[string]bool // struct, enum and callback type names
	fns        map[string]bool
}

func parseLayout(text string) (*layoutTable, error) {
	t := &layoutTable{structs: map[string][2]uintptr{}, fields: map[string]map[string][2]uintptr{},
		fieldOrder: map[string][]string{}, enums: map[string]int64{}, enumOf: map[string]string{},
		consts: map[string]int64{}, types: map[string]bool{}, fns: map[string]bool{}}
	num := func(s string) (uintptr, error) { n, err := strconv.ParseUint(s, 10, 64); return uintptr(n), err }
	for i, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, " ")
		bad := func(err error) error { return fmt.Errorf("ember.layout line %d %q: %v", i+1, line, err) }
		need := func(n int) error {
			if len(f) < n {
				return bad(fmt.Errorf("expected at least %d fields", n))
			}
			return nil
		}
		switch f[0] {
		case "struct":
			if err := need(4); err != nil {
				return nil, err
			}
			size, err1 := num(f[2])
			align, err2 := num(f[3])
			if err1 != nil || err2 != nil {
				return nil, bad(fmt.Errorf("bad number"))
			}
			t.structs[f[1]] = [2]uintptr{size, align}
			t.types[f[1]] = true
		case "field":
			if err := need(5); err != nil {
				return nil, err
			}
			off, err1 := num(f[3])
			size, err2 := num(f[4])
			if err1 != nil || err2 != nil {
				return nil, bad(fmt.Errorf("bad number"))
			}
			if t.fields[f[1]] == nil {
				t.fields[f[1]] = map[string][2]uintptr{}
			}
			t.fields[f[1]][f[2]] = [2]uintptr{off, size}
			t.fieldOrder[f[1]] = append(t.fieldOrder[f[1]], f[2])
		case "enum":
			if err := need(4); err != nil {
				return nil, err
			}
			v, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				return nil, bad(err)
			}
			t.enums[f[2]] = v
			t.enumOf[f[2]] = f[1]
			t.types[f[1]] = true
		case "const":
			if err := need(3); err != nil {
				return nil, err
			}
			v, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return nil, bad(err)
			}
			t.consts[f[1]] = v
		case "callback":
			if err := need(2); err != nil {
				return nil, err
			}
			t.types[f[1]] = true
		case "fn":
			if err := need(2); err != nil {
				return nil, err
			}
			t.fns[f[1]] = true
		default:
			return nil, bad(fmt.Errorf("unknown kind %q", f[0]))
		}
	}
	return t, nil
}

// cFunctionCall finds ember_* names followed by "(" in the package's sources: the C.ember_x( calls of
// the Go files and the calls in wrap.c (a preceding letter or "_" excludes the eg_ wrappers).
var cFunctionCall = regexp.MustCompile(`(?:^|[^A-Za-z0-9_])(ember_[a-z0-9_]+)\(`)

// calledFunctions lists the C functions the package's non-test sources call, with the file of each.
func calledFunctions(dir string, isType func(string) bool) (map[string]string, error) {
	out := map[string]string{}
	for _, pattern := range []string{"*.go", "*.c", "*.h"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			for _, m := range cFunctionCall.FindAllStringSubmatch(string(src), -1) {
				// C.ember_token(x) and the like are conversions to a C type, not calls.
				if !isType(m[1]) {
					out[m[1]] = filepath.Base(file)
				}
			}
		}
	}
	return out, nil
}

// checkLayout compares the Go side with a table's text and returns every difference.
func checkLayout(text string, consts []goConstant, structs []cStructLayout, fns map[string]string) []string {
	t, err := parseLayout(text)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	add := func(format string, args ...interface{}) { problems = append(problems, fmt.Sprintf(format, args...)) }

	declared := map[string]bool{}
	for _, c := range consts {
		declared[c.cName] = true
		if v, ok := t.enums[c.cName]; ok {
			if v != c.value {
				add("%s = %d but the table has %s = %d", c.goName, c.value, c.cName, v)
			}
		} else if v, ok := t.consts[c.cName]; ok {
			if v != c.value {
				add("%s = %d but the table has %s = %d", c.goName, c.value, c.cName, v)
			}
		} else {
			add("%s mirrors %s, which the table does not have", c.goName, c.cName)
		}
	}
	bound := map[string]bool{}
	for _, e := range boundEnums {
		bound[e] = true
	}
	for name, enum := range t.enumOf {
		if bound[enum] && !declared[name] {
			add("the table's %s %s = %d has no Go constant", enum, name, t.enums[name])
		}
	}
	for name, v := range t.consts {
		if !declared[name] {
			add("the table's const %s = %d has no Go constant", name, v)
		}
	}

	for _, s := range structs {
		want, ok := t.structs[s.name]
		if !ok {
			add("struct %s is not in the table", s.name)
			continue
		}
		if s.size != want[0] || s.align != want[1] {
			add("struct %s: cgo sees size %d align %d, the table %d %d", s.name, s.size, s.align, want[0], want[1])
		}
		listed := map[string]bool{}
		for _, f := range s.fields {
			listed[f.name] = true
			tf, ok := t.fields[s.name][f.name]
			if !ok {
				add("field %s.%s is not in the table", s.name, f.name)
				continue
			}
			if f.offset != tf[0] || f.size != tf[1] {
				add("field %s.%s: cgo sees offset %d size %d, the table %d %d", s.name, f.name, f.offset, f.size, tf[0], tf[1])
			}
		}
		for _, name := range t.fieldOrder[s.name] {
			if !listed[name] {
				add("field %s.%s of the table is missing from layout_cgo.go", s.name, name)
			}
		}
	}

	names := make([]string, 0, len(fns))
	for name := range fns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !t.fns[name] {
			add("%s calls %s, which the table does not have (renamed or removed?)", fns[name], name)
		}
	}
	sort.Strings(problems)
	return problems
}

func layoutPath() string {
	if p := os.Getenv("EMBER_LAYOUT"); p != "" {
		return p
	}
	return filepath.Join("..", "layout", "ember.layout")
}

// goSide gathers what the checker compares: the constants, the cgo layouts and the called functions.
func goSide(t *testing.T, text string) map[string]string {
	t.Helper()
	table, err := parseLayout(text)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := calledFunctions(".", func(name string) bool { return table.types[name] || name == "ember_token" })
	if err != nil {
		t.Fatal(err)
	}
	// A sanity floor: the scan must find the calls the package is known to make.
	for _, name := range []string{"ember_model_load", "ember_session_feed", "ember_generate", "ember_session_cancel",
		"ember_last_error", "ember_sampler_params_init", "ember_request_submit"} {
		if _, ok := fns[name]; !ok {
			t.Fatalf("the source scan did not find %s: calledFunctions is broken", name)
		}
	}
	return fns
}

func readLayout(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(layoutPath())
	if err != nil {
		t.Fatalf("reading the layout table (set EMBER_LAYOUT): %v", err)
	}
	return string(data)
}

func TestLayoutMatchesTable(t *testing.T) {
	text := readLayout(t)
	fns := goSide(t, text)
	for _, p := range checkLayout(text, goConstants, cgoStructLayouts(), fns) {
		t.Error(p)
	}
	t.Logf("checked %d constants, %d structs, %d called C functions against %s", len(goConstants),
		len(cgoStructLayouts()), len(fns), layoutPath())
}

// declaredConstants lists the exported constants the package's non-test files declare (parsed with
// go/parser), so that none escapes goConstants.
func declaredConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.CONST {
					continue
				}
				for _, spec := range gen.Specs {
					for _, name := range spec.(*ast.ValueSpec).Names {
						if name.IsExported() {
							names = append(names, name.Name)
						}
					}
				}
			}
		}
	}
	return names
}

func TestEveryGoConstantIsChecked(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range goConstants {
		listed[c.goName] = true
	}
	names := declaredConstants(t)
	for _, name := range names {
		if !listed[name] {
			t.Errorf("constant %s is declared but not in goConstants: the layout test would not check it", name)
		}
	}
	if len(names) != len(goConstants) {
		t.Errorf("the package declares %d exported constants, goConstants lists %d", len(names), len(goConstants))
	}
}

// Every Go constant of constants.go is in goConstants (so none escapes the check): the Status ones are
// counted through statusNames, whose names must be the C names too.
func TestStatusNamesAreTheCNames(t *testing.T) {
	n := 0
	for _, c := range goConstants {
		if strings.HasPrefix(c.goName, "Status") {
			n++
			if got := Status(c.value).String(); got != c.cName {
				t.Errorf("%s.String() = %q, want %q", c.goName, got, c.cName)
			}
		}
	}
	if n != len(statusNames) {
		t.Errorf("goConstants has %d statuses, statusNames %d", n, len(statusNames))
	}
}

func TestLayoutCheckerCatchesDrift(t *testing.T) {
	text := readLayout(t)
	fns := goSide(t, text)
	if p := checkLayout(text, goConstants, cgoStructLayouts(), fns); len(p) != 0 {
		t.Fatalf("the unaltered table must pass first: %v", p)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"enum value", "enum ember_status EMBER_ERR_IO -3\n", "enum ember_status EMBER_ERR_IO -33\n",
			"StatusIO = -3 but the table has EMBER_ERR_IO = -33"},
		{"new enum value", "enum ember_kv_type EMBER_KV_Q4_0 2\n",
			"enum ember_kv_type EMBER_KV_Q4_0 2\nenum ember_kv_type EMBER_KV_Q5_0 3\n",
			"EMBER_KV_Q5_0 = 3 has no Go constant"},
		{"renamed enum value", "enum ember_spec_mode EMBER_SPEC_LOOKUP 2\n", "enum ember_spec_mode EMBER_SPEC_NGRAM 2\n",
			"SpecLookup mirrors EMBER_SPEC_LOOKUP, which the table does not have"},
		{"const value", "const EMBER_TOKENIZE_PARSE_SPECIAL 2\n", "const EMBER_TOKENIZE_PARSE_SPECIAL 4\n",
			"TokenizeParseSpecial = 2 but the table has EMBER_TOKENIZE_PARSE_SPECIAL = 4"},
		{"new const", "const EMBER_ABI_VERSION 1\n", "const EMBER_ABI_VERSION 1\nconst EMBER_TOKENIZE_NEW 4\n",
			"const EMBER_TOKENIZE_NEW = 4 has no Go constant"},
		{"struct size", "struct ember_session_params 64 8\n", "struct ember_session_params 72 8\n",
			"struct ember_session_params: cgo sees size 64 align 8, the table 72 8"},
		{"field offset", "field ember_sampler_params seed 40 8 uint64_t\n", "field ember_sampler_params seed 44 8 uint64_t\n",
			"field ember_sampler_params.seed: cgo sees offset 40 size 8, the table 44 8"},
		{"new field", "field ember_engine_stats kv_bytes 32 8 uint64_t\n",
			"field ember_engine_stats kv_bytes 32 8 uint64_t\nfield ember_engine_stats n_failed 40 4 uint32_t\n",
			"field ember_engine_stats.n_failed of the table is missing from layout_cgo.go"},
		{"renamed function", "fn ember_session_feed ", "fn ember_session_feed_v2 ",
			"calls ember_session_feed, which the table does not have"},
		{"malformed table", "struct ember_model_info 88 8\n", "struct ember_model_info x 8\n", "bad number"},
	}
	for _, c := range cases {
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s: the table has no %q to alter", c.name, c.old)
		}
		altered := strings.Replace(text, c.old, c.new, 1)
		problems := checkLayout(altered, goConstants, cgoStructLayouts(), fns)
		found := false
		for _, p := range problems {
			if strings.Contains(p, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: the checker did not report %q; it reported %v", c.name, c.want, problems)
		}
	}
}
