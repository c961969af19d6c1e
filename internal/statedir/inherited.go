package statedir

import "fmt"

// Inherited is the state directory a process of tend's own was handed open
// as descriptor fd (the terminal keeper's descriptor 4), checked as Open
// checks it; path names it in messages. The Dir owns fd.
func Inherited(fd int, path string) (*Dir, error) {
	d := &Dir{path: path, fd: fd, health: newHealth()}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("inherited state directory: %w", err)
	}
	return d, nil
}
