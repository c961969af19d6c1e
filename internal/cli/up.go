package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/program"
)

func (e *env) upCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "up [-c FILE] [--json]",
		Short: "run the daemon in the foreground",
		Long: `Run the daemon in the foreground: start every program of the config file
and keep them running, printing events on stderr, until SIGTERM, SIGINT or
tend down. The config file is -c FILE, else $TEND_CONFIG, else the nearest
tend.toml in the current directory or a parent.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			if e.parts.Daemon == nil {
				return e.delegate("up")
			}
			path := e.config
			if path == "" {
				var err error
				if path, err = findConfig(); err != nil {
					path = defaultConfig // the loader's "no such file" says it best
				}
			}
			err := e.parts.Daemon(e.ctx, UpRequest{ConfigPath: path, JSON: jsonOut, Stderr: e.stderr, Version: buildVersion()})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, program.ErrBadConfig):
				return configError{err.Error()}
			case errors.Is(err, program.ErrAlreadyRunning):
				return err
			}
			return fmt.Errorf("up: %w", err)
		}),
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print events as JSON lines")
	return cmd
}
