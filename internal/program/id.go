package program

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadID is wrapped by ParseSelector for an id that cannot name anything.
var ErrBadID = errors.New("bad id")

// InstanceID is the id of instance k of program name: "name:k".
func InstanceID(name string, k int) string { return name + ":" + strconv.Itoa(k) }

// InstanceBase names instance k of program name where a ':' does not go:
// "name-k", its cgroup's directory and the base of its files (logs, output
// FIFOs, notify socket). A program name has no ':', so it cannot be
// confused with another instance's.
func InstanceBase(name string, k int) string { return name + "-" + strconv.Itoa(k) }

// Selector is what an id argument names: one instance, every instance of a
// program (a bare name), or every instance ("all").
type Selector struct {
	All      bool
	Program  string
	Instance int // -1 = every instance of Program
}

// ParseSelector parses "all", "NAME" or "NAME:K". It only checks the form;
// whether the program exists is the caller's question.
func ParseSelector(s string) (Selector, error) {
	if s == "all" {
		return Selector{All: true, Instance: -1}, nil
	}
	name, k, hasK := strings.Cut(s, ":")
	if !NamePattern.MatchString(name) {
		return Selector{}, fmt.Errorf("%w: %q: a program name matches %s", ErrBadID, s, NamePattern)
	}
	if !hasK {
		return Selector{Program: name, Instance: -1}, nil
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 0 || strconv.Itoa(n) != k {
		return Selector{}, fmt.Errorf("%w: %q: the instance after ':' is a number from 0", ErrBadID, s)
	}
	return Selector{Program: name, Instance: n}, nil
}

// SplitID splits an exact instance id "name:k".
func SplitID(id string) (name string, k int, ok bool) {
	sel, err := ParseSelector(id)
	if err != nil || sel.All || sel.Instance < 0 {
		return "", 0, false
	}
	return sel.Program, sel.Instance, true
}

// CompareIDs orders instance ids as listings show them: by program name,
// then by instance number (so "w:2" comes before "w:10").
func CompareIDs(a, b string) int {
	an, ak, _ := strings.Cut(a, ":")
	bn, bk, _ := strings.Cut(b, ":")
	if c := strings.Compare(an, bn); c != 0 {
		return c
	}
	if c := len(ak) - len(bk); c != 0 { // no leading zeros: longer is larger
		return c
	}
	return strings.Compare(ak, bk)
}
