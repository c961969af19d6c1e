package spawn

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// Credential resolves a program's user and group into the ids its runs get
// (with the user's supplementary groups), or nil to run as tend itself. It
// is looked up at every spawn, so an account changed on the machine applies
// to the next run.
func Credential(userName, groupName string) (*syscall.Credential, error) {
	if userName == "" && groupName == "" {
		return nil, nil
	}
	cred := &syscall.Credential{Uid: uint32(syscall.Geteuid()), Gid: uint32(syscall.Getegid())}
	if userName != "" {
		u, err := user.Lookup(userName)
		if err != nil {
			if u, err = user.LookupId(userName); err != nil {
				return nil, fmt.Errorf("user %q: %w", userName, err)
			}
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred.Uid, cred.Gid = uint32(uid), uint32(gid)
		if ids, err := u.GroupIds(); err == nil {
			for _, g := range ids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(n))
				}
			}
		}
	}
	if groupName != "" {
		g, err := user.LookupGroup(groupName)
		if err != nil {
			if g, err = user.LookupGroupId(groupName); err != nil {
				return nil, fmt.Errorf("group %q: %w", groupName, err)
			}
		}
		gid, _ := strconv.ParseUint(g.Gid, 10, 32)
		cred.Gid = uint32(gid)
	}
	return cred, nil
}

// AccountEnv is what a run as userName gets from that user's passwd entry,
// as login(1) and systemd's User= give it: HOME, USER, LOGNAME and SHELL
// (SHELL only when the entry names one). Nil for "" or an unknown user.
func AccountEnv(userName string) map[string]string {
	if userName == "" {
		return nil
	}
	u, err := user.Lookup(userName)
	if err != nil {
		if u, err = user.LookupId(userName); err != nil {
			return nil
		}
	}
	env := map[string]string{"HOME": u.HomeDir, "USER": u.Username, "LOGNAME": u.Username}
	if sh := passwdShell(u.Username); sh != "" {
		env["SHELL"] = sh
	}
	return env
}

// passwdShell is the login shell of name in /etc/passwd (os/user does not
// expose it), or "".
func passwdShell(name string) string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[0] == name {
			return fields[6]
		}
	}
	return ""
}
