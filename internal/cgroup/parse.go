package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// mount is one line of /proc/self/mountinfo, the fields tend uses.
type mount struct {
	Root   string   // the mounted directory inside its filesystem: a cgroup mount's group
	Point  string   // where it is mounted
	FSType string   // "cgroup2", "cgroup" (v1), "tmpfs", ...
	Source string   // "cgroup2", "none", ...
	Super  []string // super options: a v1 hierarchy's controllers are among them
}

// parseMountinfo parses /proc/self/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// The optional fields before " - " vary in number, so the fields after the
// separator are found by it, not by position.
func parseMountinfo(data []byte) ([]mount, error) {
	var ms []mount
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("mountinfo line %d: malformed: %q", n+1, line)
		}
		m := mount{
			Root:   unescapeOctal(f[3]),
			Point:  unescapeOctal(f[4]),
			FSType: f[sep+1],
			Source: unescapeOctal(f[sep+2]),
		}
		if len(f) > sep+3 {
			m.Super = strings.Split(f[sep+3], ",")
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// unescapeOctal undoes the kernel's escaping of space, tab, newline and
// backslash in mountinfo paths (\040, \011, \012, \134).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseSelfCgroup returns the cgroup v2 path of /proc/self/cgroup, the
// "0::PATH" line (cgroups(7)); false when there is none (a v1-only host).
func parseSelfCgroup(data []byte) (string, bool) {
	for line := range strings.SplitSeq(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// within reports whether p is dir or below it; both are clean and absolute.
// It returns p relative to dir, "/" for dir itself.
func within(p, dir string) (string, bool) {
	if dir == "/" {
		return p, true
	}
	if p == dir {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, dir); ok && rest[0] == '/' {
		return rest, true
	}
	return "", false
}

// mountOf returns the mount that holds the clean absolute path p: the
// deepest mount point above it, the last mounted where one point was mounted
// over another.
func mountOf(ms []mount, p string) (mount, bool) {
	best, found := mount{}, false
	for _, m := range ms {
		if _, ok := within(p, m.Point); ok && (!found || len(m.Point) >= len(best.Point)) {
			best, found = m, true
		}
	}
	return best, found
}

// v1Controllers returns the controllers a v1 hierarchy binds: its super
// options less the generic ones.
func v1Controllers(m mount) []string {
	var cs []string
	for _, o := range m.Super {
		switch {
		case o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent=") || o == "noprefix" || o == "clone_children" || o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods":
		default:
			cs = append(cs, o)
		}
	}
	return cs
}

// keyed returns the value of key in a flat keyed file (cgroup.events,
// memory.events, cpu.stat: "key value" lines). It allocates nothing: the
// memory watchdog reads these for every instance.
func keyed(data []byte, key string) (uint64, bool, error) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok || string(k) != key {
			continue
		}
		n, err := parseUint(v)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", key, err)
		}
		return n, true, nil
	}
	return 0, false, nil
}

var errSyntax = errors.New("not a number")

// parseUint parses a decimal without allocating (strconv does, for its
// error, and needs a string). Its errors quote a copy of b, so that b may
// live on its caller's stack.
func parseUint(b []byte) (uint64, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("%w: %q", errSyntax, string(b))
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q", errSyntax, string(b))
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, fmt.Errorf("%w: %q overflows", errSyntax, string(b))
		}
		n = n*10 + d
	}
	return n, nil
}

// parseBytes parses a single-value memory file: a number, or "max" (no
// limit), returned as 0.
func parseBytes(b []byte) (int64, error) {
	if string(bytes.TrimSpace(b)) == "max" {
		return 0, nil
	}
	n, err := parseUint(b)
	if err != nil {
		return 0, err
	}
	if n > 1<<63-1 {
		return 1<<63 - 1, nil
	}
	return int64(n), nil
}

// parseProcs parses cgroup.procs: one pid a line.
func parseProcs(data []byte) ([]int, error) {
	var pids []int
	// A loop of its own (no SplitSeq, the error quotes a copy): data does
	// not escape, so a caller may read the file into its stack.
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			continue
		}
		n, err := parseUint(line)
		if err != nil || n == 0 || n > 1<<22 {
			return nil, fmt.Errorf("cgroup.procs: bad pid %q", string(line))
		}
		pids = append(pids, int(n))
	}
	return pids, nil
}

// parseList parses a space-separated controller list (cgroup.controllers,
// cgroup.subtree_control).
func parseList(data []byte) []string {
	return strings.Fields(string(data))
}

// validName reports whether name can be an instance group: one path
// element, not the daemon's leaf, not a cgroup interface file's name.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && name != daemonLeaf &&
		!strings.ContainsAny(name, "/\x00\n") && path.Base(name) == name &&
		!strings.HasPrefix(name, "cgroup.")
}

// instanceName reports whether a directory found in the tree is one of
// tend's instance groups, "NAME-K": what Names lists and a daemon may
// remove.
func instanceName(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 || !validName(name) {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
