package logfile

import (
	"fmt"
	"strconv"
	"strings"
)

// A mark is where a Cursor is, as text another Cursor can take up: in
// another request of this process, or in the daemon after an upgrade in
// place. It names each source's file by its inode, which survives the
// exec (a Log's generations count this process's rotations and do not).

// Mark is where c is: "ID/INODE/OFFSET" for each source, comma-separated.
func (c *Cursor) Mark() string {
	parts := make([]string, len(c.srcs))
	for i, s := range c.srcs {
		parts[i] = s.ID + "/" + strconv.FormatUint(c.pos[i].ino, 10) + "/" + strconv.FormatInt(c.pos[i].off, 10)
	}
	return strings.Join(parts, ",")
}

// Resume is a Cursor at mark (Mark's) over the sources of srcs that mark
// names; the others are left out, so a follower goes on with what it
// followed. A source whose marked file was rotated out since goes on from
// its oldest file kept.
func Resume(srcs []Source, mark string, stderr, raw bool) (*Cursor, error) {
	at := map[string]position{}
	for part := range strings.SplitSeq(mark, ",") {
		f := strings.Split(part, "/")
		if len(f) != 3 {
			return nil, fmt.Errorf("log mark %q: want ID/INODE/OFFSET", part)
		}
		ino, err1 := strconv.ParseUint(f[1], 10, 64)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || off < 0 {
			return nil, fmt.Errorf("log mark %q: want ID/INODE/OFFSET", part)
		}
		at[f[0]] = position{ino: ino, off: off}
	}
	c := &Cursor{stderr: stderr, raw: raw}
	for _, s := range srcs {
		p, ok := at[s.ID]
		if !ok {
			continue
		}
		p.gen = s.Log.genOf(p.ino)
		p.ver = ^uint64(0) // no Version of this Log says it was read: read it at once
		c.srcs = append(c.srcs, s)
		c.pos = append(c.pos, p)
	}
	return c, nil
}

// genOf is the generation a position in the file with inode ino has (see
// openFrom): the log's, less the file's place among its files. For an
// inode none of them has, a generation no file has.
func (l *Log) genOf(ino uint64) uint64 {
	defer l.holdSet()() // first: a rotation takes the file's lock before rot
	l.rot.RLock()
	defer l.rot.RUnlock()
	for i := 0; i <= maxGens && ino != 0; i++ {
		fl, ok := l.openGen(i)
		if !ok {
			if i > 0 {
				break
			}
			continue
		}
		fl.f.Close()
		if fl.ino == ino {
			return l.gen - uint64(i) // modular: also right when the files predate this process's count
		}
	}
	return l.gen - maxGens - 2
}
