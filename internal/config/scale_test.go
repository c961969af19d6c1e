package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fleet is a config of n programs, each its own [program.pN] table.
func fleet(n int) []byte {
	var b strings.Builder
	b.WriteString("[defaults]\nstop_grace = \"5s\"\n\n")
	for i := range n {
		fmt.Fprintf(&b, "[program.p%d]\ncommand = [\"sleep\", \"100000\"]\n", i)
	}
	return []byte(b.String())
}

// medianLoad is the median time of several loads of data.
func medianLoad(tb testing.TB, data []byte, runs int) time.Duration {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tend.toml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	times := make([]time.Duration, runs)
	for i := range times {
		start := time.Now()
		if _, err := Load(path); err != nil {
			tb.Fatal(err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[runs/2]
}

func BenchmarkLoad10000(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tend.toml")
	if err := os.WriteFile(path, fleet(10000), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
