package testutil

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that one goroutine (a running daemon, a CLI
// command) may write while the test reads it.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
