package vt

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/testutil"
)

// realistic is a stream like an agent's terminal: a build log scrolling in
// colour, a full-screen program repainting, wide text, and the seeds
// recorded from real programs.
func realistic() []byte {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "\x1b[32m[%05d]\x1b[0m compiling package number %d of the build \x1b[1;33mwarning\x1b[0m: unused\r\n", i, i)
	}
	for frame := range 200 {
		b.WriteString("\x1b[?2026h\x1b[H")
		for row := range 40 {
			fmt.Fprintf(&b, "\x1b[%d;1H\x1b[38;5;%dm%3d%%\x1b[0m │ %s\x1b[K", row+1, (frame+row)%256, frame%100, strings.Repeat("─", row%50))
		}
		b.WriteString("\x1b[40;1H\x1b[7m status: 中文 text and emoji 😀 \x1b[0m\x1b[?2026l")
	}
	seeds, _ := filepath.Glob("testdata/fuzz/FuzzFeed/*")
	for _, f := range seeds {
		if data, err := os.ReadFile(f); err == nil {
			b.Write(data) // the corpus file's text: escapes as text, a mix
		}
	}
	return []byte(b.String())
}

// BenchmarkFeed feeds a large realistic stream, in reads of 16 KiB as the
// terminal's reader does.
func BenchmarkFeed(b *testing.B) {
	data := realistic()
	s := NewScreen(DefaultSize)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for p := data; len(p) > 0; {
			n := min(len(p), 16<<10)
			s.Feed(p[:n])
			p = p[n:]
		}
	}
}

// BenchmarkFeedScroll is plain lines scrolling the whole screen: a program
// that floods its terminal.
func BenchmarkFeedScroll(b *testing.B) {
	data := []byte(strings.Repeat("a line of plain output text, scrolling the whole screen up by one\r\n", 4000))
	s := NewScreen(DefaultSize)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s.Feed(data)
	}
}

// BenchmarkFeedScrollHistory is BenchmarkFeedScroll with tty_history's
// default: every line that leaves the screen is kept.
func BenchmarkFeedScrollHistory(b *testing.B) {
	data := []byte(strings.Repeat("a line of plain output text, scrolling the whole screen up by one\r\n", 4000))
	s := NewScreen(DefaultSize)
	s.SetHistory(2000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s.Feed(data)
	}
}

// BenchmarkRedraw is what a client that attaches (or falls behind) costs.
func BenchmarkRedraw(b *testing.B) {
	s := NewScreen(DefaultSize)
	s.Feed(realistic())
	var buf []byte
	for b.Loop() {
		buf = s.Redraw(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes/redraw")
}

// promptScreen is what an idle agent shows: some output and a prompt.
var promptScreen = []byte(strings.Repeat("\x1b[1mtool\x1b[0m: some output line of an idle agent's last turn\r\n", 30) + "\x1b[36m>\x1b[0m ")

// BenchmarkIdleScreen reports the heap an idle 120x40 screen holds.
func BenchmarkIdleScreen(b *testing.B) {
	for b.Loop() {
		per := testutil.HeapPer(200, func() any {
			s := NewScreen(DefaultSize)
			s.Feed(promptScreen)
			return s
		})
		b.ReportMetric(per, "bytes/screen")
	}
}

// TestIdleScreenIsSmall keeps the screen's cost in sight: a 120x40 screen
// is 4,800 cells of 8 bytes, and little else.
func TestIdleScreenIsSmall(t *testing.T) {
	per := testutil.HeapPer(100, func() any {
		s := NewScreen(DefaultSize)
		s.Feed(promptScreen)
		return s
	})
	t.Logf("an idle 120x40 screen holds %.0f bytes of heap", per)
	if per > 64<<10 {
		t.Errorf("an idle 120x40 screen holds %.0f bytes", per)
	}
}

// historyText is 2,000 lines of 120 columns of typical text scrolling
// through a 120x40 screen: a build log in colour, lines of 40 to 120
// columns (shorter ones, and blank ones, between), as an agent's terminal
// shows.
func historyText() []byte {
	var b strings.Builder
	for i := range 2000 + 40 {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "\x1b[32m[%05d]\x1b[0m compiling internal/package%d/file_%d.go (%d of 2040) \x1b[1;33mwarning\x1b[0m: unused variable x%d\r\n", i, i%97, i, i, i*7)
		case 1:
			fmt.Fprintf(&b, "    --> internal/package%d/file_%d.go:%d:%d: declared and not used: result%d (see docs/errors.md#unused for why)\r\n", i%97, i, i%400, i%80, i)
		case 2:
			b.WriteString("\r\n")
		case 3:
			fmt.Fprintf(&b, "ok  \tgithub.com/example/project/internal/package%d\t%d.%03ds\tcoverage: %d.%d%% of statements\r\n", i%97, i%9, i%1000, i%100, i%10)
		default:
			fmt.Fprintf(&b, "\x1b[2m%s\x1b[0m %s\r\n", time.Date(2026, 1, 2, 3, 4, i%60, 0, time.UTC).Format(time.RFC3339), strings.Repeat("the quick brown fox jumps over ", 1+i%3))
		}
	}
	return []byte(b.String())
}

// historyCost is the heap a 120x40 screen with tty_history 2000 holds
// beyond one without history, after 2,000 lines scrolled off its top. Two
// collections at each end: the packers' pools, shared by every screen and
// emptied by the second, are not a run's cost.
func historyCost() float64 {
	data := historyText()
	heap := func(lines int) float64 {
		const n = 100
		keep := make([]*Screen, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range keep {
			keep[i] = NewScreen(DefaultSize)
			keep[i].SetHistory(lines)
			keep[i].Feed(data)
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	}
	return heap(2000) - heap(0)
}

// BenchmarkHistory reports the heap the history of a tty run costs at
// 2,000 lines of 120 columns (docs/terminal.md: at most 64 KiB), and the
// time to read it all back (tend screen --history 2000).
func BenchmarkHistory(b *testing.B) {
	s := NewScreen(DefaultSize)
	s.SetHistory(2000)
	s.Feed(historyText())
	for b.Loop() {
		if n := len(s.History(2000, false)); n < 1800 {
			b.Fatalf("%d lines", n)
		}
	}
	b.ReportMetric(historyCost(), "bytes-history/run")
}

// TestHistoryIsSmall keeps the history's cost in sight (docs/terminal.md).
func TestHistoryIsSmall(t *testing.T) {
	per := historyCost()
	t.Logf("2,000 lines of history cost %.0f bytes of heap per screen", per)
	if per > 64<<10 {
		t.Errorf("2,000 lines of history cost %.0f bytes per screen, more than 64 KiB", per)
	}
}

// BenchmarkResizeWithHistory is a resize that reflows a full history
// (2,000 lines) and the screen: 120 columns to 60 and back.
func BenchmarkResizeWithHistory(b *testing.B) {
	s := NewScreen(DefaultSize)
	s.SetHistory(2000)
	s.Feed(historyText())
	for b.Loop() {
		s.Resize(Size{Cols: 60, Rows: 40})
		s.Resize(DefaultSize)
	}
}

// BenchmarkFeedFlood is bench/terminal's flood as the daemon sees it:
// numbered lines ("%012d\n" as the program writes them, "\r\n" after the
// tty's ONLCR) in reads of 16 KiB, with tty_history's default of 2,000
// lines: every line scrolls into the history.
func BenchmarkFeedFlood(b *testing.B) {
	var sb strings.Builder
	for i := range 40000 {
		fmt.Fprintf(&sb, "%012d\r\n", i)
	}
	data := []byte(sb.String())
	s := NewScreen(DefaultSize)
	s.SetHistory(2000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for p := data; len(p) > 0; {
			n := min(len(p), 16<<10)
			s.Feed(p[:n])
			p = p[n:]
		}
	}
}
