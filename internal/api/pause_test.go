package api_test

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// Pause (for an upgrade) ends the streams, waits for a request under way
// to answer, and leaves a client that connects meanwhile waiting, not
// refused: it is answered once the API serves again (here after Resume;
// in an upgrade by the new daemon, from the listener ListenerFDs hands
// it). A request on a keep-alive connection after Pause closes it.
func TestPauseWaitsAndQueues(t *testing.T) {
	srv, b, ev := newServer(t)
	b.WaitDelay = 500 * time.Millisecond
	path := serveUnix(t, srv)
	hc := unixClient(path)
	ev.Publish("daemon", "", map[string]string{"phase": "started"})

	stream, err := hc.Get("http://tend/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan int, 1)
	go func() {
		resp, err := hc.Post("http://tend/v1/programs/web/stop?wait=1", "application/json", nil)
		if err != nil {
			inFlight <- -1
			return
		}
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond) // the stop is under way
	start := time.Now()
	if err := srv.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("Pause returned after %v, before the stop under way answered", time.Since(start))
	}
	if code := <-inFlight; code != 200 {
		t.Errorf("the request under way: %d", code)
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, stream.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Pause did not end the event stream")
	}

	late := make(chan string, 1)
	go func() {
		resp, err := unixClient(path).Get("http://tend/healthz")
		if err != nil {
			late <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		late <- string(body)
	}()
	select {
	case got := <-late:
		t.Fatalf("answered while paused: %s", got)
	case <-time.After(300 * time.Millisecond):
	}
	fds, err := srv.ListenerFDs()
	if err != nil || len(fds) != 1 {
		t.Fatalf("ListenerFDs: %v %v", fds, err)
	}
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "listener")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil || l.Addr().String() != path {
			t.Errorf("the listener handed over: %v %v", l, err)
		}
		if l != nil {
			l.Close()
		}
	}
	srv.Resume()
	if got := <-late; !strings.Contains(got, `"ok":true`) {
		t.Errorf("the client that waited: %s", got)
	}
	resp, err := hc.Get("http://tend/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after Resume: %v", err)
	}
	resp.Body.Close()
}

// An upgrade the backend refuses is answered as any error; one that fails
// after the connection was handed off is answered on the connection.
func TestUpgradeAnswers(t *testing.T) {
	srv, b, _ := newServer(t)
	path := serveUnix(t, srv)
	hc := unixClient(path)
	for _, handoff := range []bool{false, true} {
		b.UpgradeHandoff = handoff
		resp, err := hc.Post("http://tend/v1/upgrade", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 501 || !strings.Contains(string(body), "cannot re-execute") {
			t.Errorf("handoff %v: %d %s", handoff, resp.StatusCode, body)
		}
	}
}
