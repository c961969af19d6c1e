package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func (e *env) scaleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "scale NAME N",
		Short: "change a program's number of instances live",
		Long: "Set how many instances program NAME runs: new ones start, the ones from N on stop and\n" +
			"go away. N = 0 stops every instance and keeps the program (a later scale starts it again).\n" +
			"Prints the ids the program has then, one a line.",
		Args: cobra.ExactArgs(2),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return usageError{fmt.Errorf("scale: N is a number of instances from 0, not %q", args[1])}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ids, err := c.Scale(args[0], n)
			if err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Fprintln(e.stdout, id)
			}
			return nil
		}),
	}
}
