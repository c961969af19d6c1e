package client

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestReadResponse reads the answers the API gives (net/http's server
// writes them: the client tests against api.Server hold the real ones)
// and the ways one can be broken.
func TestReadResponse(t *testing.T) {
	for _, c := range []struct {
		name, in, method string
		status           int
		body, mark       string
		err              string // of reading the head, or else of the body
	}{
		{name: "length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello and more", status: 200, body: "hello"},
		{name: "chunked with a trailer", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Tend-Log-Mark\r\n\r\n" +
			"6\r\nline 1\r\n7;ext=1\r\n\nline 2\r\n0\r\nTend-Log-Mark: 42\r\n\r\n", status: 200, body: "line 1\nline 2", mark: "42"},
		{name: "to the end", in: "HTTP/1.0 200 OK\r\n\r\nall of it", status: 200, body: "all of it"},
		{name: "no content", in: "HTTP/1.1 204 No Content\r\n\r\n", status: 204},
		{name: "an error answer", in: "HTTP/1.1 404 Not Found\r\nContent-Length: 14\r\n\r\n{\"error\":\"no\"}", status: 404, body: `{"error":"no"}`},
		{name: "cut in a chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhalf", status: 200, body: "half", err: "unexpected EOF"},
		{name: "cut before the last chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nhalf\r\n", status: 200, body: "half", err: "unexpected EOF"},
		{name: "cut in the length", in: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhalf", status: 200, body: "half", err: "unexpected EOF"},
		{name: "a bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 200, err: `bad chunk size line "zz"`},
		{name: "no CRLF after a chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n", status: 200, body: "ab", err: "chunk not followed by CRLF"},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n\r\n", err: `not an HTTP/1 status line: "SSH-2.0-OpenSSH"`},
		{name: "a bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: `bad Content-Length "-1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := readResponse(bufio.NewReader(strings.NewReader(c.in)), cmp.Or(c.method, "GET"))
			if err != nil {
				if c.err == "" || err.Error() != c.err {
					t.Fatalf("head: %v, want %q", err, c.err)
				}
				return
			}
			b, err := io.ReadAll(resp.body)
			if resp.status != c.status || string(b) != c.body || errString(err) != c.err {
				t.Errorf("status %d, body %q, error %v; want %d, %q, %q", resp.status, b, err, c.status, c.body, c.err)
			}
			if got := resp.body.trailer.Get("Tend-Log-Mark"); got != c.mark {
				t.Errorf("trailer's mark %q, want %q", got, c.mark)
			}
			if err := resp.body.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzReadResponse: whatever comes on the socket, the client does not
// panic, and a chunked body, however it is cut into chunks, reads back
// whole.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("a body\nof lines"), uint8(3), []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"))
	f.Add([]byte(""), uint8(1), []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"))
	f.Fuzz(func(t *testing.T, body []byte, size uint8, raw []byte) {
		if resp, err := readResponse(bufio.NewReader(strings.NewReader(string(raw))), "GET"); err == nil {
			io.ReadAll(io.LimitReader(resp.body, 1<<20))
		}
		n := max(int(size), 1)
		var enc strings.Builder
		enc.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for rest := body; len(rest) > 0; rest = rest[min(n, len(rest)):] {
			fmt.Fprintf(&enc, "%x\r\n%s\r\n", min(n, len(rest)), rest[:min(n, len(rest))])
		}
		enc.WriteString("0\r\n\r\n")
		resp, err := readResponse(bufio.NewReader(strings.NewReader(enc.String())), "GET")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.body)
		if err != nil || string(got) != string(body) {
			t.Fatalf("read %q, %v; want %q", got, err, body)
		}
		if _, err := resp.body.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("after the end: %v", err)
		}
	})
}
