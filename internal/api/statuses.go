package api

import (
	"net/http"
	"runtime"
	"sync"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/parallel"
	"github.com/tend-sh/tend/internal/program"
)

// A listing's statuses are derived as they are written: a part of listPart
// on each core at once, into a scratch array of that core's, so that at
// most a few hundred statuses exist at a time, whatever the fleet.

// writeStatuses writes l as the JSON array of its statuses.
func writeStatuses(w http.ResponseWriter, code int, l Statuses) {
	s := getScratch()
	defer putScratch(s)
	writeJSONParts(w, code, l.Len(), func(k, from, to int) []program.Status {
		return derive(l, s[k][:to-from], from)
	})
}

// writeTable writes l as the ps table, width wide, with the columns o asks
// for. A table needs every row before its first (the columns' widths): it
// keeps their cells.
func writeTable(w http.ResponseWriter, l Statuses, width int, o human.TableOptions) error {
	s := getScratch()
	defer putScratch(s)
	n, round := l.Len(), len(s)
	t := human.NewTable(o, n)
	for lo := 0; lo < n; lo += round * listPart {
		m := min(round, (n-lo+listPart-1)/listPart)
		parallel.Each(m, 1, func(k int) {
			from := lo + k*listPart
			derive(l, s[k][:min(listPart, n-from)], from)
		})
		for k := range m {
			for i := range s[k][:min(listPart, n-lo-k*listPart)] {
				t.Add(&s[k][i])
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return t.Write(w, width)
}

// derive fills dst with l's statuses from from on.
func derive(l Statuses, dst []program.Status, from int) []program.Status {
	for i := range dst {
		dst[i] = l.Status(from + i)
	}
	return dst
}

// scratch is a listing's arrays of statuses, one of listPart per core.
type scratch [][]program.Status

var scratchPool sync.Pool // of *scratch

func getScratch() scratch {
	if s, ok := scratchPool.Get().(*scratch); ok && len(*s) == runtime.GOMAXPROCS(0) {
		return *s
	}
	s := make(scratch, runtime.GOMAXPROCS(0))
	for k := range s {
		s[k] = make([]program.Status, listPart)
	}
	return s
}

func putScratch(s scratch) {
	for k := range s {
		clear(s[k]) // hold no labels, processes or specs of the past
	}
	scratchPool.Put(&s)
}
