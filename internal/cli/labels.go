package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/program"
)

// Selection by label. -l KEY=VALUE (repeatable, all must match) narrows
// what a verb acts on to the instances whose program has those labels:
// with an ID (NAME:K, NAME, all) the instances it names that match; with
// no ID, every instance that matches (as if the ID were all). A selection
// that matches nothing is no error for ps, status, logs, start, stop,
// restart and rm (as kubectl get and delete -l): an empty answer, or a
// note on stderr; wait, which could only wait for nothing, exits 3.

// labelFlag adds -l/--label to cmd.
func labelFlag(cmd *cobra.Command, raw *[]string) {
	cmd.Flags().StringArrayVarP(raw, "label", "l", nil, "only what has label `KEY=VALUE` (repeatable: all must match)")
}

// parseLabels reads the -l values; a malformed one is a usage error
// naming it.
func parseLabels(raw []string) (program.LabelSelector, error) {
	sel, err := program.ParseLabelSelector(raw)
	if err != nil {
		return nil, usageError{fmt.Errorf("-l: %w", err)}
	}
	return sel, nil
}

// selection is what a verb's optional ID argument and its -l name: the
// selector (all when only -l is given) and the labels.
func selection(verb string, args []string, raw []string) (string, program.LabelSelector, error) {
	labels, err := parseLabels(raw)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(args) == 1:
		return args[0], labels, nil
	case len(labels) > 0:
		return "all", labels, nil
	}
	return "", nil, usageError{fmt.Errorf("%s: name what to act on: an ID (NAME:K, NAME or all) or -l KEY=VALUE", verb)}
}

// noMatchError is a selection by label that matches nothing, where that
// is an error (tend wait): exit 3, as an unknown id.
type noMatchError struct{ text string }

func (e noMatchError) Error() string        { return e.text }
func (e noMatchError) Is(target error) bool { return target == program.ErrNotFound }

// noMatch says on stderr that a selection matched nothing.
func (e *env) noMatch(sel string, labels program.LabelSelector) {
	fmt.Fprintf(e.stderr, "tend: %s\n", noMatchText(sel, labels))
}

func noMatchText(sel string, labels program.LabelSelector) string {
	what := "-l " + labels.String()
	if sel != "all" {
		what = sel + " " + what
	}
	return "no instance matches " + what
}
