package acptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// needProtocol skips the test while this tend's config does not know
// protocol = "acp" (docs/protocol.md): the tests of the real CLIs under tend
// start running the day it does.
func needProtocol(t *testing.T) {
	t.Helper()
	if _, err := config.ParseTOML("tend.toml", []byte("[program.a]\ncommand = [\"a\"]\nprotocol = \"acp\"\n")); err != nil {
		t.Skipf("this tend does not speak ACP yet (protocol = \"acp\": %v)", err)
	}
}

// fleet is a tend up in a temporary directory.
type fleet struct {
	dir, bin string
	env      []string
	c        *client.Client
	out      *testutil.Buffer
	daemon   *exec.Cmd     // the tend up running now
	exited   chan struct{} // closed when it has ended
}

// agentEnv is the environment of tend up and so of its agents: the test's,
// without anything that could log an agent in (API keys, Google Cloud
// settings) and with a fresh HOME, so the agents meet a machine no one has
// logged in on, as a new operator's would be.
func agentEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(k, "_API_KEY"), strings.HasPrefix(k, "GOOGLE_"), strings.HasPrefix(k, "GEMINI_"),
			strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "CLAUDE_"), strings.HasPrefix(k, "OPENAI_"),
			strings.HasPrefix(k, "CODEX_"), k == "HOME", k == "XDG_CONFIG_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "GORACE=atexit_sleep_ms=10")
}

// up runs tend up with conf as its tend.toml in a short temporary
// directory (socket paths must fit in 108 bytes), and tend down when the
// test ends.
func up(t *testing.T, conf string) *fleet {
	t.Helper()
	bin := testutil.TendBinary(t)
	dir, err := os.MkdirTemp("", "tendacp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tend.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fleet{dir: dir, bin: bin, env: agentEnv(home), out: &testutil.Buffer{}}
	f.c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
	t.Cleanup(func() {
		// The runs, to end them should tend down not (a daemon that failed
		// the test may fail at that too).
		var pids []int
		if sts, err := f.c.List(false); err == nil {
			for _, st := range sts {
				if st.PID != nil {
					pids = append(pids, *st.PID)
				}
			}
		}
		if out, err := f.tend("down"); err != nil {
			t.Errorf("tend down: %v\n%s", err, out)
		}
		select {
		case <-f.exited:
		case <-time.After(testutil.Deadline):
			syscall.Kill(-f.daemon.Process.Pid, syscall.SIGKILL)
			<-f.exited
			t.Error("tend up did not stop on tend down")
		}
		for _, pid := range pids {
			if testutil.Alive(pid) {
				t.Errorf("run pid %d outlived tend down: killed", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("tend up said:\n%s", f.out.String())
		}
	})
	f.start(t)
	return f
}

// start runs tend up and waits for it to serve.
func (f *fleet) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(f.bin, "up")
	cmd.Dir, cmd.Env = f.dir, f.env
	cmd.Stdout, cmd.Stderr = f.out, f.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	f.daemon, f.exited = cmd, exited
	testutil.Eventually(t, "tend up to serve", func() bool {
		select {
		case <-exited:
			t.Fatalf("tend up ended:\n%s", f.out.String())
		default:
		}
		_, err := f.c.Health()
		return err == nil
	})
}

// crash SIGKILLs the daemon (tend up, not its runs) and waits for it to be
// gone.
func (f *fleet) crash(t *testing.T) {
	t.Helper()
	if err := f.daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-f.exited
}

// tend runs a tend verb in the fleet's directory.
// A verb that has not answered in 2*testutil.Deadline is killed and fails.
func (f *fleet) tend(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testutil.Deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Dir, cmd.Env = f.dir, f.env
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("tend %s did not end in %s: %w", strings.Join(args, " "), 2*testutil.Deadline, err)
	}
	return string(out), err
}

// logs is what tend logs shows of id (the transcript and the agent's
// stderr), for failure messages.
func (f *fleet) logs(id string) string {
	out, err := f.tend("logs", id)
	if err != nil {
		return fmt.Sprintf("tend logs %s: %v\n%s", id, err, out)
	}
	return out
}

// await waits for id's status to satisfy cond, and returns it.
func (f *fleet) await(t *testing.T, id, what string, cond func(program.Status) bool) program.Status {
	t.Helper()
	var last program.Status
	var lastErr error
	// The CLIs are big node bundles: a start takes seconds on a busy machine.
	testutil.Eventually(t, id+" to be "+what, func() bool {
		last, lastErr = f.c.Status(id)
		return lastErr == nil && cond(last)
	}, testutil.Within(2*testutil.Deadline), testutil.Every(100*time.Millisecond), testutil.Explain(func() string {
		return fmt.Sprintf("last status: state %q, ready %v, why %q (err %v)\nlogs:\n%s", last.State, last.Ready, last.Why, lastErr, f.logs(id))
	}))
	return last
}

func command(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// readableBy fails (or skips) the test when name cannot run path: its
// checkout may be in a directory only root can enter.
func readableBy(t *testing.T, name, path string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command("/bin/sh", "-c", `test -r "$1" && test -x "$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := cmd.Run(); err != nil {
		testutil.Missing(t, "user %s cannot run %s (a checkout other users cannot enter?): %v", name, path, err)
	}
}
