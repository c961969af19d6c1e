package statedir

// Fsyncs is how many Commit batches were flushed so far.
func Fsyncs() uint64 { return fsyncs.Load() }
