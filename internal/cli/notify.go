package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// notifyFlags are tend notify's fields.
type notifyFlags struct {
	ready, watchdog bool
	status, turn    string
}

func (e *env) notifyCmd() *cobra.Command {
	var o notifyFlags
	cmd := &cobra.Command{
		Use:   "notify [--ready] [--status TEXT] [--turn active|idle] [--watchdog]",
		Short: "report readiness, status, turns or a heartbeat to tend (sd_notify)",
		Long: "Send fields to $NOTIFY_SOCKET, as systemd-notify does: tend gives each run its own\n" +
			"socket, so a program (or a hook it runs) reports on its instance. --ready sends READY=1,\n" +
			"--status STATUS=TEXT, --turn X_TEND_TURN=active or idle (an agent's turn begins or\n" +
			"ends), --watchdog WATCHDOG=1. No systemd is needed; an abstract socket (@name) works.\n\n" +
			"  tend notify --turn active        # in a coding agent's prompt-submit hook\n" +
			"  tend notify --turn idle          # in its stop hook",
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			msg, err := o.message()
			if err != nil {
				return usageError{err}
			}
			return sdNotify(os.Getenv("NOTIFY_SOCKET"), msg)
		}),
	}
	f := cmd.Flags()
	f.BoolVar(&o.ready, "ready", false, "the program is ready (READY=1)")
	f.StringVar(&o.status, "status", "", "a status line to show (STATUS=`TEXT`)")
	f.StringVar(&o.turn, "turn", "", "an agent's turn: `active|idle` (X_TEND_TURN)")
	f.BoolVar(&o.watchdog, "watchdog", false, "a watchdog heartbeat (WATCHDOG=1)")
	cmd.RegisterFlagCompletionFunc("turn", cobra.FixedCompletions([]cobra.Completion{"active", "idle"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// message is the datagram: one assignment a line.
func (o notifyFlags) message() (string, error) {
	var lines []string
	if o.ready {
		lines = append(lines, "READY=1")
	}
	if o.status != "" {
		if strings.ContainsAny(o.status, "\n\x00") {
			return "", errors.New("notify: --status is one line of text")
		}
		lines = append(lines, "STATUS="+o.status)
	}
	switch o.turn {
	case "":
	case "active", "idle":
		lines = append(lines, "X_TEND_TURN="+o.turn)
	default:
		return "", fmt.Errorf("notify: --turn %q: want active or idle", o.turn)
	}
	if o.watchdog {
		lines = append(lines, "WATCHDOG=1")
	}
	if len(lines) == 0 {
		return "", errors.New("notify: nothing to send: give --ready, --status, --turn or --watchdog")
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// sdNotify sends msg to the datagram socket socket names: a path, or an
// abstract socket as @name (Go's net package maps the @ itself).
func sdNotify(socket, msg string) error {
	if socket == "" {
		return errors.New("NOTIFY_SOCKET is not set: tend notify reports to the supervisor of this run (tend sets NOTIFY_SOCKET for each run)")
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return fmt.Errorf("NOTIFY_SOCKET=%q: want a socket path or @name", socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET=%s: %w", socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET=%s: %w", socket, err)
	}
	return nil
}
