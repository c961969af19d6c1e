// Package notify is tend's sd_notify server: one unix datagram socket per
// instance, speaking systemd's notify protocol so that existing clients
// (systemd-notify, go-systemd's daemon.SdNotify, python sdnotify) work
// unchanged with NOTIFY_SOCKET pointing at it.
//
// A datagram is newline-separated KEY=VALUE assignments. Parse turns one into
// a Message; Listen binds a socket and hands every valid Message to a handler,
// in arrival order, from the shared epoll loop (internal/epoll). A message belongs to
// the socket that received it: the sender's pid is never used to attribute it
// (as root, systemd-notify stamps its parent's pid in the credentials).
//
// Each assignment of a datagram stands on its own: a bad one is skipped and
// the rest apply. A datagram with no good assignment, a NUL byte, or more
// than MaxDatagram bytes is dropped whole and counted, with a reason
// (DropReason) for the daemon's metrics; a passed file descriptor
// is always closed at once, because systemd-notify sends BARRIER=1 with a pipe
// and waits until the server has closed it.
//
// An idle Socket costs a descriptor in the epoll set and no goroutine or read
// buffer (buffers are pooled and taken only when a datagram is ready), so a
// daemon can hold a thousand of them.
package notify
