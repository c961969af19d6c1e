package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// The size of every terminal of the echo and flood phases: tend's default,
// the tmux windows and the attached clients' ptys alike.
const cols, rows = 120, 40

// echoCmd echoes each key it reads: the terminal raw and without the line
// discipline's own echo, so the key comes back through the program.
const echoCmd = `stty raw -echo; printf 'ready\r\n'; exec cat`

// floodScript writes $3 bytes of text lines (a coloured word, then plain
// text) to its terminal as fast as it can each time a line n comes through
// the FIFO $1, then the marker END-n-DNE, then n to the FIFO $2.
const floodScript = `line=$(printf '\033[1;32m%s\033[0m %s' tend-bench 'the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz')
printf 'ready\n'
while read n < "$1"; do
	yes "$line" | head -c "$3"
	printf '\nEND-%s-DNE\n' "$n"
	echo "$n" > "$2"
done
`

// ioRig is the daemon and the tmux server of the echo and flood phases,
// each running the same two programs in a terminal of cols x rows: echo
// (echoCmd) and flood (floodScript, with a pair of FIFOs per side).
type ioRig struct {
	d     *daemon
	tm    *tmuxServer
	bin   string
	goes  map[string]string   // side (tend, tmux) → the FIFO that starts a flood
	dones map[string]*os.File // side → the FIFO the flood program reports on, held open read-write
}

// sides are the two terminals' hosts, in the order of each phase's first
// sample; later samples alternate.
var sides = []string{"tend", "tmux"}

// startIO starts the daemon and the tmux server and waits until both sides
// show their programs' first line.
func startIO(ctx context.Context, bin, work string, o options) (_ *ioRig, err error) {
	r := &ioRig{bin: bin, goes: map[string]string{}, dones: map[string]*os.File{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	script := filepath.Join(work, "flood.sh")
	if err := os.WriteFile(script, []byte(floodScript), 0o600); err != nil {
		return r, err
	}
	for _, side := range sides {
		r.goes[side] = filepath.Join(work, "go-"+side)
		done := filepath.Join(work, "done-"+side)
		for _, p := range []string{r.goes[side], done} {
			if err := unix.Mkfifo(p, 0o600); err != nil {
				return r, fmt.Errorf("mkfifo %s: %w", p, err)
			}
		}
		if r.dones[side], err = os.OpenFile(done, os.O_RDWR, 0); err != nil {
			return r, err
		}
	}
	flood := func(side string) []string {
		return []string{"sh", script, r.goes[side], r.dones[side].Name(), strconv.FormatInt(o.floodBytes, 10)}
	}
	cfg := fmt.Sprintf("[defaults]\ntty = true\ntty_size = \"%dx%d\"\nstop_grace = \"2s\"\n\n"+
		"[program.echo]\nshell = %q\n\n[program.flood]\ncommand = %s\n", cols, rows, echoCmd, tomlArray(flood("tend")))
	if r.d, err = startDaemon(bin, filepath.Join(work, "io"), cfg); err != nil {
		return r, err
	}
	ids, _, err := r.d.waitRunning(ctx, 2, time.Minute)
	if err != nil {
		return r, err
	}
	for _, id := range []string{"echo:0", "flood:0"} {
		if !slices.Contains(ids, id) {
			return r, fmt.Errorf("no instance %s among %v", id, ids)
		}
	}
	if r.tm, err = startTmux(filepath.Join(work, "tmux")); err != nil {
		return r, err
	}
	if err := r.tm.newSession("echo", cols, rows, echoCmd); err != nil {
		return r, err
	}
	if err := r.tm.newSession("flood", cols, rows, "exec "+shellQuote(flood("tmux"))); err != nil {
		return r, err
	}
	for _, prog := range []string{"echo", "flood"} {
		for _, side := range sides {
			if err := r.waitShown(ctx, side, prog, "ready", time.Minute); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// shows says whether side's terminal of prog shows s now: tend's screen
// (GET /v1/screen/PROG:0 through tend's client) or tmux's pane
// (capture-pane -p).
func (r *ioRig) shows(side, prog, s string) (bool, error) {
	if side == "tmux" {
		out, err := r.tm.capture(prog)
		return strings.Contains(out, s), err
	}
	scr, err := r.d.c.Screen(prog+":0", false)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(scr.Lines, func(l string) bool { return strings.Contains(l, s) }), nil
}

// waitShown polls shows until it is true.
func (r *ioRig) waitShown(ctx context.Context, side, prog, s string, limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; {
		ok, err := r.shows(side, prog, s)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's %s shows no %q after %v", side, prog, s, limit)
		}
		if err := measure.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// close stops the tmux server and the daemon, then kills and reaps what
// either left; it returns how many processes that was.
func (r *ioRig) close() (left int, err error) {
	if r.tm != nil {
		r.tm.stop()
	}
	if r.d != nil {
		if _, err = r.d.down(); err != nil {
			r.d.kill()
		}
	}
	for _, f := range r.dones {
		f.Close()
	}
	return killOrphans(), err
}

// attach starts side's real client attached to prog, in a pty of this
// process of cols x rows, and waits for it to draw the program's screen,
// which shows shown.
func (r *ioRig) attach(side, prog, shown string) (*ptyClient, error) {
	argv := []string{r.bin, "attach", "--socket", r.d.socket(), prog + ":0"}
	if side == "tmux" {
		argv = r.tm.attachArgs(prog)
	}
	c, err := startClient(argv, r.tm.env, cols, rows)
	if err != nil {
		return nil, err
	}
	if err := c.waitText(shown, time.Minute); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// detachKeys are side's client's: Ctrl-P Ctrl-Q for tend attach, the
// prefix then d for tmux.
var detachKeys = map[string][]byte{"tend": {0x10, 0x11}, "tmux": {0x02, 'd'}}

// startFlood tells side's flood program to write, its marker number n.
func (r *ioRig) startFlood(side string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		fd, err := unix.Open(r.goes[side], unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == nil {
			_, err = unix.Write(fd, []byte(strconv.Itoa(n)+"\n"))
			unix.Close(fd)
			return err
		}
		if !errors.Is(err, unix.ENXIO) || time.Now().After(deadline) {
			return fmt.Errorf("%s's flood program is not reading %s: %w", side, r.goes[side], err)
		}
		time.Sleep(200 * time.Microsecond) // not back at its read yet
	}
}

// floodWritten waits for side's flood program to report n written.
func (r *ioRig) floodWritten(side string, n int, limit time.Duration) error {
	f := r.dones[side]
	f.SetReadDeadline(time.Now().Add(limit))
	var got []byte
	buf := make([]byte, 64)
	for {
		k, err := f.Read(buf)
		got = append(got, buf[:k]...)
		for {
			line, rest, ok := strings.Cut(string(got), "\n")
			if !ok {
				break
			}
			if line == strconv.Itoa(n) {
				return nil
			}
			got = []byte(rest)
		}
		if err != nil {
			return fmt.Errorf("%s's flood program did not report %d written: %w", side, n, err)
		}
	}
}

func tomlArray(a []string) string {
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func shellQuote(a []string) string {
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
