// Package handover carries descriptors and state across an execve of the
// process into itself (tend upgrade): the old program names each
// descriptor it hands over ("api.unix", "notify/worker:0", a terminal's
// master next), writes them and a JSON state into a manifest, and
// re-executes; the new program takes them back by name.
//
// execve keeps every descriptor of the calling thread's table that is not
// close-on-exec, at its number. So the handed-over ones must be in the
// process's own table (not a thread's private one: see internal/epoll),
// and only they lose FD_CLOEXEC, at the last moment (Out.Prepare): a
// descriptor of the daemon that is not handed over still closes at the
// exec, and one handed over becomes close-on-exec again as soon as the new
// program takes it (Take), so no run it starts later inherits it. The
// manifest is a memfd whose number the new program finds in the
// environment variable EnvVar; it never touches the disk.
package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// EnvVar names the manifest's descriptor in the new program's environment.
const EnvVar = "TEND_HANDOVER"

// manifest is what the new program reads.
type manifest struct {
	FDs   map[string]int  `json:"fds"` // by name
	State json.RawMessage `json:"state"`
}

// Out is what the old program hands over. Its methods are safe for
// concurrent use.
type Out struct {
	mu    sync.Mutex     // guards fds and memfd
	fds   map[string]int // owned by Out until the exec; closed by Close
	memfd int            // the manifest, once Prepare has written it; -1 before
}

// NewOut returns an empty handover.
func NewOut() *Out { return &Out{fds: map[string]int{}, memfd: -1} }

// Add hands over fd under name. fd must be a descriptor of the process's
// own table, close-on-exec (Prepare clears that), and is Out's from now
// on: Close closes it. A name given twice is an error (the second fd is
// closed).
func (o *Out) Add(name string, fd int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.fds[name]; ok {
		unix.Close(fd)
		return fmt.Errorf("handover: %q given twice", name)
	}
	o.fds[name] = fd
	return nil
}

// Len is how many descriptors are handed over.
func (o *Out) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.fds)
}

// Prepare writes the manifest with state (JSON) and clears FD_CLOEXEC on
// every descriptor handed over and on the manifest, and returns the
// environment variable to add to the new program's environment. Undo
// reverses it when the exec fails.
func (o *Out) Prepare(state any) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st, err := json.Marshal(state)
	if err != nil {
		return "", fmt.Errorf("handover: %w", err)
	}
	b, err := json.Marshal(manifest{FDs: o.fds, State: st})
	if err != nil {
		return "", fmt.Errorf("handover: %w", err)
	}
	fd, err := unix.MemfdCreate("tend-handover", unix.MFD_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("handover: memfd_create: %w", err)
	}
	if err := writeAll(fd, b); err != nil {
		unix.Close(fd)
		return "", fmt.Errorf("handover: writing the manifest: %w", err)
	}
	o.memfd = fd
	for _, fd := range o.fds {
		if err := setCloexec(fd, false); err != nil {
			o.undoLocked()
			return "", fmt.Errorf("handover: fd %d: %w", fd, err)
		}
	}
	if err := setCloexec(o.memfd, false); err != nil {
		o.undoLocked()
		return "", fmt.Errorf("handover: manifest: %w", err)
	}
	return EnvVar + "=" + strconv.Itoa(o.memfd), nil
}

// Undo makes every descriptor close-on-exec again and drops the manifest:
// the exec failed, and the process goes on.
func (o *Out) Undo() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.undoLocked()
}

func (o *Out) undoLocked() {
	for _, fd := range o.fds {
		_ = setCloexec(fd, true)
	}
	if o.memfd >= 0 {
		unix.Close(o.memfd)
		o.memfd = -1
	}
}

// Close closes every descriptor handed over (after Undo: the process goes
// on without the handover).
func (o *Out) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.undoLocked()
	for name, fd := range o.fds {
		unix.Close(fd)
		delete(o.fds, name)
	}
}

// In is what the new program was handed. Its methods are safe for
// concurrent use.
type In struct {
	mu    sync.Mutex     // guards fds
	fds   map[string]int // not yet taken
	state json.RawMessage
}

// Take reads the handover the old program left, if any: nil, nil when
// this process was started afresh. Every descriptor it names is made
// close-on-exec at once, and the variable is removed from the
// environment (a run must not find it).
func Take() (*In, error) {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvVar)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("handover: bad %s=%q", EnvVar, v)
	}
	f := os.NewFile(uintptr(fd), "tend-handover")
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		return nil, fmt.Errorf("handover: reading the manifest: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("handover: the manifest: %w", err)
	}
	for _, fd := range m.FDs {
		_ = setCloexec(fd, true)
	}
	if m.FDs == nil {
		m.FDs = map[string]int{}
	}
	return &In{fds: m.FDs, state: m.State}, nil
}

// State decodes the state the old program handed over into v.
func (in *In) State(v any) error {
	if in == nil {
		return errors.New("handover: none")
	}
	return json.Unmarshal(in.state, v)
}

// FD takes the descriptor handed over as name: the caller owns it now.
func (in *In) FD(name string) (int, bool) {
	if in == nil {
		return -1, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	fd, ok := in.fds[name]
	if ok {
		delete(in.fds, name)
	}
	return fd, ok
}

// File is FD as an *os.File.
func (in *In) File(name string) (*os.File, bool) {
	fd, ok := in.FD(name)
	if !ok {
		return nil, false
	}
	return os.NewFile(uintptr(fd), name), true
}

// FDs lists every descriptor number handed over and not yet taken (a
// thread that makes a table of its own closes them there).
func (in *In) FDs() []int {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]int, 0, len(in.fds))
	for _, fd := range in.fds {
		out = append(out, fd)
	}
	return out
}

// CloseRest closes what nobody took (a run that ended meanwhile, a kind of
// descriptor this program does not know), and returns their names.
func (in *In) CloseRest() []string {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var names []string
	for name, fd := range in.fds {
		unix.Close(fd)
		names = append(names, name)
	}
	clear(in.fds)
	return names
}

func setCloexec(fd int, on bool) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.FD_CLOEXEC
	} else {
		flags &^= unix.FD_CLOEXEC
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags)
	return err
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
