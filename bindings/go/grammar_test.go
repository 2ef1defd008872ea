package ember

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Grammars: malformed input is an error with its status; greedy output under a JSON Schema is one of
// the schema's values and ends by end-of-generation; the sampler keeps the grammar after Close.
func TestGrammarConstrainsGreedyOutput(t *testing.T) {
	m := loadModel(t)
	if _, err := NewGrammarGBNF(m, "root ::= [a-"); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "line 1, column") {
		t.Fatalf("malformed GBNF: %v", err)
	}
	if _, err := NewGrammarJSONSchema(m, `{"type":"string","format":"date"}`); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unsupported keyword: %v", err)
	}
	g, err := NewGrammarJSONSchema(m, `{"enum":["wave","flee"]}`)
	if err != nil {
		t.Fatal(err)
	}
	sampler := greedy(t)
	if err := sampler.SetGrammar(g); err != nil {
		t.Fatal(err)
	}
	g.Close() // the sampler keeps its own reference
	s := prompted(t, m)
	var text strings.Builder
	ended := false
	if _, err := s.Generate(context.Background(), sampler, 20, func(p Piece) bool {
		text.WriteString(p.Text)
		ended = ended || p.End
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if got := text.String(); !ended || (got != `"wave"` && got != `"flee"`) {
		t.Fatalf("constrained output %q (ended %v)", got, ended)
	}
	if err := sampler.SetGrammar(nil); err != nil {
		t.Fatal(err)
	}
}
