package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/tend-sh/tend/internal/statedir"
)

// tokenName is the file in the state dir holding the TCP API's bearer token.
const tokenName = "token"

// loadToken returns the token in the state dir's token file, creating it
// (32 random bytes, hex, mode 0600) if it does not exist. An existing file
// is used as it is, but refused (statedir.ErrUnsafe, exit 2) if it is a
// symlink or not a regular file, belongs to another user, or others may
// read it, and refused if it is too short to be a secret.
func loadToken(dir *statedir.Dir) (string, error) {
	path := dir.Join(tokenName)
	f, err := dir.OpenFile(tokenName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		b := make([]byte, 32)
		rand.Read(b) // never fails (Go 1.24+)
		token := hex.EncodeToString(b)
		_, werr := f.WriteString(token + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			dir.Remove(tokenName)
			return "", fmt.Errorf("token: %w", werr)
		}
		return token, nil
	case !errors.Is(err, fs.ErrExist): // O_EXCL: a symlink there is EEXIST, not followed
		return "", fmt.Errorf("token: %w", err)
	}
	f, err = dir.OpenFile(tokenName, os.O_RDONLY, 0)
	if err != nil {
		if u := statedir.Unsafe(err); u != err {
			return "", u
		}
		return "", fmt.Errorf("token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if uid, me := fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid(); uid != uint32(me) {
		return "", fmt.Errorf("%w: %s belongs to uid %d, not to tend's uid %d: someone else chose this token; remove the file and a new one is made", statedir.ErrUnsafe, path, uid, me)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %04o, which lets others read the API token; run chmod 600 %s", statedir.ErrUnsafe, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", fmt.Errorf("token: %s holds %d characters; a token needs at least 16 (remove the file and a new one is made)", path, len(token))
	}
	return token, nil
}
