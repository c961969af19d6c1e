package api

import (
	"net"
	"strings"
	"testing"
)

// FuzzHostHeader drives the two Host checks with any header value: the TCP
// front's (bound to every address, port 7070) lets through only loopback
// names and IP addresses on port 7070, the unix socket's only "tend",
// localhost and IP addresses, and neither ever a DNS name of another site.
func FuzzHostHeader(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:7070", "localhost:7070", "LOCALHOST.:7070", "[::1]:7070", "[fe80::1%eth0]:7070",
		"evil.example:7070", "127.0.0.1.nip.io:7070", "localhost.evil.example:7070", "tend", "",
		"127.0.0.1", ":7070", "[::1]", "[::1]:", "0x7f.1:7070", "127.1:7070", "xn--80ak6aa92e.com:7070",
	} {
		f.Add(s)
	}
	tcp := newHostCheck("0.0.0.0:7070", &net.TCPAddr{IP: net.IPv4zero, Port: 7070}, nil, false)
	f.Fuzz(func(t *testing.T, hostport string) {
		host := hostport
		port := ""
		if h, p, err := net.SplitHostPort(hostport); err == nil {
			host, port = h, p
		}
		host = normalHost(host)
		local := host == "localhost" || net.ParseIP(host) != nil
		if tcp.allowed(hostport) && (!local || port != "7070") {
			t.Fatalf("TCP let Host %q through", hostport)
		}
		if localHost(hostport) && !local && host != "tend" && host != "" {
			t.Fatalf("the socket let Host %q through", hostport)
		}
		if strings.Count(hostport, ":") == 1 && tcp.allowed(hostport) && !localHost(hostport) {
			t.Fatalf("Host %q passes TCP's check but not the socket's", hostport)
		}
	})
}
