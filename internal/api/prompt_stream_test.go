package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// streamTurn is a turn whose answer a goroutine feeds, as a protocol
// connection does while the agent streams. Guarded by mu.
type streamTurn struct {
	mu    sync.Mutex
	ups   []program.TurnUpdate
	stop  string
	ended bool
	sig   chan struct{}
}

func (t *streamTurn) PromptID() string { return "p1" }

func (t *streamTurn) put(u program.TurnUpdate, stop string) {
	t.mu.Lock()
	if stop != "" {
		t.stop, t.ended = stop, true
	} else {
		t.ups = append(t.ups, u)
	}
	t.mu.Unlock()
	select {
	case t.sig <- struct{}{}:
	default:
	}
}

func (t *streamTurn) Next(ctx context.Context) ([]program.TurnUpdate, string, error) {
	for {
		t.mu.Lock()
		ups, stop, ended := t.ups, t.stop, t.ended
		t.ups = nil
		t.mu.Unlock()
		if len(ups) > 0 || ended {
			return ups, stop, nil
		}
		select {
		case <-t.sig:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

type streamProtocols struct{ turn *streamTurn }

func (p streamProtocols) Prompt(string, string, bool) (api.Turn, error) { return p.turn, nil }
func (streamProtocols) Cancel(string) error                             { return nil }
func (streamProtocols) Answer(string, program.PermissionAnswer) (program.PermissionAnswer, error) {
	return program.PermissionAnswer{}, nil
}

// A long answer (past the 64 KiB after which the stream is paced,
// docs/protocol.md#the-api) reaches the client whole and in order: its
// text, a tool line in its place, then the stop reason.
func TestPromptStreamLongAnswer(t *testing.T) {
	turn := &streamTurn{sig: make(chan struct{}, 1)}
	b := apitest.NewBackend(t.TempDir())
	seed(b)
	srv := api.New(b, &apitest.Events{}, api.Options{Version: "1.2.3", Protocols: streamProtocols{turn}})
	c := client.New(serveUnix(t, srv))
	var want, got strings.Builder
	go func() {
		for i := range 400 {
			if i == 200 {
				turn.put(program.TurnUpdate{Type: program.UpdateTool, Text: "[tool] ls (read) pending\n"}, "")
				want.WriteString("|[tool] ls (read) pending\n|")
			}
			s := fmt.Sprintf("%04d %s\n", i, strings.Repeat("x<&\"é", 200))
			want.WriteString(s)
			turn.put(program.TurnUpdate{Type: program.UpdateText, Text: s}, "")
			if i%20 == 0 {
				time.Sleep(time.Millisecond) // the answer comes in bursts
			}
		}
		turn.put(program.TurnUpdate{}, program.StopEndTurn)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop, err := c.PromptWait(ctx, "planner:0", "go", nil, func(u program.TurnUpdate) {
		if u.Type == program.UpdateText {
			got.WriteString(u.Text)
		} else {
			got.WriteString("|" + u.Text + "|")
		}
	})
	if err != nil || stop != program.StopEndTurn {
		t.Fatalf("stop %q, err %v", stop, err)
	}
	if got.String() != want.String() {
		t.Errorf("got %d bytes, want %d; they differ from byte %d", got.Len(), want.Len(), firstDiff(got.String(), want.String()))
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
