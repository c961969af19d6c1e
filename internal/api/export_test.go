package api

import "time"

// SetTimings shortens the SSE keepalive interval and the log follow poll
// for tests.
func SetTimings(s *Server, keepalive, poll time.Duration) {
	s.keepalive, s.poll = keepalive, poll
}
