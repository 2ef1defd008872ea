// chat: a minimal streaming chat on the Go binding: each line read from stdin is fed to the model
// and the reply is printed as it is generated. Ctrl-C stops the reply in progress.
//
//	go run ./examples/chat -m models/stories15M-q8_0.gguf
//
// Test mode (-prompt TEXT -print-ids) prints the greedy token ids of the prompt's continuation, one per
// line, as ember-greedy-ref does: CI compares the two.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"ember.dev/go/ember"
)

func main() {
	modelPath := flag.String("m", "", "model file (GGUF)")
	n := flag.Int("n", 128, "tokens to generate per reply at most")
	temp := flag.Float64("temp", 0.8, "sampling temperature (0: greedy)")
	prompt := flag.String("prompt", "", "test mode: generate from this prompt and exit")
	printIDs := flag.Bool("print-ids", false, "test mode: print greedy token ids, one per line")
	flag.Parse()
	if *modelPath == "" {
		fmt.Fprintln(os.Stderr, "usage: chat -m MODEL [-n N] [-temp T] [-prompt TEXT -print-ids]")
		os.Exit(2)
	}
	if err := run(*modelPath, *n, float32(*temp), *prompt, *printIDs); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

func run(modelPath string, n int, temp float32, prompt string, printIDs bool) error {
	model, err := ember.Load(modelPath, nil)
	if err != nil {
		return err
	}
	defer model.Close()
	session, err := model.NewSession(nil)
	if err != nil {
		return err
	}
	defer session.Close()
	opts := ember.DefaultSamplerOptions()
	opts.Temperature = temp
	if printIDs {
		opts = ember.GreedySamplerOptions()
	}
	sampler, err := ember.NewSampler(opts)
	if err != nil {
		return err
	}
	defer sampler.Close()

	if prompt != "" {
		return turn(context.Background(), model, session, sampler, prompt, n, true, printIDs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	in := bufio.NewScanner(os.Stdin)
	first := true
	fmt.Print("> ")
	for in.Scan() {
		if err := turn(ctx, model, session, sampler, in.Text(), n, first, false); err != nil {
			if !errors.Is(err, context.Canceled) {
				return err
			}
			fmt.Print(" [stopped]")
			stop()
			ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		}
		first = false
		fmt.Print("\n> ")
	}
	return in.Err()
}

// turn feeds one user line and streams the reply.
func turn(ctx context.Context, model *ember.Model, session *ember.Session, sampler *ember.Sampler, text string,
	n int, first, printIDs bool) error {
	var flags ember.TokenizeFlags
	if first {
		flags = ember.TokenizeAddSpecial // BOS at the start of the conversation only
	} else {
		text = " " + text
	}
	tokens, err := model.Tokenize(text, flags)
	if err != nil {
		return err
	}
	if err := session.Feed(ctx, tokens); err != nil {
		return err
	}
	pieces, wait := session.GenerateStream(ctx, sampler, n)
	defer wait()
	for p := range pieces {
		switch {
		case p.End:
		case printIDs:
			fmt.Println(p.Token)
		default:
			fmt.Print(p.Text)
		}
	}
	return wait()
}
