package daemon

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/tend-sh/tend/internal/dashboard"
)

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
	token, err := loadToken(d.state.Root)
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
