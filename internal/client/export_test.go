package client

// SetEventPage sets how many events one backlog request asks for.
func SetEventPage(n int) { eventPage = n }
