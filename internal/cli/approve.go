package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

func (e *env) approveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approve ID [OPTION_ID]",
		Short: "answer a protocol agent's permission request with an option",
		Long: "Answer the permission request a protocol agent waits on (tend status shows it as\n" +
			"waiting, with its options) with OPTION_ID, or with its first allow_once option\n" +
			"when none is named.",
		Args: cobra.RangeArgs(1, 2),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			opt := ""
			if len(args) == 2 {
				opt = args[1]
			}
			return e.answer(args[0], opt, "allow_once")
		}),
	}
}

// answer answers the open request of what sel names with opt, or with
// its first option of kind (then of the kind's "always" form). A bare NAME
// or all answers every instance of it that waits on a request (as tend
// prompt NAME prompts each); one instance is answered as named, errors
// and all.
func (e *env) answer(sel, opt, kind string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	sts, err := c.Statuses(sel)
	if err != nil {
		return err
	}
	if len(sts) == 1 {
		return e.answerOne(c, sts[0], opt, kind)
	}
	answered := 0
	for _, st := range sts {
		if st.Protocol == "" || st.Waiting == nil {
			continue
		}
		if err := e.answerOne(c, st, opt, kind); err != nil {
			return err
		}
		answered++
	}
	if answered == 0 {
		return &client.APIError{Status: 409, Message: sel + ": no instance waits on a permission request"}
	}
	return nil
}

// answerOne answers the open request of the instance whose status is st.
func (e *env) answerOne(c *client.Client, st program.Status, opt, kind string) error {
	if st.Protocol == "" {
		return fmt.Errorf("%s %w", st.ID, program.ErrNotProtocol)
	}
	req := ""
	if opt == "" {
		if st.Waiting == nil {
			return &client.APIError{Status: 409, Message: st.ID + ": " + program.ErrNothingOpen.Error()}
		}
		req = st.Waiting.RequestID
		for _, k := range []string{kind, strings.Replace(kind, "_once", "_always", 1)} {
			for _, o := range st.Waiting.Options {
				if opt == "" && o.Kind == k {
					opt = o.OptionID
				}
			}
		}
		if opt == "" {
			return usageError{errors.New(st.ID + ": the request offers no " + kind + " option; name one")}
		}
	}
	got, err := c.Answer(st.ID, program.PermissionAnswer{RequestID: req, OptionID: opt})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s %s: %s\n", st.ID, got.RequestID, opt)
	return nil
}
