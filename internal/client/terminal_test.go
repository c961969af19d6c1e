package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/client/ws"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestScreenAndInput(t *testing.T) {
	d := startDaemon(t)
	d.tt.AddTTY("planner:0", 40, 10)
	c := client.New(d.path)
	ids, err := c.Input("planner", program.Input{Text: "hello", Enter: true})
	if err != nil || !slices.Equal(ids, []string{"planner:0"}) {
		t.Fatalf("Input = %v, %v", ids, err)
	}
	scr, err := c.Screen("planner:0", false)
	if err != nil || scr.Cols != 40 || scr.Rows != 10 || scr.Lines[1] != "you said: hello" || scr.ANSI != nil {
		t.Errorf("Screen = %+v, %v", scr, err)
	}
	raw, err := c.ScreenJSON("planner:0", true)
	if err != nil || !strings.Contains(string(raw), `"ansi":[`) {
		t.Errorf("ScreenJSON = %s, %v", raw, err)
	}

	var apiErr *client.APIError
	if _, err := c.Screen("web:0", false); !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Message != "web:0 is not a terminal program (tty = false)" {
		t.Errorf("Screen(web:0): %v", err)
	}
	if _, err := c.Input("planner:0", program.Input{Keys: []string{"Enter", ""}}); !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "key 2 is empty") {
		t.Errorf("Input with an empty key: %v", err)
	}
}

func TestAttach(t *testing.T) {
	d := startDaemon(t)
	d.tt.AddTTY("planner:0", 40, 10)
	c := client.New(d.path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := ws.Attach(ctx, c, "planner:0", false)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	ended := make(chan error, 1)
	go func() {
		for {
			p, err := a.Read(context.Background())
			if err != nil {
				ended <- err
				return
			}
			got <- string(p)
		}
	}()
	var seen strings.Builder
	waitSeen := func(what string) {
		t.Helper()
		for !strings.Contains(seen.String(), what) {
			select {
			case p := <-got:
				seen.WriteString(p)
			case <-ctx.Done():
				t.Fatalf("waiting for %q; read %q", what, seen.String())
			}
		}
	}
	waitSeen("> ")
	if err := a.Write(ctx, []byte("hi\r")); err != nil {
		t.Fatal(err)
	}
	waitSeen("you said: hi")
	if err := a.Resize(ctx, 50, 12); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the resize", func() bool { c, r := d.tt.Size("planner:0"); return c == 50 && r == 12 })
	d.tt.End("planner:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	var end *client.TerminalEnded
	if err := <-ended; !errors.As(err, &end) || end.Lifecycle != "done" {
		t.Errorf("Read at the end: %v, want *TerminalEnded done", err)
	}
	a.Close()
}

func TestAttachRefused(t *testing.T) {
	d := startDaemon(t)
	d.tt.AddTTY("planner:0", 40, 10)
	c := client.New(d.path)
	ctx := context.Background()
	var apiErr *client.APIError
	if _, err := ws.Attach(ctx, c, "web:0", false); !errors.As(err, &apiErr) || apiErr.Status != 409 || !strings.Contains(apiErr.Message, "tty = false") {
		t.Errorf("Attach(web:0): %v", err)
	}
	if _, err := ws.Attach(ctx, c, "nosuch:0", false); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("Attach(nosuch:0): %v", err)
	}
	if _, err := ws.Attach(ctx, client.New(socketPath(t)), "planner:0", false); !errors.Is(err, client.ErrNoDaemon) {
		t.Errorf("Attach with no daemon: %v", err)
	}

	// The daemon going away ends an attach with ErrDaemonGone.
	a, err := ws.Attach(ctx, c, "planner:0", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(ctx); err != nil { // the screen
		t.Fatal(err)
	}
	d.stop()
	if _, err := a.Read(ctx); !errors.Is(err, client.ErrDaemonGone) {
		t.Errorf("Read after the daemon closed: %v", err)
	}
}
