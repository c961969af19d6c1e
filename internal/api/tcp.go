package api

// The TCP front (docs/trust.md#tcp): anyone who can reach the port may open
// connections, so beside the access guard (access.go) it bounds what a
// connection costs:
//
//   - at most MaxConns connections at once. At the cap, idle keep-alive
//     connections are closed to make room, else the oldest connection that
//     has not yet sent a whole request head (it has proved nothing: silent,
//     or sending its headers a byte at a time); past that a new connection
//     waits until one ends. So connections that prove nothing cannot keep
//     GET /healthz waiting (docs/trust.md#tcp).
//     They end soon anyway: headers within 5 s, a body within 30 s.
//   - each write must make progress within WriteTimeout: a client that stops
//     reading a stream (events, log follow) or a large answer is dropped,
//     and its handler ends.
//   - the Host header must be this server (hostCheck): the bound address,
//     a loopback name, or (under TLS) a name of the certificate.
//   - TLS, when given, is HTTP/1.1 only, so one connection carries one
//     request at a time and the cap bounds requests too.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TCPOptions configure the API's TCP front.
type TCPOptions struct {
	// Token is what "Authorization: Bearer" must carry. Required.
	Token string
	// TLS, when not nil, serves HTTPS with its Certificates; session
	// cookies are then Secure. nil: plain HTTP.
	TLS *tls.Config
	// Addr is the address as configured, such as "myhost:7070": its host
	// is accepted in Host headers beside the listener's own address and the
	// loopback names. "": the listener's address.
	Addr string
	// MaxConns caps concurrent connections. 0: 256.
	MaxConns int
	// WriteTimeout drops a client that takes no part of a write for this
	// long. 0: 30 s.
	WriteTimeout time.Duration
	// AddUnixOnly refuses POST /v1/programs over TCP, token or not
	// ([daemon] api_add = "unix"): adding a program runs any command as
	// the daemon's user (docs/trust.md#the-token-is-root).
	AddUnixOnly bool
}

// Defaults of TCPOptions, and the timeouts of the TCP server: shorter than
// the unix socket's, since anyone on the network may open a connection.
const (
	defaultMaxConns      = 256
	defaultWriteTimeout  = 30 * time.Second
	tcpReadHeaderTimeout = 5 * time.Second
	tcpIdleTimeout       = 60 * time.Second
	tcpMaxHeaderBytes    = 64 << 10
	// writeChunk is the most one write deadline covers, so a slow but
	// reading client is not dropped in the middle of a large answer.
	writeChunk = 16 << 10
)

// ServeTCP is AttachTCP, then serving until Close. It returns nil after
// Close, and an error for bad options or from the listener.
func (s *Server) ServeTCP(l net.Listener, opts TCPOptions) error {
	serve, err := s.AttachTCP(l, opts)
	if err != nil {
		return err
	}
	return serve()
}

// AttachTCP readies the API on l behind the access guard: from its return
// the unix socket hands out dashboard logins for it (POST
// /v1/dashboard/login). serve then serves until Close; it closes l. On an
// error (an empty token) l is closed and nothing is served.
func (s *Server) AttachTCP(l net.Listener, opts TCPOptions) (serve func() error, err error) {
	if opts.Token == "" {
		l.Close()
		return nil, errors.New("api: a TCP listener without a token")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = defaultMaxConns
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	addr := opts.Addr
	if addr == "" {
		addr = l.Addr().String()
	}
	capped := newCapListener(s.gated(l, "api.tcp"), opts.MaxConns, opts.WriteTimeout)
	var ln net.Listener = capped
	var certs []tls.Certificate
	scheme := "http"
	if opts.TLS != nil {
		conf := opts.TLS.Clone()
		conf.NextProtos = []string{"http/1.1"}
		if conf.MinVersion == 0 {
			conf.MinVersion = tls.VersionTLS12
		}
		certs = conf.Certificates
		ln = tls.NewListener(capped, conf)
		scheme = "https"
	}
	hosts := newHostCheck(addr, l.Addr(), certs, opts.TLS != nil)
	srv := &http.Server{
		Handler: capped.served(s.guard(sha256.Sum256([]byte(opts.Token)), hosts, opts.AddUnixOnly)),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ReadHeaderTimeout: tcpReadHeaderTimeout,
		IdleTimeout:       tcpIdleTimeout,
		MaxHeaderBytes:    tcpMaxHeaderBytes,
		ConnState: func(c net.Conn, st http.ConnState) {
			capped.track(c, st)
			s.trackConn(c, st)
		},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, // no HTTP/2
		// Anyone on the network can cause "TLS handshake error" lines;
		// they would drown tend's event lines.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	s.mu.Lock()
	if s.dashboard == "" {
		s.dashboard = scheme + "://" + hosts.browser
	}
	s.mu.Unlock()
	return func() error { return s.serve(ln, srv) }, nil
}

// capListener holds one slot per open connection and wraps each in a
// tcpConn. At the cap, Accept takes the next connection and waits for a
// free slot before it returns it; while it waits, idle connections, or if
// there are none the oldest fresh one, are closed to make room.
type capListener struct {
	net.Listener
	slots     chan struct{} // one token per open connection
	timeout   time.Duration // each write's deadline
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once

	mu      sync.Mutex            // guards idle, fresh and waiting
	idle    map[net.Conn]struct{} // connections between requests, by ConnState
	fresh   map[net.Conn]uint64   // connections no request head has come whole on yet, by accept order
	order   uint64                // the last accept's number in fresh
	waiting bool                  // Accept waits for a slot
}

// connKey is, in a request's context, the connection it came on (as the
// http.Server's ConnState hook sees it).
type connKey struct{}

func newCapListener(l net.Listener, n int, timeout time.Duration) *capListener {
	return &capListener{Listener: l, slots: make(chan struct{}, n), timeout: timeout,
		done: make(chan struct{}), idle: map[net.Conn]struct{}{}, fresh: map[net.Conn]uint64{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		return l.wrap(c), nil
	default:
	}
	// At the cap: take the connection that is waiting first, so that room
	// is made only for one that came (no connection is shed for nothing),
	// then make room and wait for it. It is held outside the cap meanwhile:
	// one at most, as one goroutine accepts.
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.setWaiting(true) // and close the idle, or the oldest fresh: their clients reconnect when they need to
	defer l.setWaiting(false)
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		c.Close()
		return nil, net.ErrClosed
	}
	return l.wrap(c), nil
}

// wrap is c holding the slot just taken.
func (l *capListener) wrap(c net.Conn) net.Conn {
	return &tcpConn{Conn: c, timeout: l.timeout, release: func() { <-l.slots }}
}

func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// setWaiting records whether Accept waits for a slot; when it starts to,
// every idle connection is closed, or if there is none the oldest fresh one.
func (l *capListener) setWaiting(w bool) {
	l.mu.Lock()
	l.waiting = w
	idle := l.idle
	if w {
		l.idle = map[net.Conn]struct{}{}
		if len(idle) == 0 {
			var oldest net.Conn
			var first uint64
			for c, n := range l.fresh {
				if oldest == nil || n < first {
					oldest, first = c, n
				}
			}
			if oldest != nil {
				delete(l.fresh, oldest)
				idle[oldest] = struct{}{}
			}
		}
	}
	l.mu.Unlock()
	if w {
		for c := range idle {
			c.Close()
		}
	}
}

// served marks each request's connection as having sent a whole request
// head: it is no longer the first to go at the cap.
func (l *capListener) served(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			l.mu.Lock()
			delete(l.fresh, c)
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// track is the http.Server's ConnState hook: it keeps the idle set, and
// closes a connection that goes idle while Accept waits.
func (l *capListener) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	reclaim := st == http.StateIdle && l.waiting
	if st == http.StateIdle && !reclaim {
		l.idle[c] = struct{}{}
	} else {
		delete(l.idle, c)
	}
	switch st {
	case http.StateNew:
		l.order++
		l.fresh[c] = l.order
	case http.StateIdle, http.StateClosed, http.StateHijacked:
		delete(l.fresh, c)
	}
	l.mu.Unlock()
	if reclaim {
		c.Close()
	}
}

// tcpConn is one TCP connection: each write gets a deadline, and closing
// it gives its slot back once.
type tcpConn struct {
	net.Conn
	timeout time.Duration
	once    sync.Once
	release func()
}

// Write writes b in chunks, each of which must be taken within timeout.
func (c *tcpConn) Write(b []byte) (int, error) {
	var n int
	for len(b) > 0 {
		chunk := b[:min(len(b), writeChunk)]
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return n, err
		}
		m, err := c.Conn.Write(chunk)
		n += m
		if err != nil {
			return n, err
		}
		b = b[m:]
	}
	return n, nil
}

func (c *tcpConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close after an answer, as it does on a
// bare *net.TCPConn, so the client reads the answer before the close.
func (c *tcpConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// hostCheck is the Host allowlist of one TCP front: a page of another site
// that gets the browser to reach this port through a name of its own (DNS
// rebinding) names that site in Host, and is refused.
type hostCheck struct {
	port    string          // the listener's port
	names   map[string]bool // lower-case hosts, IPv6 without brackets
	anyIP   bool            // bound to every address: any IP literal (no name can be rebound)
	tls     bool            // a Host without a port means 443, else 80
	browser string          // host:port a browser on this machine should use
}

func newHostCheck(configured string, bound net.Addr, certs []tls.Certificate, isTLS bool) *hostCheck {
	h := &hostCheck{names: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}, tls: isTLS}
	var ip net.IP
	if ta, ok := bound.(*net.TCPAddr); ok {
		ip = ta.IP
		h.port = strconv.Itoa(ta.Port)
	}
	if ip == nil || ip.IsUnspecified() {
		h.anyIP = true
	} else {
		h.names[ip.String()] = true
	}
	host, _, _ := net.SplitHostPort(configured)
	if host != "" && !h.anyIP {
		h.names[normalHost(host)] = true
	}
	var certName string
	for _, c := range certs {
		if c.Leaf == nil {
			continue
		}
		for _, n := range c.Leaf.DNSNames {
			h.names[normalHost(n)] = true
			if certName == "" {
				certName = n
			}
		}
		for _, a := range c.Leaf.IPAddresses {
			h.names[a.String()] = true
		}
	}
	// A browser reaches a listener on every address through loopback, or
	// through the certificate's name, which is what it will check.
	switch {
	case !h.anyIP && host != "":
		h.browser = net.JoinHostPort(host, h.port)
	case certName != "":
		h.browser = net.JoinHostPort(certName, h.port)
	default:
		h.browser = net.JoinHostPort("127.0.0.1", h.port)
	}
	return h
}

// allowed reports whether a Host header names this server.
func (h *hostCheck) allowed(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil { // no port: the scheme's
		host, port = hostport, "80"
		if h.tls {
			port = "443"
		}
	}
	if port != h.port || host == "" {
		return false
	}
	host = normalHost(host)
	return h.names[host] || (h.anyIP && net.ParseIP(host) != nil)
}

// normalHost is a host name as compared: lower case, no trailing dot, no
// IPv6 brackets.
func normalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
