package initproc

// Forwarded exposes the forwarded signal list to the external tests.
var Forwarded = forwarded
