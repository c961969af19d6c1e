package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// The files tend keeps in its state directory (runs.json, programs.json,
// ...) share one form and one rule, written here once:
//
//   - the form is a JSON array with one element a line, so that a damaged
//     file still gives every line that is intact (MarshalLines,
//     UnmarshalLines);
//   - a file that cannot be read or parsed whole is renamed aside as
//     NAME.corrupt-<UTC stamp>, never written over (SetAside, ReadLines):
//     what it held may be all that is left of what an operator did.

// corruptStamp is the form of the stamp in a set-aside file's name.
const corruptStamp = "20060102T150405Z"

// SetAside renames name to name.corrupt-<UTC stamp of now>, or with -2, -3
// ... after the stamp when that name is taken: never over an earlier one.
// It returns the new name.
func (d *Dir) SetAside(name string, now time.Time) (string, error) {
	base := name + ".corrupt-" + now.UTC().Format(corruptStamp)
	aside := base
	for i := 2; ; i++ {
		if _, err := d.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	return aside, d.Rename(name, aside)
}

// MarshalLines is list as a JSON array, one element a line. An element
// that does not marshal (a json.RawMessage that is not JSON) is left out.
func MarshalLines[T any](list []T) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	n := 0
	for _, v := range list {
		line, err := json.Marshal(v)
		if err != nil {
			continue
		}
		if n > 0 {
			b.WriteString(",")
		}
		n++
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

// UnmarshalLines reads what MarshalLines wrote. A file that is not one
// JSON array gives the elements of its lines that parse on their own,
// together with the error.
func UnmarshalLines[T any](b []byte) ([]T, error) {
	var list []T
	err := json.Unmarshal(b, &list)
	if err == nil {
		return list, nil
	}
	list = nil
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		line = bytes.TrimSuffix(bytes.TrimSpace(line), []byte(","))
		var v T
		if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &v) == nil {
			list = append(list, v)
		}
	}
	return list, err
}

// Damage is what ReadLines found wrong with a file it set aside.
type Damage struct {
	Err   error  // why: the read's error (a *fs.PathError) when Read, else the parse's
	Read  bool   // the file could not be read at all (a FIFO or a symlink planted there)
	Aside string // the name it was renamed to
}

// ReadLines reads the file name, in MarshalLines's form. A missing file is
// no elements. A file that cannot be read or parsed whole is set aside
// (SetAside) and described in damage, and what its lines hold that parses
// is still returned. The error is returned only when such a file cannot
// be set aside: writing over it would lose it.
func ReadLines[T any](d *Dir, name string, now time.Time) (list []T, damage *Damage, err error) {
	b, rerr := d.ReadFile(name)
	if errors.Is(rerr, fs.ErrNotExist) {
		return nil, nil, nil
	}
	why := rerr
	if rerr == nil {
		if list, why = UnmarshalLines[T](b); why == nil {
			return list, nil, nil
		}
	}
	aside, err := d.SetAside(name, now)
	if err != nil {
		return list, nil, fmt.Errorf("%s: %v, and it cannot be set aside: %w", d.Join(name), why, err)
	}
	return list, &Damage{Err: why, Read: rerr != nil, Aside: aside}, nil
}

// Unsafe turns the refusal to open a file of a state directory that is a
// symlink or not a regular file into a one-line ErrUnsafe (tend up exits
// 2 on it); other errors are returned as they are.
func Unsafe(err error) error {
	var pe *fs.PathError
	switch {
	case !errors.As(err, &pe):
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %s is a symlink, which tend never follows in its state directory; remove it", ErrUnsafe, pe.Path)
	case errors.Is(err, ErrNotRegular):
		return fmt.Errorf("%w: %s is not a regular file; remove it", ErrUnsafe, pe.Path)
	}
	return err
}
