package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// daemon is one `tend up` of this process's, in a process group of its own.
type daemon struct {
	up  *exec.Cmd
	dir string
	c   *client.Client
}

func startDaemon(bin, dir, cfg string) (*daemon, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	d := &daemon{dir: dir, up: exec.Command(bin, "up", "-c", conf)}
	d.up.Stdout, d.up.Stderr = log, log
	d.up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.up.Start(); err != nil {
		return nil, err
	}
	d.c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
	return d, nil
}

// stop ends the daemon with tend down, its group SIGKILLed if that fails.
func (d *daemon) stop() {
	done := make(chan struct{})
	go func() { d.up.Wait(); close(done) }()
	_ = d.c.Shutdown()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-d.up.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// ready waits until n protocol instances are ready.
func (d *daemon) ready(ctx context.Context, n int, limit time.Duration) ([]string, error) {
	deadline := time.Now().Add(limit)
	for {
		sts, err := d.c.List(false)
		var ids []string
		for _, st := range sts {
			if st.Ready && st.SessionID != "" {
				ids = append(ids, st.ID)
			}
		}
		if err == nil && len(ids) == n {
			return ids, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d agents ready after %s (see %s)", len(ids), n, limit, filepath.Join(d.dir, "tend-up.log"))
		}
		if err := measure.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func agentConfig(self string, n int, permission string, autostart bool) string {
	return fmt.Sprintf("[program.agent]\ncommand = [%q, \"agent\"]\nprotocol = \"acp\"\ninstances = %d\npermission = %q\nautostart = %v\n[program.agent.logs]\nmax_size = \"512MiB\"\n",
		self, n, permission, autostart)
}

// tendPrompt sends text through the daemon and returns the times to the
// first piece of text and to the turn's end, and the bytes of text.
func tendPrompt(ctx context.Context, c *client.Client, id, text string) (first, end time.Duration, n int, err error) {
	t0 := time.Now()
	var f time.Time
	stop, err := c.PromptWait(ctx, id, text, nil, func(u program.TurnUpdate) {
		if u.Type == program.UpdateText {
			if f.IsZero() {
				f = time.Now()
			}
			n += len(u.Text)
		}
	})
	end = time.Since(t0)
	if err == nil && stop != program.StopEndTurn {
		err = errors.New("stop reason " + stop)
	}
	return f.Sub(t0), end, n, err
}

// promptAndStream runs the prompt and stream phases: the two sides
// alternate prompt by prompt, so both see the same machine.
func promptAndStream(ctx context.Context, o options, r *Results, bin, self, dir string) error {
	d, err := startDaemon(bin, dir, agentConfig(self, 1, program.PermissionAllow, true))
	if err != nil {
		return err
	}
	defer d.stop()
	ids, err := d.ready(ctx, 1, 60*time.Second)
	if err != nil {
		return err
	}
	dc, err := startDirect(ctx, self)
	if err != nil {
		return err
	}
	defer dc.close()
	has := func(p string) bool { return strings.Contains(strings.Join(o.phases, ","), p) }
	if has("prompt") {
		p := &PromptPhase{}
		for i := 0; i < o.prompts; i++ {
			f, e, _, err := tendPrompt(ctx, d.c, ids[0], "hello")
			if err != nil {
				return fmt.Errorf("tend prompt %d: %w", i, err)
			}
			p.TendFirst, p.TendEnd = append(p.TendFirst, measure.NewMs(f)), append(p.TendEnd, measure.NewMs(e))
			f, e, _, err = dc.prompt(ctx, "hello")
			if err != nil {
				return fmt.Errorf("direct prompt %d: %w", i, err)
			}
			p.DirectFirst, p.DirectEnd = append(p.DirectFirst, measure.NewMs(f)), append(p.DirectEnd, measure.NewMs(e))
		}
		r.Prompt = p
	}
	if has("stream") {
		text := "stream " + strconv.Itoa(o.streamMB<<20)
		s := &StreamPhase{}
		agent := 0
		if st, err := d.c.Status(ids[0]); err == nil && st.PID != nil {
			agent = *st.PID
		}
		cpu := func(pid int) func() measure.Ms {
			c0 := procCPU(pid)
			return func() measure.Ms { return measure.NewMs(procCPU(pid) - c0) }
		}
		daemonCPU, agentCPU, selfCPU := cpu(d.up.Process.Pid), cpu(agent), cpu(os.Getpid())
		_, e, n, err := tendPrompt(ctx, d.c, ids[0], text)
		if err != nil {
			return fmt.Errorf("tend stream: %w", err)
		}
		s.Tend, s.TendBytes = measure.NewMs(e), n
		s.DaemonCPU, s.TendAgentCPU, s.TendClientCPU = daemonCPU(), agentCPU(), selfCPU()
		agentCPU, selfCPU = cpu(dc.cmd.Process.Pid), cpu(os.Getpid())
		_, e, n, err = dc.prompt(ctx, text)
		if err != nil {
			return fmt.Errorf("direct stream: %w", err)
		}
		s.Direct, s.DirectBytes = measure.NewMs(e), n
		s.DirectAgentCPU, s.DirectClientCPU = agentCPU(), selfCPU()
		r.Streams = s
	}
	return nil
}

// idlePhase starts n agents under one daemon and measures what they cost
// at rest, then times permission requests reaching the status and the
// event stream.
func idlePhase(ctx context.Context, o options, bin, self, dir string) (*IdlePhase, error) {
	// The agents are started once the daemon serves, so that the PSS
	// before them is the daemon's own.
	d, err := startDaemon(bin, dir, agentConfig(self, o.n, program.PermissionAsk, false))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	for deadline := time.Now().Add(time.Minute); ; {
		if sts, err := d.c.List(false); err == nil && len(sts) == o.n {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the daemon did not serve in a minute")
		}
		if err := measure.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if err := measure.Sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	ph := &IdlePhase{}
	if m, err := measure.ReadMem(d.up.Process.Pid); err == nil {
		ph.PSSBefore = m.PSS
	}
	w := measure.WatchMem(d.up.Process.Pid, 100*time.Millisecond, "start")
	if _, err := d.c.Act(ctx, "start", "agent", client.ActOptions{}); err != nil {
		w.Stop()
		return nil, err
	}
	ids, err := d.ready(ctx, o.n, time.Duration(o.n)*100*time.Millisecond+time.Minute)
	if err != nil {
		w.Stop()
		return nil, err
	}
	peak := w.Stop()
	ph.PSSPeak = peak.PSS
	cpu0 := procCPU(d.up.Process.Pid)
	if err := measure.Sleep(ctx, o.idle); err != nil {
		return nil, err
	}
	ph.IdleCPU, ph.IdleWindow = measure.NewMs(procCPU(d.up.Process.Pid)-cpu0), measure.NewMs(o.idle)
	if m, err := measure.ReadMem(d.up.Process.Pid); err == nil {
		ph.PSSAfter = m.PSS
	}

	// Permission requests: the agent stamps each with its own clock; the
	// event stream and a tight status poll say when tend shows it.
	id := ids[0]
	events := make(chan time.Duration, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.c.Follow(fctx, 0, []string{program.KindPermission}, id, func(e program.Event) error {
		if p, ok := e.Data.(*program.Permission); ok && p.Phase == program.PhaseAsked {
			if ns, err := strconv.ParseInt(p.Title, 10, 64); err == nil {
				select {
				case events <- time.Since(time.Unix(0, ns)):
				default:
				}
			}
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the stream connected
	for i := 0; i < o.asks; i++ {
		if _, err := d.c.Prompt(id, "ask"); err != nil {
			return nil, err
		}
		var seen time.Duration
		for deadline := time.Now().Add(30 * time.Second); ; {
			st, err := d.c.Status(id)
			if err == nil && st.Waiting != nil {
				ns, _ := strconv.ParseInt(st.Waiting.Title, 10, 64)
				seen = time.Since(time.Unix(0, ns))
				if _, err := d.c.Answer(id, program.PermissionAnswer{RequestID: st.Waiting.RequestID, OptionID: "allow"}); err != nil {
					return nil, err
				}
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("no permission request in the status after 30s")
			}
		}
		ph.ToStatus = append(ph.ToStatus, measure.NewMs(seen))
		select {
		case e := <-events:
			ph.ToEvent = append(ph.ToEvent, measure.NewMs(e))
		case <-time.After(30 * time.Second):
			return nil, errors.New("no permission event after 30s")
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			st, err := d.c.Status(id)
			if err == nil && !st.TurnActive {
				break
			}
			if time.Now().After(deadline) {
				return nil, errors.New("the turn did not end")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return ph, nil
}

// procCPU is a process's utime+stime from /proc/PID/stat; 0 for pid 0.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * measure.Tick
}
