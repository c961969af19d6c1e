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
	null, err := nullFile()
	if err != nil {
		return err
	}
	path, err := lookPath(argv[0], cwd, env)
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	exited := make(chan reaper.Status, 1)
	attr := &syscall.ProcAttr{Dir: cwd, Env: env, Files: []uintptr{null.Fd(), pw.Fd(), pw.Fd()}, Sys: &syscall.SysProcAttr{Setsid: true, Credential: cred}}
	pid, err := r.Spawn(func() (int, error) { return forkExec(path, argv, attr) }, func(s reaper.Status) { exited <- s }, true)
	pw.Close()
	if err != nil {
		pr.Close()
		return fmt.Errorf("exec %s: %w", path, err)
	}
	out := make(chan []byte, 1)
	go func() { // at most 1 KiB of output, for the error message
		var b bytes.Buffer
		buf := make([]byte, 512)
		for b.Len() < 1024 {
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
		return fmt.Errorf("timed out after %s", timeout)
	}
	var text []byte
	select {
	case text = <-out:
	case <-time.After(probeWaitDelay):
	}
	pr.Close()
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
