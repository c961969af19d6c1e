package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/program"
)

// serveHTTP serves the API and the dashboard on daemon.http, if set, behind
// the API's TCP guard: it makes sure the token file exists, listens (HTTPS
// with tls_cert/tls_key, loaded by start), warns if other machines can reach
// a plain-HTTP port, and serves in the background. Once it returns, the unix
// socket hands out dashboard logins. stop closes the API server
// (idempotent: it is the same Close the daemon calls at its end) and waits
// for the TCP server to return. With daemon.http unset it does nothing and
// stop is a no-op.
func (d *daemon) serveHTTP(up *upgradeIn) (stop func(), err error) {
	addr := d.cfg.Daemon.HTTP
	if addr == "" {
		return func() {}, nil
	}
	tokenPath := filepath.Join(d.cfg.Daemon.StateDir, tokenName)
	token, err := loadToken(d.state.Root)
	if err != nil {
		return nil, err
	}
	l, err := d.listenTCP(addr, up)
	if err != nil {
		return nil, err
	}
	if d.tls == nil && !loopback(l.Addr()) && up == nil {
		d.note("warning: http = %q is reachable from other machines over plain HTTP, where the token and dashboard sessions travel in clear text; set tls_cert and tls_key, or bind 127.0.0.1", addr)
	}
	serve, err := d.api.AttachTCP(l, api.TCPOptions{Token: token, TLS: d.tls, Addr: addr, AddUnixOnly: d.cfg.Daemon.APIAdd == program.APIAddUnix})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(); err != nil {
			d.note("http: %v", err)
		}
	}()
	scheme := "http"
	if d.tls != nil {
		scheme = "https"
	}
	shown := addr
	if strings.HasSuffix(addr, ":0") {
		shown = l.Addr().String()
	}
	if up == nil {
		d.note("dashboard and API on %s://%s (token in %s; tend dashboard gives a login code)", scheme, shown, tokenPath)
	}
	return func() {
		d.api.Close()
		<-done
	}, nil
}

// listenTCP listens on addr, or takes up the listener the daemon before an
// upgrade handed over (a client connecting meanwhile waited in its queue).
func (d *daemon) listenTCP(addr string, up *upgradeIn) (net.Listener, error) {
	if up != nil {
		if f, ok := up.in.File(tcpFD); ok {
			l, err := net.FileListener(f)
			f.Close()
			if err == nil {
				return l, nil
			}
			d.note("upgrade: the TCP listener handed over: %v; listening again", err)
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http = %q: %w", addr, err)
	}
	return l, nil
}

// loopback reports whether addr is a loopback address, which only this
// machine reaches.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// loadTLS loads [daemon] tls_cert and tls_key, if set (nil if not). A file
// that cannot be read, or does not hold what it should, is a config error
// naming its key (exit 2).
func loadTLS(cfg *program.Config) (*tls.Config, error) {
	dm := cfg.Daemon
	if dm.TLSCert == "" {
		return nil, nil
	}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: [daemon] %s: %s", program.ErrBadConfig, cfg.File, key, fmt.Sprintf(format, args...))
	}
	certPEM, err := os.ReadFile(dm.TLSCert)
	if err != nil {
		return nil, bad("tls_cert", "%v", err)
	}
	keyPEM, err := os.ReadFile(dm.TLSKey)
	if err != nil {
		return nil, bad("tls_key", "%v", err)
	}
	if err := parseCert(certPEM); err != nil {
		return nil, bad("tls_cert", "%s: %v", dm.TLSCert, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM) // the certificate parses: what fails is the key
	if err != nil {
		return nil, bad("tls_key", "%s: %v (it must be the PEM private key of tls_cert's certificate)", dm.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// parseCert checks that data's first PEM certificate parses.
func parseCert(data []byte) error {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return errors.New("no PEM certificate in it")
		}
		if b.Type == "CERTIFICATE" {
			_, err := x509.ParseCertificate(b.Bytes)
			return err
		}
	}
}
