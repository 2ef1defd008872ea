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

// A lazy grammar: no trigger words is an error; with a word the story never writes, greedy output is
// the same as without a grammar and the grammar never constrains.
func TestLazyGrammarWaitsForItsTrigger(t *testing.T) {
	m := loadModel(t)
	if _, err := NewLazyGrammarGBNF(m, `root ::= "x"`, nil, nil, false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no triggers: %v", err)
	}
	g, err := NewLazyGrammarGBNF(m, `root ::= "<call>" [a-z]+ "</call>"`, []string{"<call>"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	texts := [2]string{}
	for i := range texts {
		sampler := greedy(t)
		if i == 1 {
			if err := sampler.SetGrammar(g); err != nil {
				t.Fatal(err)
			}
		}
		var text strings.Builder
		if _, err := prompted(t, m).Generate(context.Background(), sampler, 24, func(p Piece) bool {
			text.WriteString(p.Text)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if on, err := sampler.GrammarConstraining(); err != nil || on {
			t.Fatalf("constraining %v, %v", on, err)
		}
		texts[i] = text.String()
	}
	if texts[0] != texts[1] {
		t.Fatalf("the lazy grammar changed free text: %q against %q", texts[1], texts[0])
	}
}
