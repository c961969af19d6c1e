package api

// Unauthenticated connections cannot slow GET /healthz past a second
// (docs/trust.md#tcp): a probe must not fail because some local user opened
// connections and sent nothing, or sent their headers a byte at a time,
// even past the connection cap and connecting again whenever dropped. The
// bound is the contract's, so it is what is asserted, robustly: the best
// of five probes.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestHealthzBesideIdleConnections(t *testing.T) {
	for _, n := range []int{200, 2 * defaultMaxConns} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newTCP(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			defer func() {
				close(stop)
				wg.Wait()
			}()
			for i := range n {
				slow := i%2 == 1 // the other half sends nothing
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						c, err := net.Dial("tcp", f.addr)
						if err != nil {
							time.Sleep(10 * time.Millisecond)
							continue
						}
						attack(c, slow, stop)
						c.Close()
					}
				})
			}
			time.Sleep(time.Second) // they connect
			hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			best := time.Hour
			for range 5 {
				start := time.Now()
				resp, err := hc.Get(f.base + "/healthz")
				took := time.Since(start)
				if err != nil {
					t.Logf("healthz: %v after %v", err, took)
					continue
				}
				resp.Body.Close()
				t.Logf("healthz: %d in %v", resp.StatusCode, took)
				if resp.StatusCode != 200 {
					t.Errorf("healthz: %d", resp.StatusCode)
				}
				best = min(best, took)
				time.Sleep(200 * time.Millisecond)
			}
			if best > time.Second {
				t.Errorf("healthz beside %d silent or slow connections took %v at best, want at most 1s", n, best)
			}
		})
	}
}

// attack holds c until the server drops it or stop: silent, or sending a
// request head a byte every 100 ms that never ends.
func attack(c net.Conn, slow bool, stop <-chan struct{}) {
	dropped := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c) // ends when the server closes c (or c is closed here)
		close(dropped)
	}()
	defer func() {
		c.Close()
		<-dropped
	}()
	head := []byte("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-dropped:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if !slow {
			continue
		}
		b := byte('x')
		if i < len(head) {
			b = head[i]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
	}
}
