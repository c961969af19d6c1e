package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-sh/tend/internal/dashboard"
)

// tokenName is the file in the state dir holding the TCP API's bearer token.
const tokenName = "token"

// serveHTTP serves the dashboard and the API on daemon.http, if set: it
// makes sure the token file exists, listens, mounts the dashboard, lets the
// unix socket hand out login links, and serves in the background. stop
// closes the API server (idempotent: it is the same Close the daemon calls
// at its end) and waits for the TCP server to return. With daemon.http
// unset it does nothing and stop is a no-op.
func (d *daemon) serveHTTP() (stop func(), err error) {
	addr := d.cfg.Daemon.HTTP
	if addr == "" {
		return func() {}, nil
	}
	tokenPath := filepath.Join(d.cfg.Daemon.StateDir, tokenName)
	token, err := loadToken(tokenPath)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http = %q: %w", addr, err)
	}
	ui := dashboard.Handler()
	d.api.Handle("GET /{$}", ui)
	d.api.Handle("GET /ui/", ui)
	d.api.EnableDashboardLogin(l.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.api.ServeTCP(l, token); err != nil {
			d.note("http: %v", err)
		}
	}()
	d.note("dashboard and API on http://%s (token in %s)", l.Addr(), tokenPath)
	return func() {
		d.api.Close()
		<-done
	}, nil
}

// loadToken returns the token in path, creating it (32 random bytes, hex,
// mode 0600) if it does not exist. An existing file is used as it is, but
// refused if others may read it or if it is too short to be a secret.
func loadToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
			os.Remove(path)
			return "", fmt.Errorf("token: %w", werr)
		}
		return token, nil
	case !errors.Is(err, fs.ErrExist):
		return "", fmt.Errorf("token: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token: %s has mode %04o, which lets others read the API token; run chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", fmt.Errorf("token: %s holds %d characters; a token needs at least 16 (remove the file and a new one is made)", path, len(token))
	}
	return token, nil
}
