package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// exitInterrupted is tend prompt's status after Ctrl-C (128 + SIGINT).
const exitInterrupted = 130

func (e *env) promptCmd() *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "prompt ID|NAME TEXT...|-",
		Short: "prompt a protocol agent and print its answer as it streams",
		Long: "Send TEXT (the arguments joined by spaces, or stdin with -) to a protocol agent\n" +
			"(protocol = \"acp\") as its next prompt, and print the answer as it streams: message\n" +
			"text, one line per tool call ([tool] TITLE (KIND) STATUS), the plan ([plan] ...).\n" +
			"Exit 0 when the turn ends with end_turn, 1 with any other stop reason (named on\n" +
			"stderr), 130 after Ctrl-C, which cancels the turn first. Prompts of one instance run\n" +
			"one at a time, in order; at most 16 wait. A bare NAME prompts every instance, each\n" +
			"line of an answer prefixed NAME:K | . --no-wait prints the prompt_id and returns.\n\n" +
			"  tend prompt planner:0 'summarise the failing tests'\n" +
			"  git diff | tend prompt reviewer:0 -",
		Args: cobra.MinimumNArgs(2),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			text := strings.Join(args[1:], " ")
			if len(args) == 2 && args[1] == "-" {
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return fmt.Errorf("prompt: reading stdin: %w", err)
				}
				text = string(b)
			}
			if strings.TrimSpace(text) == "" {
				return usageError{errors.New("prompt: the prompt is empty")}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ids, err := protocolIDs(c, args[0])
			if err != nil {
				return err
			}
			if noWait {
				for _, id := range ids {
					pid, err := c.Prompt(id, text)
					if err != nil {
						return err
					}
					if len(ids) > 1 {
						fmt.Fprintf(e.stdout, "%s %s\n", id, pid)
					} else {
						fmt.Fprintln(e.stdout, pid)
					}
				}
				return nil
			}
			return e.promptWait(c, ids, text)
		}),
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the prompt is queued, printing its prompt_id")
	return cmd
}

// protocolIDs is the instances sel names: itself for an instance id, every
// instance of a bare name.
func protocolIDs(c *client.Client, sel string) ([]string, error) {
	if _, _, one := program.SplitID(sel); one {
		return []string{sel}, nil
	}
	list, err := c.Statuses(sel)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, st := range list {
		ids = append(ids, st.ID)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: %s has no instances", program.ErrNotFound, sel)
	}
	return ids, nil
}

// promptWait prompts each instance and prints the answers as they stream.
func (e *env) promptWait(c *client.Client, ids []string, text string) error {
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var wasInterrupted atomic.Bool
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		wasInterrupted.Store(true)
		for _, id := range ids {
			_ = c.Cancel(id) // the turn ends cancelled, and its answer ends with it
		}
		select { // a second Ctrl-C, or an agent that does not end its turn, does not hold us
		case <-sigs:
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
			return
		}
		stop()
	}()

	tty := isTerminal(e.stdout)
	var mu sync.Mutex // guards e.stdout between the instances' answers
	type result struct {
		id, stop string
		err      error
	}
	results := make(chan result, len(ids))
	for _, id := range ids {
		prefix := ""
		if len(ids) > 1 {
			prefix = id + " | "
		}
		w := &prefixWriter{w: e.stdout, prefix: prefix, mu: &mu}
		go func() {
			stopReason, err := c.PromptWait(ctx, id, text, nil, func(u program.TurnUpdate) { w.update(u, tty) })
			w.flush()
			results <- result{id, stopReason, err}
		}()
	}
	var failed []string
	var firstErr error
	for range ids {
		r := <-results
		switch {
		case r.err != nil && firstErr == nil:
			firstErr = r.err
		case r.err == nil && r.stop != program.StopEndTurn:
			failed = append(failed, fmt.Sprintf("%s: the turn ended: %s", r.id, r.stop))
		}
	}
	if wasInterrupted.Load() {
		fmt.Fprintln(e.stderr, "tend: prompt: interrupted: sent session/cancel")
		return exitStatus(exitInterrupted)
	}
	if firstErr != nil {
		return firstErr
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// promptText is what tend prompt prints of an update, so that nothing the
// agent wrote steers the operator's terminal (docs/trust.md): its message
// text as tend logs prints a log, as it came to a file or a pipe and, to a
// terminal, escaped but for its colours; tend's own lines (a tool call,
// the plan, a permission request), whose titles are the agent's, escaped
// as all human output is. An SGR sequence cut between two chunks is
// escaped, never passed; a chunk is whole runes (a JSON string).
func promptText(u program.TurnUpdate, tty bool) string {
	switch {
	case u.Type != program.UpdateText:
		return human.EscapeText(u.Text)
	case tty:
		return human.EscapeColour(u.Text)
	}
	return u.Text
}

// prefixWriter prints an answer's text, each line after prefix (for a
// fan-out; "" prints it as it comes).
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     *sync.Mutex
	part   string
	mid    bool // the last text written did not end its line
}

// update prints one update of the answer: a tool, plan or permission line
// on a line of its own, as in the transcript (docs/protocol.md#prompts),
// even when the message text before it did not end its line.
func (p *prefixWriter) update(u program.TurnUpdate, tty bool) {
	s := promptText(u, tty)
	if s == "" {
		return
	}
	p.mu.Lock()
	if u.Type != program.UpdateText && p.mid {
		s = "\n" + s
	}
	p.mid = s[len(s)-1] != '\n'
	p.mu.Unlock()
	p.write(s)
}

func (p *prefixWriter) write(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prefix == "" {
		io.WriteString(p.w, s)
		return
	}
	p.part += s
	for {
		i := strings.IndexByte(p.part, '\n')
		if i < 0 {
			return
		}
		io.WriteString(p.w, p.prefix+p.part[:i+1])
		p.part = p.part[i+1:]
	}
}

// flush ends the answer on a line of its own, so what follows it (the
// shell's prompt, the next answer) does not start in its last line.
func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.prefix != "" && p.part != "":
		io.WriteString(p.w, p.prefix+p.part+"\n")
		p.part = ""
	case p.prefix == "" && p.mid:
		io.WriteString(p.w, "\n")
	}
	p.mid = false
}
