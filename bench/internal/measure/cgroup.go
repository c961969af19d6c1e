package measure

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// CgroupDir is the directory of process pid's cgroup v2 group ("self" for
// this process): its path in /proc/PID/cgroup ("0::/...") below the
// cgroup2 mount of /proc/self/mountinfo whose root holds it.
func CgroupDir(pid string) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%s/cgroup", pid))
	if err != nil {
		return "", err
	}
	own := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if !path.IsAbs(own) {
		return "", fmt.Errorf("no cgroup v2 entry in /proc/%s/cgroup", pid)
	}
	b, err = os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		root, point := f[3], f[4]
		if rel, err := filepath.Rel(root, own); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(point, rel), nil
		}
	}
	return "", errors.New("no cgroup2 mount holds the group of " + pid)
}

// RemoveEmptyCgroups removes dir and the groups below it, deepest first,
// as far as the kernel lets it: rmdir of a group that still holds a
// process (or a child group) fails, so nothing that runs is touched. It
// returns the first failure.
func RemoveEmptyCgroups(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		if e.IsDir() {
			if err := RemoveEmptyCgroups(filepath.Join(dir, e.Name())); err != nil && first == nil {
				first = err
			}
		}
	}
	if err := os.Remove(dir); err != nil && first == nil {
		first = err
	}
	return first
}
