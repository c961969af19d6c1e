package daemon

import (
	"os"

	"github.com/tend-sh/tend/internal/spawn"
)

// openCapture sets up the capture of every run's output: the log files in
// state_dir/logs, the runs' FIFOs in state_dir/fifo (so a later daemon
// reads on from runs this one leaves), and with forward_output every line
// also on stdout as "NAME:K | line" (as docker logs and kubectl logs want
// it). The directories are made by start.
func (d *daemon) openCapture() error {
	opts := spawn.CaptureOptions{
		Logs: d.state.Logs, FIFO: d.state.FIFO,
		OnError: func(id string, err error) {
			d.note("%s: output lost, its log cannot be written: %v", id, err)
		},
	}
	if d.cfg.Daemon.ForwardOutput {
		opts.Forward = d.opts.Stdout
		if opts.Forward == nil {
			opts.Forward = os.Stdout
		}
	}
	d.capture = spawn.NewCapture(opts)
	return nil
}

// closeCapture writes what is left and stops the writers, once every
// instance has ended. (The directories are the state's, closed with it.)
func (d *daemon) closeCapture() error {
	d.capture.Close()
	return nil
}
