package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// runFlags are tend run's flags.
type runFlags struct {
	name, cwd, restart     string
	protocol, permission   string
	tty, attach, rm, agent bool
	labels, env            []string
}

func (e *env) runCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [--name NAME] [--tty] [-a|--attach] [--rm] [--agent] [-l KEY=VALUE]... [-e KEY=VALUE]... [--cwd DIR] [--restart POLICY] [--protocol acp [--permission POLICY]] [--] CMD ARGS...",
		Short: "add a program and start it now: an agent for one task",
		Long: "Adds a program to the running daemon (kept as tend add keeps it) and starts it. Without\n" +
			"--name it is named run- and eight hex digits, printed on stdout. It runs in the current\n" +
			"directory (--cwd DIR for another) with the daemon's environment plus -e KEY=VALUE\n" +
			"(-e KEY passes this shell's value).\n\n" +
			"--attach follows the run: its stdout and stderr here, then exits with its exit status as\n" +
			"docker run does (128+N for signal N, 127 when it could not be started). Signals this\n" +
			"command gets (Ctrl-C) are passed on to the run; if this command goes away, the run goes on.\n" +
			"--rm removes the program once it has ended and will not restart: no program, no logs, no\n" +
			"cgroup, no record left (restart = \"never\" unless --restart says otherwise; not with\n" +
			"always, which never ends). The removal is the daemon's: it happens without a client too.\n\n" +
			"--protocol acp starts an agent that speaks the Agent Client Protocol on its stdio, with tend\n" +
			"as its client (protocol = \"acp\", docs/protocol.md): tend prompt, tend approve and tend wait\n" +
			"--until idle then work on it. --permission allow or deny answers its permission requests\n" +
			"at once (default ask: each waits for tend approve or tend deny). With -a it follows\n" +
			"the agent's transcript.\n\n" +
			"  tend run --rm --protocol acp -l task=T -- gemini --experimental-acp",
		Args: cobra.MinimumNArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if f.tty && f.attach && !e.parts.attaches() {
				return e.delegate("run --tty -a")
			}
			body, err := f.body(cmd, args)
			if err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			switch {
			case f.tty && f.attach:
				return e.runTerminal(c, body)
			case f.attach:
				return e.runAttached(c, body)
			}
			added, err := c.AddProgram(e.ctx, body)
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, added.Name)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // tend run -a ls -l: what follows CMD is CMD's
	fl.StringVar(&f.name, "name", "", "the program's `NAME` (default: run- and eight hex digits)")
	fl.BoolVar(&f.tty, "tty", false, "run in a terminal that tend holds (tty = true)")
	fl.BoolVarP(&f.attach, "attach", "a", false, "follow the run and exit with its exit status")
	fl.BoolVar(&f.rm, "rm", false, "remove the program, its logs and records once it has ended")
	fl.BoolVar(&f.agent, "agent", false, "the program is an AI agent (status reports turns)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "label the program `KEY=VALUE` (repeatable)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set `KEY=VALUE` in its environment (KEY alone: this shell's value; repeatable)")
	fl.StringVar(&f.cwd, "cwd", "", "run in `DIR` (default: the current directory)")
	fl.StringVar(&f.restart, "restart", "", "restart `POLICY`: always, on-failure or never (default: the daemon's; never with --rm)")
	fl.StringVar(&f.protocol, "protocol", "", "the `PROTOCOL` the agent speaks on its stdio: acp (protocol = \"acp\"; not with --tty)")
	fl.StringVar(&f.permission, "permission", "", "with --protocol: answer its permission requests by `POLICY`: ask, allow or deny (default ask)")
	return cmd
}

// body is the POST /v1/programs body the flags ask for; a bad flag is a
// usage error (exit 2) before the daemon is asked anything.
func (f *runFlags) body(cmd *cobra.Command, argv []string) (map[string]any, error) {
	// tend run starts what it adds, whatever [defaults] autostart says
	// (docs/sessions.md): a run that waits for a start is not a run.
	body := map[string]any{"command": argv, "autostart": true}
	if f.name != "" {
		if !program.ValidName(f.name) {
			return nil, usageError{fmt.Errorf("run: --name %q: a name matches %s and is not all", f.name, program.NamePattern)}
		}
		body["name"] = f.name
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return nil, err
	}
	if len(labels) > 0 {
		m := map[string]string{}
		for _, l := range labels {
			m[l.Key] = l.Value
		}
		if errs := program.CheckLabels(m); errs != nil {
			return nil, usageError{fmt.Errorf("-l: %w", errs[0])}
		}
		body["labels"] = m
	}
	if len(f.env) > 0 {
		env, err := envFlags(f.env)
		if err != nil {
			return nil, err
		}
		body["env"] = env
	}
	cwd := f.cwd
	if cwd == "" {
		cwd = "."
	}
	abs, err := filepath.Abs(cwd) // the caller's directory, not the config file's
	if err != nil {
		return nil, fmt.Errorf("run: --cwd %s: %w", cwd, err)
	}
	body["cwd"] = abs
	if cmd.Flags().Changed("restart") {
		switch f.restart {
		case program.RestartAlways, program.RestartOnFailure, program.RestartNever:
		default:
			return nil, usageError{fmt.Errorf("run: --restart %q: want always, on-failure or never", f.restart)}
		}
		if f.rm && f.restart == program.RestartAlways {
			return nil, usageError{errors.New(`run: --rm with --restart always would never end: use on-failure or never`)}
		}
		body["restart"] = f.restart
	}
	if f.rm {
		body["remove_on_exit"] = true // the daemon makes restart never unless it is given
	}
	if f.agent {
		body["agent"] = true
	}
	if f.tty {
		body["tty"] = true
	}
	if err := f.protocolBody(cmd, body); err != nil {
		return nil, err
	}
	return body, nil
}

// protocolBody adds --protocol and --permission (docs/protocol.md): a
// value the daemon would refuse is a usage error here first.
func (f *runFlags) protocolBody(cmd *cobra.Command, body map[string]any) error {
	if cmd.Flags().Changed("protocol") {
		if f.protocol != program.ProtocolACP {
			return usageError{fmt.Errorf("run: --protocol %q: want acp", f.protocol)}
		}
		if f.tty {
			return usageError{errors.New("run: --protocol acp speaks on the run's stdin and stdout: not with --tty")}
		}
		body["protocol"] = f.protocol
	}
	if cmd.Flags().Changed("permission") {
		switch {
		case f.protocol == "":
			return usageError{errors.New("run: --permission is for an agent started with --protocol acp")}
		case f.permission != program.PermissionAsk && f.permission != program.PermissionAllow && f.permission != program.PermissionDeny:
			return usageError{fmt.Errorf("run: --permission %q: want ask, allow or deny", f.permission)}
		}
		body["permission"] = f.permission
	}
	return nil
}

// envFlags reads -e KEY=VALUE (or KEY: this process's value, if it has one).
func envFlags(list []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || strings.ContainsRune(k, 0) {
			return nil, usageError{fmt.Errorf("-e %q: want KEY=VALUE (or KEY)", kv)}
		}
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				continue // as docker run -e: unset here, unset there
			}
		}
		env[k] = v
	}
	return env, nil
}

// runAttached adds the program and follows its first run: its output to
// stdout and stderr, signals passed on, and the run's exit status as ours.
func (e *env) runAttached(c *client.Client, body map[string]any) error {
	fw := startForwarding(e.ctx, c)
	defer fw.stop()
	end, err := c.Attach(e.ctx, body, func(a program.Added) { fw.target(a.IDs[0]) }, e.writeOutput)
	if err != nil {
		if errors.Is(err, client.ErrDetached) {
			return fmt.Errorf("%w; the program goes on", err)
		}
		return err
	}
	return e.runEnded(fw.id(), end)
}

// writeOutput writes one line of the run's output where it belongs.
func (e *env) writeOutput(l client.OutputLine) {
	w := e.stdout
	line := l.Line
	switch l.Stream {
	case "stderr":
		w = e.stderr
	case "tend":
		// tend's own line may quote the program (a spawn error): escaped,
		// as every line tend writes for a person; the run's own output is
		// passed as written, as docker run -a passes it.
		w, line = e.stderr, "tend: "+l.ID+": "+human.Escape(line)
	}
	if !l.Partial {
		line += "\n"
	}
	fmt.Fprint(w, line)
}

// runEnded reports how the run ended and returns its exit status as ours:
// a spawn that failed says why on stderr first.
func (e *env) runEnded(id string, end *program.RunEnd) error {
	if end.SpawnError != "" {
		fmt.Fprintf(e.stderr, "tend: %s: %s\n", id, human.Escape(end.SpawnError))
	}
	if end.Status == 0 {
		return nil
	}
	return exitStatus(end.Status)
}

// forwarder passes the signals a user sends this command (Ctrl-C, kill)
// on to the run's process group, as docker run does (its --sig-proxy):
// what the run does with them is the run's business, and the attached
// command ends when the run does. A signal that comes before the daemon
// has named the run is passed on once it has.
type forwarder struct {
	c    *client.Client
	ctx  context.Context
	sigs chan os.Signal
	done chan struct{}

	mu      sync.Mutex // guards runID and pending
	runID   string
	pending []os.Signal
}

// forwarded are the signals passed on: the ones a terminal or an operator
// sends to end or poke a program. SIGWINCH and SIGURG (the Go runtime's)
// are not.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func startForwarding(ctx context.Context, c *client.Client) *forwarder {
	fw := &forwarder{c: c, ctx: ctx, sigs: make(chan os.Signal, 8), done: make(chan struct{})}
	signal.Notify(fw.sigs, forwarded...)
	go fw.loop()
	return fw
}

func (fw *forwarder) loop() {
	for {
		select {
		case <-fw.done:
			return
		case sig := <-fw.sigs:
			fw.mu.Lock()
			id := fw.runID
			if id == "" {
				fw.pending = append(fw.pending, sig)
			}
			fw.mu.Unlock()
			if id != "" {
				fw.send(id, sig)
			}
		}
	}
}

// target names the run; pending signals go to it now.
func (fw *forwarder) target(id string) {
	fw.mu.Lock()
	fw.runID = id
	pending := fw.pending
	fw.pending = nil
	fw.mu.Unlock()
	for _, sig := range pending {
		fw.send(id, sig)
	}
}

func (fw *forwarder) id() string {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.runID
}

func (fw *forwarder) send(id string, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_, _ = fw.c.Signal(fw.ctx, id, program.SignalName(s)) // a run that just ended has nothing to signal
	}
}

func (fw *forwarder) stop() {
	signal.Stop(fw.sigs)
	close(fw.done)
}
