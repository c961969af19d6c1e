package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (e *env) completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "print a shell completion script",
		Long: `Print the completion script of a shell. Verbs, flags and, while a daemon is
reachable, instance ids and program names complete.

  bash:  source <(tend completion bash)     (in ~/.bashrc; needs bash-completion)
  zsh:   tend completion zsh > "${fpath[1]}/_tend"
  fish:  tend completion fish > ~/.config/fish/completions/tend.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(e.stdout, true)
			case "zsh":
				return root.GenZshCompletion(e.stdout)
			default:
				return root.GenFishCompletion(e.stdout, true)
			}
		}),
	}
}

// completeTimeout bounds the question to the daemon while a shell waits.
const completeTimeout = time.Second

// completeIDs completes the one id argument of a verb: "all", program names
// and instance ids, asking the daemon. Quietly: no daemon, a slow one or
// any error completes nothing.
func (e *env) completeIDs(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.completeFromDaemon(toComplete, true), cobra.ShellCompDirectiveNoFileComp
}

// completeNames completes a program name (rm, scale).
func (e *env) completeNames(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.completeFromDaemon(toComplete, false), cobra.ShellCompDirectiveNoFileComp
}

// completeFromDaemon lists the names (and with ids, "all" and the instance
// ids) that start with prefix.
func (e *env) completeFromDaemon(prefix string, ids bool) []cobra.Completion {
	c, err := e.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, completeTimeout)
	defer cancel()
	list, err := c.ListContext(ctx, false)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	add := func(s string) {
		if strings.HasPrefix(s, prefix) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if ids {
		add("all")
	}
	for _, st := range list {
		add(st.Program)
	}
	if ids {
		for _, st := range list {
			add(st.ID)
		}
	}
	return out
}

// addCompletions wires argument and flag completion into the tree: the
// verbs whose argument is an id or a program name ask the daemon.
func (e *env) addCompletions(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		if cmd.ValidArgsFunction != nil {
			continue // the verb completes its own
		}
		switch cmd.Name() {
		case "status", "start", "stop", "restart", "wait", "logs", "screen", "send", "attach":
			cmd.ValidArgsFunction = e.completeIDs
		case "rm", "scale":
			cmd.ValidArgsFunction = e.completeNames
		}
	}
	if wait, _, err := root.Find([]string{"wait"}); err == nil {
		err := wait.RegisterFlagCompletionFunc("until", func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return slices.DeleteFunc(waitTargets(), func(s string) bool { return !strings.HasPrefix(s, prefix) }), cobra.ShellCompDirectiveNoFileComp
		})
		if err != nil {
			panic(fmt.Sprintf("completion of wait --until: %v", err)) // a programming error
		}
	}
}
