// Package kept keeps what an operator decided, in the state directory, so
// that a daemon that stops, crashes or is upgraded does not forget it: the
// programs added over the API (programs.json), and the intent record of
// each instance (intent.json: operator state, fatal, scale counts, crash
// and restart counters, backoff deadline), which the next daemon reads
// after an unclean stop and a clean stop removes. The runs themselves, which processes are in place, are
// package runs' business (runs.json): those are facts of the machine, not
// decisions of an operator.
//
// Each file is one record per line, read and written through package
// statedir, which holds the rules once: files are opened without
// following a symlink, replaced atomically, and a file that cannot be read
// or parsed whole is set aside as NAME.corrupt-<UTC stamp> (never written
// over), with what can be read of it still used. Two shapes serve:
//
//   - rare changes that must survive a power cut too (tend add, tend rm,
//     tend scale): the whole file rewritten and flushed to disk at each
//     change (statedir.WriteFileAtomic with sync), in the order the
//     operator made them: programs.json;
//   - changes at every state change of an instance, many a second across a
//     fleet: a statedir.Table, one record per instance, each change
//     appended to a journal (by the table's writer, off the instance's
//     loop) and the file compacted at most once a second, so the files
//     stay bounded at 10,000 instances (program.MaxInstances): intent.json.
package kept
