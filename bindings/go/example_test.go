package ember_test

import (
	"context"
	"fmt"
	"log"

	"ember.dev/go/ember"
)

// The README's example (compiled by go test, not run: it needs a model at that path).
func Example() {
	ctx := context.Background()
	model, err := ember.Load("models/stories15M-q8_0.gguf", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	session, _ := model.NewSession(nil)
	defer session.Close()
	sampler, _ := ember.NewSampler(ember.DefaultSamplerOptions())
	defer sampler.Close()
	prompt, _ := model.Tokenize("Once upon a time", ember.TokenizeAddSpecial)
	if err := session.Feed(ctx, prompt); err != nil {
		log.Fatal(err)
	}
	pieces, wait := session.GenerateStream(ctx, sampler, 100)
	for p := range pieces {
		fmt.Print(p.Text)
	}
	if err := wait(); err != nil {
		log.Fatal(err)
	}
}

func ExampleError() {
	_, err := ember.Load("/nonexistent/model.gguf", nil)
	fmt.Println(err)
	// Output: ember: EMBER_ERR_IO: ember_model_load: cannot open '/nonexistent/model.gguf': No such file or directory
}
