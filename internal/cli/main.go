// Package cli is the tend command line. Main runs one command line against
// injected writers, so tests run the whole CLI in-process. Each verb lives in
// its own file; every verb but up talks to a running daemon through package
// client. None links the daemon or the terminal emulator: up and attach
// get them as Parts from the binary's main, or hand the command line to the
// binary that has them (parts.go).
//
// Exit statuses (docs/cli.md#exit-status): 0 done, 1 failed, 2 bad usage or config, 3 no such
// program or instance, 4 no daemon reachable. An error is one line on stderr
// starting "tend: "; config problems are printed as their own
// "file:line: key: what is wrong" lines.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// Version is tend's version, set at build time with
// -ldflags "-X github.com/tend-sh/tend/internal/cli.Version=v1.2.3".
var Version = "dev"

// Exit statuses.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	exitNoDaemon = 4
)

// env is one run of Main: its writers, its global flags, and what it knows
// about how far the command got. Only Main's goroutine touches it.
type env struct {
	ctx            context.Context
	stdin          *os.File // tend attach's keyboard
	stdout, stderr io.Writer
	args           []string // the command line, for a verb handed to the whole tend (delegate)
	parts          Parts

	socket string   // --socket
	config string   // -c/--config
	held   []func() // release the socket directories the clients dial through (client), at the end

	// ran is set when a verb's own code starts: an error before that is
	// cobra rejecting the command line.
	ran bool
}

// Main runs the tend command line args (without the program name) with
// the parts this binary links and returns the process's exit status.
func Main(ctx context.Context, parts Parts, args []string, stdout, stderr io.Writer) int {
	return mainWith(ctx, parts, args, os.Stdin, stdout, stderr)
}

// mainWith is Main with the standard input given (tests hand tend attach
// a pseudo-terminal).
func mainWith(ctx context.Context, parts Parts, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, args: args, parts: parts}
	defer e.release()
	root := e.rootCmd(soleVerb(args))
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	return e.report(cmd, err)
}

// rootCmd builds the command tree: with only, the root and that one verb,
// which is all a command line naming it needs (help, errors and flags
// read the same); else every verb, with completions. Building the 31
// verbs with their flags is about 0.2 ms of each exec
// (docs/cli.md#what-one-exec-costs).
func (e *env) rootCmd(only string) *cobra.Command {
	root := &cobra.Command{
		Use:   "tend",
		Short: "tend supervises fleets of AI agents and job workers",
		Long: `tend supervises fleets of AI agents and job workers: tend up runs the daemon,
which starts the programs of its config file and keeps them running.

Every other verb talks to that daemon through state_dir/tend.sock, found from,
in this order: --socket, -c, $TEND_SOCKET, $TEND_CONFIG, then the nearest
tend.toml in the current directory or a parent (as git and compose find theirs).
An id is NAME:K (one instance), NAME (every instance of a program) or all.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(e.stderr)
			cmd.Usage()
			return usageError{errors.New("missing command")}
		}),
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVarP(&e.config, "config", "c", "", "the config `FILE` (TOML or Procfile); the daemon's socket is in its state_dir")
	pf.StringVar(&e.socket, "socket", "", "the daemon's socket `PATH` (default: from -c, $TEND_SOCKET, $TEND_CONFIG or the nearest tend.toml)")
	verbs := e.verbs()
	if i := slices.IndexFunc(verbs, func(v verb) bool { return v.name == only }); i >= 0 {
		root.AddCommand(verbs[i].make())
		return root
	}
	for _, v := range verbs {
		root.AddCommand(v.make())
	}
	e.addCompletions(root)
	return root
}

// verb is a verb's name and what builds its command.
type verb struct {
	name string
	make func() *cobra.Command
}

// verbs are every verb, in the order tend --help lists them.
func (e *env) verbs() []verb {
	return []verb{
		{"up", e.upCmd}, {"ps", e.psCmd}, {"status", e.statusCmd},
		{"start", e.startCmd}, {"stop", e.stopCmd}, {"restart", e.restartCmd},
		{"add", e.addCmd}, {"run", e.runCmd}, {"rm", e.rmCmd}, {"logs", e.logsCmd}, {"events", e.eventsCmd},
		{"reload", e.reloadCmd}, {"upgrade", e.upgradeCmd}, {"down", e.downCmd}, {"dashboard", e.dashboardCmd}, {"version", e.versionCmd},
		{"wait", e.waitCmd}, {"doctor", e.doctorCmd}, {"init", e.initCmd}, {"scale", e.scaleCmd},
		{"screen", e.screenCmd}, {"send", e.sendCmd}, {"attach", e.attachCmd}, {"notify", e.notifyCmd},
		{"prompt", e.promptCmd}, {"cancel", e.cancelCmd}, {"approve", e.approveCmd}, {"deny", e.denyCmd},
		{"completion", e.completionCmd}, {"man", e.manCmd}, {"cgroup-hold", e.cgroupHoldCmd},
	}
}

// soleVerb is the verb a command line names, when it names one before
// anything but the global flags; "" when it names none, asks for help,
// completion or the man pages (they read the whole tree), or puts another
// flag first.
func soleVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "--config" || a == "--socket":
			i++ // the flag's value
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "--socket=") || (strings.HasPrefix(a, "-c") && len(a) > 2 && a[2] != '-'):
		case strings.HasPrefix(a, "-") || a == "help" || a == "completion" || a == "man" || strings.HasPrefix(a, "__"):
			return "" // --help, completion, a flag of no verb
		default:
			return a
		}
	}
	return ""
}

// run wraps a verb's code, marking that the command line was accepted.
func (e *env) run(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		e.ran = true
		return f(cmd, args)
	}
}

// usageError is a command line tend cannot run (exit 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// configError carries config problems, printed as they are: one
// "file:line: key: what is wrong" line each (exit 2).
type configError struct{ msg string }

func (c configError) Error() string { return c.msg }

// report prints err and returns the exit status it means.
func (e *env) report(cmd *cobra.Command, err error) int {
	var es exitStatus
	if errors.As(err, &es) {
		return int(es) // tend init: the child's status, already explained by the child
	}
	if !e.ran {
		err = usageError{err}
	}
	var ce configError
	var ue usageError
	var af actFailed
	// An error may quote a program's why or output: escaped, as every
	// human output is (docs/trust.md).
	stderr := human.NewWriter(e.stderr)
	switch {
	case errors.As(err, &af):
		fmt.Fprint(stderr, af.lines())
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, strings.TrimRight(ce.msg, "\n"))
	case errors.As(err, &ue):
		// cobra adds suggestions on further lines; one line is enough.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(stderr, "tend: %s (see '%s --help')\n", msg, cmd.CommandPath())
	default:
		fmt.Fprintf(stderr, "tend: %s\n", oneLine(err.Error()))
	}
	return exitCode(err)
}

// exitCode maps an error to its exit status.
func exitCode(err error) int {
	var apiErr *client.APIError
	switch {
	case errors.As(err, new(usageError)), errors.As(err, new(configError)):
		return exitUsage
	case errors.Is(err, client.ErrNoDaemon):
		return exitNoDaemon
	case errors.As(err, &apiErr):
		switch apiErr.Status {
		case 404:
			return exitNotFound
		case 400, 413:
			return exitUsage
		}
		return exitFailed
	case errors.Is(err, program.ErrNotFound):
		return exitNotFound
	case errors.Is(err, program.ErrBadConfig), errors.Is(err, program.ErrInvalid):
		return exitUsage
	}
	return exitFailed
}

// oneLine joins a multi-line message so an error stays one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
