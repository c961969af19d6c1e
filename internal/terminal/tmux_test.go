package terminal

import (
	"testing"

	"github.com/tend-sh/tend/internal/terminal/vt"
	"github.com/tend-sh/tend/internal/testutil"
)

// tmuxServer is testutil's tmux, the oracle (as in vt's tests), with vt's
// Size.
type tmuxServer struct {
	*testutil.Tmux
	t *testing.T
}

func newTmux(t *testing.T) *tmuxServer {
	t.Helper()
	return &tmuxServer{Tmux: testutil.NewTmux(t), t: t}
}

// start runs command (a shell command line) in a new session of the size.
func (m *tmuxServer) start(name string, size vt.Size, command string) {
	m.t.Helper()
	m.Start(name, size.Cols, size.Rows, command)
}

// compareReplay replays data in tmux and compares the pane with s.
func (m *tmuxServer) compareReplay(name string, size vt.Size, data []byte, s *vt.Screen) string {
	m.t.Helper()
	return m.CompareReplay(name, size.Cols, size.Rows, data, s)
}

// resizePane resizes the pane's window to size and waits for it.
func (m *tmuxServer) resizePane(name string, size vt.Size) {
	m.t.Helper()
	m.ResizePane(name, size.Cols, size.Rows)
}

var diffScreens = testutil.DiffScreens
