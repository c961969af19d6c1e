package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Echo is keystroke → echo through an attached client: this process types
// one key into the pty of a real client (tend attach ID; tmux attach to a
// pane) and times until the client draws it, the key having gone through
// the client, the server (tend's daemon over its unix socket; tmux's
// server), the program's terminal and the program (echoCmd), and back.
// The two sides alternate key by key, which goes first alternating too.
type Echo struct {
	Program string       `json:"program"`
	Size    string       `json:"size"`
	Warmup  int          `json:"warmup"` // keys typed on each side first, not kept
	Gap     measure.Ms   `json:"gap_ms"` // pause between two keys of a side, besides the drain
	Tend    []measure.Ms `json:"tend_ms"`
	Tmux    []measure.Ms `json:"tmux_ms"`
	// The screen of one of the two terminals, exec'd back to back after a
	// warm-up, alternating: tend screen ID beside tmux capture-pane -p.
	TendScreen  []measure.Ms `json:"tend_screen_ms"`
	TmuxCapture []measure.Ms `json:"tmux_capture_ms"`
}

// echoWarmup keys are typed on each side before the samples.
const echoWarmup = 10

// echoPhase measures r's echo programs.
func echoPhase(ctx context.Context, r *ioRig, o options) (*Echo, error) {
	e := &Echo{Program: echoCmd, Size: fmt.Sprintf("%dx%d", cols, rows), Warmup: echoWarmup, Gap: measure.NewMs(o.keyGap)}
	clients := map[string]*ptyClient{}
	defer func() {
		for _, c := range clients {
			c.kill()
		}
	}()
	for _, side := range sides {
		c, err := r.attach(side, "echo", "ready")
		if err != nil {
			return nil, err
		}
		clients[side] = c
		c.drain(100 * time.Millisecond)
	}
	for i := range echoWarmup + o.keys {
		key := byte('a' + i%26)
		for j := range sides {
			side := sides[(i+j)%2]
			took, err := clients[side].echo(key, 10*time.Second)
			if err != nil {
				return nil, err
			}
			clients[side].drain(2 * time.Millisecond) // what follows the key: the cursor
			if i < echoWarmup {
				continue
			}
			if side == "tend" {
				e.Tend = append(e.Tend, measure.NewMs(took))
			} else {
				e.Tmux = append(e.Tmux, measure.NewMs(took))
			}
		}
		if err := measure.Sleep(ctx, o.keyGap); err != nil {
			return nil, err
		}
	}
	for _, side := range sides {
		c := clients[side]
		delete(clients, side)
		if err := c.stop(detachKeys[side]); err != nil {
			return nil, err
		}
	}
	tendScr := []string{r.bin, "screen", "echo:0"} // in the daemon's directory, as a user runs it
	tmuxCap := append([]string{"tmux"}, r.tm.args("capture-pane", "-p", "-t", "echo")...)
	for i := range 1 + o.cli {
		for _, c := range []struct {
			argv, env []string
			out       *[]measure.Ms
		}{{tendScr, userEnv(), &e.TendScreen}, {tmuxCap, r.tm.env, &e.TmuxCapture}} {
			took, err := timeExec(c.argv, c.env, r.d.dir)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				*c.out = append(*c.out, measure.NewMs(took))
			}
		}
	}
	return e, nil
}
