package acp

import (
	"context"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/tend-sh/tend/internal/program"
)

// chunkLines is n bytes of text as agent_message_chunk notifications of
// 4 KiB each, encoded by the SDK as an agent sends them.
func chunkLines(b *testing.B, n int) []byte {
	chunk := strings.Repeat("lorem ipsum \"dolor\" sit amet\n", 4096/29+1)[:4096]
	var out []byte
	for ; n > 0; n -= len(chunk) {
		out = append(out, notification(b, sdk.UpdateAgentMessageText(chunk[:min(n, len(chunk))]))...)
	}
	return out
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHotPath is what a streamed answer costs the daemon's side of
// a protocol run (docs/protocol.md): 10 MB of agent_message_chunk
// notifications over a pipe, through the line reader, the SDK's
// connection, the transcript and the raw records (appended as the log's
// frames are), and the prompt's follower. cpu-ms/MB is the process's CPU
// (the scripted agent's pipe writes included) per MB of text.
func BenchmarkHotPath(b *testing.B) {
	const size = 10 << 20
	answer := chunkLines(b, size)
	toAgentR, toAgentW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	fromAgentR, fromAgentW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer fromAgentW.Close()
	defer toAgentR.Close()
	go scriptedAgent(toAgentR, fromAgentW, answer)
	var mu sync.Mutex // the log's lock, as spawn.Output holds one
	var logBuf []byte
	frame := func(p []byte) {
		mu.Lock()
		if len(logBuf) > 4<<20 {
			logBuf = logBuf[:0] // written out
		}
		logBuf = append(logBuf, make([]byte, 13)...)
		logBuf = append(logBuf, p...)
		mu.Unlock()
	}
	c := Start(toAgentW, fromAgentR, Options{Cwd: "/", SessionID: "s", Attached: true, Permission: "allow", Hooks: Hooks{
		Text: frame,
		Raw:  func(_ bool, line []byte) { frame(line) },
	}})
	defer c.Close()
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		t, err := c.Prompt("go", true)
		if err != nil {
			b.Fatal(err)
		}
		got, stop := 0, ""
		for {
			var ups []program.TurnUpdate
			ups, stop, err = t.Next(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			for _, u := range ups {
				got += len(u.Text)
			}
			if stop != "" {
				break
			}
		}
		if got < size {
			b.Fatalf("followed %d bytes of %d (stop %s)", got, size, stop)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N)/(size/1e6), "cpu-ms/MB")
}
