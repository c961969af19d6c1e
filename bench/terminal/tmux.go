package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tmuxServer is a tmux server this process started in the foreground
// (tmux -D, so it is a child of ours, not a daemon), on a socket of its
// own (-L NAME with TMUX_TMPDIR in the work directory), with no config
// (-f /dev/null): the status line off, so a pane is as large as the
// window, and /bin/sh running each pane's command, as tend's shell
// programs run.
type tmuxServer struct {
	name    string
	env     []string
	cmd     *exec.Cmd
	exited  chan struct{}
	version string
}

// startTmux starts a server whose socket lives under dir.
func startTmux(dir string) (*tmuxServer, error) {
	if _, err := exec.LookPath("tmux"); err != nil {
		return nil, errors.New("tmux is not installed: it runs the same programs beside tend (apt-get install tmux)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	m := &tmuxServer{name: fmt.Sprintf("tendbench%d", os.Getpid()), env: tmuxEnv(dir), exited: make(chan struct{})}
	if out, err := exec.Command("tmux", "-V").Output(); err == nil {
		m.version = strings.TrimSpace(string(out))
	}
	m.cmd = exec.Command("tmux", m.args("-D")...)
	m.cmd.Env = m.env
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	// The socket exists a moment before the server accepts on it: the
	// first command is retried until the server answers. It keeps the
	// server up with no session (exit-empty off) until kill-server.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := m.run("set-option", "-g", "exit-empty", "off")
		if err == nil {
			break
		}
		select {
		case <-m.exited:
			return nil, fmt.Errorf("tmux -D exited: %v (%v)", m.cmd.ProcessState, err)
		default:
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, err
		}
	}
	for _, opt := range [][]string{{"status", "off"}, {"default-shell", "/bin/sh"}} {
		if _, err := m.run("set-option", "-g", opt[0], opt[1]); err != nil {
			m.stop()
			return nil, err
		}
	}
	return m, nil
}

// tmuxEnv is the environment of the server, its panes and its clients: no
// outer tmux, a UTF-8 locale, the socket's directory, an xterm outside.
func tmuxEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TMUX", "TMUX_PANE", "TMUX_TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "SHELL":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm-256color", "SHELL=/bin/sh", "TMUX_TMPDIR="+dir)
}

func (m *tmuxServer) args(a ...string) []string {
	return append([]string{"-L", m.name, "-f", "/dev/null"}, a...)
}

func (m *tmuxServer) pid() int { return m.cmd.Process.Pid }

// run runs one tmux command against the server and returns its output.
func (m *tmuxServer) run(a ...string) (string, error) {
	c := exec.Command("tmux", m.args(a...)...)
	c.Env = m.env
	out, err := c.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return string(out), fmt.Errorf("tmux %s: %w", strings.Join(a, " "), err)
	}
	return string(out), nil
}

// newSession runs command (a shell command line) in a new detached
// session of the size.
func (m *tmuxServer) newSession(name string, cols, rows int, command string) error {
	_, err := m.run("new-session", "-d", "-s", name, "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), command)
	return err
}

// capture is what session's pane shows (capture-pane -p).
func (m *tmuxServer) capture(session string) (string, error) {
	return m.run("capture-pane", "-p", "-t", session)
}

// attachArgs is the command line of a client attached to session.
func (m *tmuxServer) attachArgs(session string) []string {
	return append([]string{"tmux"}, m.args("attach-session", "-t", session)...)
}

// stop ends the server (kill-server, which ends its panes), SIGKILLing its
// process group if it has not exited after a few seconds.
func (m *tmuxServer) stop() {
	_, _ = m.run("kill-server")
	select {
	case <-m.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-m.pid(), syscall.SIGKILL)
		<-m.exited
	}
}
