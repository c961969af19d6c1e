package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
)

// Bounds of the waits that only a broken daemon needs.
const (
	upWait   = 2 * time.Minute  // tend up until every instance runs
	downWait = 60 * time.Second // tend down until the daemon has exited
	killWait = 10 * time.Second // SIGKILL of the daemon's group until it is reaped
)

// binaries are the programs the benchmark runs, built for this run.
type binaries struct {
	tend     string
	notifier string
	hello    string         // a Go hello world: the floor of one CLI exec
	src      measure.Source // what tend was built from
}

// build compiles tend and the notifier into dir. tend comes from the
// working tree; if that does not build (another engineer mid-edit), from
// `git archive HEAD` extracted into dir. The notifier and hello are built
// from the working tree alone: they import nothing of tend, so edits
// elsewhere cannot break them.
func build(ctx context.Context, dir string, progress io.Writer) (binaries, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return binaries{}, err
	}
	b := binaries{tend: filepath.Join(dir, "tend"), notifier: filepath.Join(dir, "notifier"), hello: filepath.Join(dir, "hello"), src: measure.ReadSource(root)}
	if err := goBuild(ctx, root, b.notifier, "./bench/scale/notifier"); err != nil {
		return b, err
	}
	if err := goBuild(ctx, root, b.hello, "./bench/scale/hello"); err != nil {
		return b, err
	}
	werr := buildTend(ctx, root, b.tend)
	if werr == nil {
		return b, nil
	}
	fmt.Fprintf(progress, "the working tree does not build; building tend from HEAD\n%v\n", werr)
	src := filepath.Join(dir, "head")
	tar := filepath.Join(dir, "head.tar")
	if err := os.Mkdir(src, 0o700); err != nil {
		return b, err
	}
	if err := command(ctx, root, "git", "archive", "--format=tar", "-o", tar, "HEAD"); err != nil {
		return b, err
	}
	if err := command(ctx, src, "tar", "-xf", tar); err != nil {
		return b, err
	}
	if err := buildTend(ctx, src, b.tend); err != nil {
		return b, fmt.Errorf("HEAD does not build either: %w", err)
	}
	b.src.BuiltFrom = "HEAD (the working tree did not build)"
	b.src.Describe = strings.TrimSuffix(b.src.Describe, "-dirty")
	return b, nil
}

// moduleRoot is the directory of tend's go.mod, found from the current
// directory (the repository root for go run, the package for go test).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside tend's module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

// goBuild builds static binaries (CGO_ENABLED=0), as tend is shipped.
// buildTend builds tend as shipped (docs/cli.md#two-files): the lean CLI
// at out, the whole tend beside it as tend-daemon, which tend up runs.
func buildTend(ctx context.Context, dir, out string) error {
	if err := goBuild(ctx, dir, out, "./cmd/tend-lean"); err != nil {
		return err
	}
	return goBuild(ctx, dir, filepath.Join(filepath.Dir(out), "tend-daemon"), "./cmd/tend")
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, pkg)
	cmd.Dir, cmd.Env = dir, measure.StaticEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// goTool is the go command on PATH: go test puts its own toolchain's
// first, and go run was itself found there.
func goTool() string { return "go" }

// command runs name args in dir and returns its output in the error.
func command(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

// daemon is one `tend up` the benchmark started, in its own process group
// so a terminal's ^C reaches only the benchmark, which then stops it.
type daemon struct {
	bin    string
	dir    string
	sock   string
	pid    int
	client *client.Client
	raw    *http.Client // requests timed without the Go client's decoding
	groups string       // the daemon's cgroup tree, once seen (tracking)
	cmd    *exec.Cmd
	log    *os.File

	started time.Time     // just before the fork
	exited  chan struct{} // closed once the process is reaped
	exitAt  time.Time     // when it was reaped; set before exited closes
}

// startDaemon writes config as dir/tend.toml and runs `tend up` on it, its
// event lines going to dir/tend-up.log.
func startDaemon(bin, dir, config string) (*daemon, error) {
	cfg := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return nil, err
	}
	d := &daemon{bin: bin, dir: dir, sock: filepath.Join(dir, "state", "tend.sock"), log: log, exited: make(chan struct{})}
	d.client = client.New(d.sock)
	d.raw = rawClient(d.sock)
	d.cmd = exec.Command(bin, "up", "-c", cfg)
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.Env = withoutEnv(os.Environ(), "TEND_SOCKET")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	d.pid = d.cmd.Process.Pid
	go func() {
		d.cmd.Wait()
		d.exitAt = time.Now()
		close(d.exited)
	}()
	return d, nil
}

// alive reports whether the daemon process has not been reaped yet.
func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// tend runs the tend CLI against this daemon and returns how long it took.
func (d *daemon) tend(ctx context.Context, stdout io.Writer, args ...string) (time.Duration, error) {
	return d.exec(ctx, stdout, d.bin, append(args, "--socket", d.sock)...)
}

// exec runs bin args as tend runs its CLI (same directory, stdout) and
// returns how long it took.
func (d *daemon) exec(ctx context.Context, stdout io.Writer, bin string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = d.dir
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return took, fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return took, nil
}

// stop ends the daemon however it can: tend down, then SIGKILL of its
// process group, and waits until it is reaped. Instances it left behind are
// orphans this process adopted as subreaper; the caller kills those.
func (d *daemon) stop() error {
	defer d.log.Close()
	if !d.alive() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), downWait)
	defer cancel()
	_, err := d.tend(ctx, io.Discard, "down")
	grace := 10 * time.Second // tend down returns once the API is gone: exit is near
	if err != nil {
		grace = 2 * time.Second
	}
	select {
	case <-d.exited:
		return nil
	case <-time.After(grace):
	}
	// The group is the daemon's own (Setpgid): its pid is the group id.
	kerr := syscall.Kill(-d.pid, syscall.SIGKILL)
	select {
	case <-d.exited:
		return fmt.Errorf("daemon %d did not stop after tend down (%v); killed its group", d.pid, err)
	case <-time.After(killWait):
		return errors.Join(fmt.Errorf("daemon %d still there after SIGKILL of its group", d.pid), kerr)
	}
}

// becomeSubreaper makes this process adopt the orphans of its descendants,
// so instances of a killed daemon become ours to kill rather than init's.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// killOrphans SIGKILLs and reaps every child of this process except keep
// (the daemons still running) and returns how many it found. Children of
// this process other than the daemons are orphaned instances: a daemon that
// stopped cleanly leaves none.
func killOrphans(keep ...int) int {
	var found int
	for range 50 {
		kids := slices.DeleteFunc(measure.Children(), func(p int) bool { return slices.Contains(keep, p) })
		if len(kids) == 0 {
			return found
		}
		found = max(found, len(kids))
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			// A pid of our own, reaped by pid: nothing else here waits for it.
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					break
				}
			}
		}
	}
	return found
}

func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
