package logfile

// Visit is Next for a follower that keeps nothing of the records but what
// it takes from them (the terminal keeper's records, fed to a screen: a
// flood of short lines is millions of records): fn gets each record the
// cursor wants, in the order of the files, its Line valid only during the
// call and its TS not read (zero). Nothing is copied, no Entry made.
func (c *Cursor) Visit(fn func(r *Record)) (more bool, err error) {
	c.visit = fn
	defer func() { c.visit = nil }()
	_, more, err = c.Next()
	return more, err
}

// visitLine hands one stored line to c.visit, its time not parsed.
func (c *Cursor) visitLine(line []byte) {
	r, ok := parseHead(line)
	if !ok {
		r = parseLine(line) // a line not in record form, shown as it is
	}
	if wants(&r, c.stderr, c.raw, c.reading) {
		c.visit(&r)
	}
}

// parseHead is Parse without the time: the layout checked, the digits not.
func parseHead(line []byte) (Record, bool) {
	var r Record
	if len(line) < tsLen+len(" out | ") || line[tsLen] != ' ' || line[tsLen-1] != 'Z' || line[10] != 'T' {
		return r, false
	}
	return parseStream(line[tsLen+1:])
}
