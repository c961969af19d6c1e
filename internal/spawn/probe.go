package spawn

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/reaper"
)

// probeWaitDelay bounds how long a finished exec probe's output is read: a
// grandchild that keeps the probe's stdout open must not hang the probe.
const probeWaitDelay = time.Second

// Probe runs an exec liveness probe through the reaper (its exit status comes
// from the reaper like any run's) and returns nil when it exits 0 within
// timeout. On timeout its whole group is killed.
func Probe(r *reaper.Reaper, argv []string, cwd string, env []string, cred *syscall.Credential, timeout time.Duration) error {
	path, err := lookPath(argv[0], cwd, env)
	if err != nil {
		return err
	}
	st, text, err := runCaptured(r, path, argv, cwd, env, cred, timeout, 1024)
	if err != nil {
		return err
	}
	if st.Wait.Signaled() {
		return fmt.Errorf("killed by signal %d", st.Wait.Signal())
	}
	if code := st.Wait.ExitStatus(); code != 0 {
		line, _, _ := strings.Cut(strings.TrimSpace(string(text)), "\n")
		if line != "" {
			return fmt.Errorf("exit %d: %s", code, line)
		}
		return fmt.Errorf("exit %d", code)
	}
	return nil
}

// Command runs path with argv (a short command of the daemon's own, such as
// a new binary's `tend version`) through the reaper, with tend's
// environment, and returns what it wrote on stdout and stderr (at most
// 4 KiB) once it has exited 0 within timeout; else an error that says how
// it ended, with the first line it wrote.
func Command(r *reaper.Reaper, path string, argv []string, timeout time.Duration) ([]byte, error) {
	st, text, err := runCaptured(r, path, argv, "", baseEnv(), nil, timeout, 4096)
	if err != nil {
		return text, err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(text)), "\n")
	switch {
	case st.Wait.Signaled():
		return text, fmt.Errorf("killed by %s", st.Wait.Signal())
	case st.Wait.ExitStatus() != 0 && line != "":
		return text, fmt.Errorf("exit %d: %s", st.Wait.ExitStatus(), line)
	case st.Wait.ExitStatus() != 0:
		return text, fmt.Errorf("exit %d", st.Wait.ExitStatus())
	}
	return text, nil
}

// runCaptured forks path in a session of its own, registered with the
// reaper, and returns its status and up to limit bytes of its output. On
// timeout its whole group is killed.
func runCaptured(r *reaper.Reaper, path string, argv []string, cwd string, env []string, cred *syscall.Credential, timeout time.Duration, limit int) (reaper.Status, []byte, error) {
	null, err := nullFile()
	if err != nil {
		return reaper.Status{}, nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return reaper.Status{}, nil, err
	}
	exited := make(chan reaper.Status, 1)
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Files: []uintptr{null.Fd(), pw.Fd(), pw.Fd()}, Sys: &syscall.SysProcAttr{Setsid: true, Credential: cred}}
	pid, err := r.Spawn(func() (int, error) { return forkExec(path, argv, attr) }, func(s reaper.Status) { exited <- s }, true)
	pw.Close()
	if err != nil {
		pr.Close()
		return reaper.Status{}, nil, fmt.Errorf("exec %s: %w", path, err)
	}
	out := make(chan []byte, 1)
	go func() { // at most limit bytes of output, for the caller and error messages
		var b bytes.Buffer
		buf := make([]byte, 512)
		for b.Len() < limit {
			n, err := pr.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		out <- b.Bytes()
	}()
	var st reaper.Status
	select {
	case st = <-exited:
	case <-time.After(timeout):
		_ = r.Signal(pid, syscall.SIGKILL, true)
		<-exited
		pr.Close()
		return reaper.Status{}, nil, fmt.Errorf("timed out after %s", timeout)
	}
	var text []byte
	select {
	case text = <-out:
	case <-time.After(probeWaitDelay):
	}
	pr.Close()
	return st, text, nil
}

// probeClient holds no idle connections: probes are rare and many.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// ProbeHTTP GETs url and returns nil for a 2xx or 3xx answer within timeout.
func ProbeHTTP(url string, timeout time.Duration) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	c := *probeClient
	c.Timeout = timeout
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return fmt.Errorf("GET %s: timed out after %s", url, timeout)
		}
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}
