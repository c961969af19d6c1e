package daemon

import (
	"errors"
	"fmt"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal"
)

// terminals serves the API's terminal routes (screen, input, attach) from
// the supervisors' tty instances (docs/terminal.md). Its errors say which
// instance and why: an unknown id wraps program.ErrNotFound, an instance
// without tty program.ErrNotTerminal ("worker:0 is not a terminal program
// (tty = false)"), one with no run program.ErrNotRunning with its status's
// why.
type terminals struct{ d *daemon }

var _ api.Terminals = (*terminals)(nil)

// Screen implements api.Terminals: the current run's screen, or the last
// run's (Running false) when the instance is not running.
func (t *terminals) Screen(id string, ansi bool, history int) (program.Screen, error) {
	tty, id, err := t.one(id)
	if err != nil {
		return program.Screen{}, err
	}
	s, err := tty.Screen(ansi, history)
	return s, t.why(id, err)
}

// Attach implements api.Terminals.
func (t *terminals) Attach(id string, readOnly bool) (program.Attach, error) {
	tty, id, err := t.one(id)
	if err != nil {
		return nil, err
	}
	a, err := tty.Attach(readOnly)
	return a, t.why(id, err)
}

// Input implements api.Terminals: the text and keys go to every running
// tty instance sel names. An instance named by its id must be one; a bare
// name or all must name at least one. The API has checked the size (413);
// each instance's terminal.Session.Send checks it for callers that come another way.
func (t *terminals) Input(sel string, in program.Input) ([]string, error) {
	s, err := program.ParseSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", program.ErrNotFound, err)
	}
	ids, ttys, err := t.d.mgr.TTYs(sel)
	if err != nil {
		return nil, err
	}
	if !s.All && s.Instance >= 0 { // one instance, by its id
		if ttys[0] == nil {
			return nil, notTerminal(ids[0])
		}
		if err := ttys[0].Send(in); err != nil {
			return nil, t.why(ids[0], err)
		}
		return ids, nil
	}
	var sent []string
	var errs []error
	anyTTY := false
	for i, tty := range ttys {
		if tty == nil {
			continue
		}
		anyTTY = true
		if !tty.Running() {
			continue // of a name or all, only those running
		}
		if err := tty.Send(in); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ids[i], t.why(ids[i], err)))
			continue
		}
		sent = append(sent, ids[i])
	}
	switch {
	case len(errs) > 0:
		return sent, errors.Join(errs...)
	case len(sent) > 0:
		return sent, nil
	case !anyTTY && s.All:
		return nil, fmt.Errorf("no program is a terminal program (tty = true): %w", program.ErrNotTerminal)
	case !anyTTY:
		return nil, notTerminal(sel)
	}
	return nil, fmt.Errorf("no instance of %s is running: %w", sel, program.ErrNotRunning)
}

// testStarted, set by tests, sees each daemon once it has started.
var testStarted func(*daemon)

// one is the terminal side of the one instance id names.
func (t *terminals) one(sel string) (*terminal.Session, string, error) {
	ids, ttys, err := t.d.mgr.TTYs(sel)
	switch {
	case err != nil:
		return nil, "", err
	case len(ids) == 0:
		return nil, "", fmt.Errorf("%w: %s has no instances", program.ErrNotFound, sel)
	case len(ids) > 1:
		return nil, "", fmt.Errorf("%w: %s names %d instances: name one, such as %s", program.ErrInvalid, sel, len(ids), ids[0])
	case ttys[0] == nil:
		return nil, "", notTerminal(ids[0])
	}
	return ttys[0], ids[0], nil
}

// notTerminal is the error of a terminal verb on an instance (or program)
// without tty.
func notTerminal(what string) error {
	return fmt.Errorf("%s is %w", what, program.ErrNotTerminal)
}

// why completes a bare program.ErrNotRunning with the instance's why.
func (t *terminals) why(id string, err error) error {
	if err != program.ErrNotRunning {
		return err
	}
	st, serr := t.d.broker.Status(id)
	if serr != nil {
		return fmt.Errorf("%s is %w", id, err)
	}
	return fmt.Errorf("%s is %w (%s): %s", id, err, st.State, st.Why)
}
