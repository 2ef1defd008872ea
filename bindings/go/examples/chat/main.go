// chat: a minimal streaming chat on the Go binding: each line read from stdin becomes a user message,
// the whole conversation is rendered with the model's chat template (Model.ApplyChatTemplate, ChatML for
// a model without one) and only the tokens after what the session already holds are fed; the reply is
// printed as it is generated. Ctrl-C stops the reply in progress. (stories15M is a story model, not a
// chat model: under ChatML it rambles, but the flow is the one a chat model needs.)
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
	"strings"

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
	c, err := newChat(model)
	if err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Print("> ")
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "" {
			fmt.Print("> ")
			continue
		}
		if err := c.turn(ctx, session, sampler, in.Text(), n); err != nil {
			switch {
			case errors.Is(err, context.Canceled):
				fmt.Print(" [stopped]")
				stop()
				ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
			case errors.Is(err, ember.ErrContextFull):
				fmt.Print("\n[the context is full: starting over]")
				c.messages = nil
			default:
				return err
			}
			// Where a cancelled or failed feed stopped is not tracked: start the session over.
			c.inSession = nil
			if err := session.Truncate(0); err != nil {
				return err
			}
		}
		fmt.Print("\n> ")
	}
	return in.Err()
}

// End-of-turn markers as text: a model whose vocabulary lacks the template's special tokens
// (stories15M under ChatML) spells them out, and the reply ends there.
var markers = []string{"<|im_end|>", "<|im_start|>", "<|eot_id|>", "<end_of_turn>"}

// chat is the conversation so far and the tokens the session holds for it.
type chat struct {
	model     *ember.Model
	messages  []ember.ChatMessage
	inSession []ember.Token
	bos       ember.Token // put first when the template writes no BOS text and the tokenizer adds one; -1: none
}

func newChat(model *ember.Model) (*chat, error) {
	added, err := model.Tokenize("", ember.TokenizeAddSpecial)
	if err != nil {
		return nil, err
	}
	c := &chat{model: model, bos: -1}
	if b := model.BOS(); b >= 0 && len(added) > 0 && added[0] == b {
		c.bos = b
	}
	return c, nil
}

// turn renders the conversation with the new user line, feeds what the session lacks and streams the reply.
func (c *chat) turn(ctx context.Context, session *ember.Session, sampler *ember.Sampler, line string, n int) error {
	c.messages = append(c.messages, ember.ChatMessage{Role: "user", Content: line})
	text, err := c.model.ApplyChatTemplate(c.messages, true, "")
	if err != nil {
		return err
	}
	// The template's special tokens are text: parse them, and add no BOS/EOS of the tokenizer's own
	// (the template writes its BOS text), except a BOS where it wrote none.
	tokens, err := c.model.Tokenize(text, ember.TokenizeParseSpecial)
	if err != nil {
		return err
	}
	if c.bos >= 0 && (len(tokens) == 0 || tokens[0] != c.bos) {
		tokens = append([]ember.Token{c.bos}, tokens...)
	}
	common := 0
	for common < len(tokens) && common < len(c.inSession) && tokens[common] == c.inSession[common] {
		common++
	}
	if common == len(tokens) {
		common-- // feed at least one token, for fresh logits
	}
	if err := session.Truncate(common); err != nil {
		return err
	}
	c.inSession = c.inSession[:common]
	if err := session.Feed(ctx, tokens[common:]); err != nil {
		return err
	}
	c.inSession = append(c.inSession, tokens[common:]...)
	// The library ends the reply at a marker and never hands out the marker or what could begin one.
	var reply strings.Builder
	_, err = session.GenerateWith(ctx, sampler, ember.GenerateOptions{MaxTokens: n, Stop: markers}, func(p ember.Piece) bool {
		if p.End {
			return false
		}
		c.inSession = append(c.inSession, p.Token)
		reply.WriteString(p.Text)
		fmt.Print(p.Text)
		return true
	})
	c.messages = append(c.messages, ember.ChatMessage{Role: "assistant", Content: reply.String()})
	return err
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
