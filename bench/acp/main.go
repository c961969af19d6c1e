// Command acp measures tend's protocol agents (protocol = "acp") with the
// real daemon, beside the same agent driven by the SDK's own client over
// pipes in the same run (bench/acp/README.md says what each phase
// measures and how to run it):
//
//   - prompt: -prompts prompts through tend prompt's route (POST
//     /v1/programs/{id}/prompt?wait=1) and directly: time to the first
//     message chunk and to end_turn, p50/p95;
//   - stream: a -stream-mb MB answer, through tend and directly:
//     throughput, and the daemon's CPU per MB;
//   - idle: -n idle ACP agents under one daemon: the daemon's PSS added
//     per agent at peak, its idle CPU, and a permission request reaching
//     tend status and the event stream (p50, from the agent's own clock).
//
// Every sample goes to bench/acp/results/STAMP/results.json with the
// settings, the machine and the commit; report.txt is derived from it, and
// -report derives it again. The agent both sides drive is this binary run
// as `acp agent` (agent.go).
//
//	go run ./bench/acp [-prompts 200] [-stream-mb 10] [-n 1000] [-phases prompt,stream,idle]
//	go run ./bench/acp -report bench/acp/results/STAMP
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Results is one run of the benchmark; a phase not run is absent.
type Results struct {
	Stamp   string          `json:"stamp"`
	Machine measure.Machine `json:"machine"`
	Source  measure.Source  `json:"source"`
	Phases  []string        `json:"phases"`
	Prompts int             `json:"prompts"`
	Stream  int             `json:"stream_bytes"`
	N       int             `json:"n"`
	Prompt  *PromptPhase    `json:"prompt,omitempty"`
	Streams *StreamPhase    `json:"stream,omitempty"`
	Idle    *IdlePhase      `json:"idle,omitempty"`
}

// PromptPhase: one sample per prompt on each side.
type PromptPhase struct {
	TendFirst, TendEnd     []measure.Ms
	DirectFirst, DirectEnd []measure.Ms
}

// StreamPhase: each side's time for the whole answer, and the CPU each
// process of a side spent on it: through tend the agent, the daemon and
// the client reading the SSE stream (this process); directly the agent
// and the SDK's client (this process).
type StreamPhase struct {
	Tend, Direct    measure.Ms
	TendBytes       int
	DirectBytes     int
	DaemonCPU       measure.Ms
	TendAgentCPU    measure.Ms `json:"tend_agent_cpu"`
	TendClientCPU   measure.Ms `json:"tend_client_cpu"`
	DirectAgentCPU  measure.Ms `json:"direct_agent_cpu"`
	DirectClientCPU measure.Ms `json:"direct_client_cpu"`
}

// IdlePhase: the daemon with no agent and with N, its idle CPU, and the
// permission latencies.
type IdlePhase struct {
	PSSBefore, PSSPeak, PSSAfter int64
	IdleCPU                      measure.Ms
	IdleWindow                   measure.Ms
	ToStatus, ToEvent            []measure.Ms
}

type options struct {
	phases   []string
	prompts  int
	streamMB int
	n        int
	idle     time.Duration
	asks     int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		agentMain() // the process role is chosen here, from argv
		return
	}
	var o options
	phases := flag.String("phases", "prompt,stream,idle", "phases to run, comma-separated")
	flag.IntVar(&o.prompts, "prompts", 200, "prompts on each side")
	flag.IntVar(&o.streamMB, "stream-mb", 10, "MB of the streamed answer")
	flag.IntVar(&o.n, "n", 1000, "idle ACP agents")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "the idle-CPU window")
	flag.IntVar(&o.asks, "asks", 50, "permission requests timed")
	report := flag.String("report", "", "print the report of a stored run (its directory) and exit")
	out := flag.String("out", "", "results directory (default bench/acp/results/STAMP)")
	flag.Parse()
	if *report != "" {
		var r Results
		if err := measure.ReadResults(*report, &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(render(&r))
		return
	}
	o.phases = strings.Split(*phases, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := run(ctx, o, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/acp:", err)
		os.Exit(1)
	}
	fmt.Println("results in", dir)
}

// run runs the phases and writes the results.
func run(ctx context.Context, o options, out string) (string, error) {
	wd, _ := os.Getwd()
	root, err := measure.ModuleRoot(wd)
	if err != nil {
		return "", err
	}
	start := time.Now()
	r := &Results{Stamp: measure.Stamp(start), Machine: measure.ReadMachine(), Source: measure.ReadSource(root),
		Phases: o.phases, Prompts: o.prompts, Stream: o.streamMB << 20, N: o.n}
	if out == "" {
		out = filepath.Join(root, "bench", "acp", "results", r.Stamp)
	}
	work, err := os.MkdirTemp("", "tendacp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	bin, err := measure.BuildTend(ctx, root, work)
	if err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if slices.Contains(o.phases, "prompt") || slices.Contains(o.phases, "stream") {
		if err := promptAndStream(ctx, o, r, bin, self, filepath.Join(work, "one")); err != nil {
			return "", err
		}
	}
	if slices.Contains(o.phases, "idle") {
		if r.Idle, err = idlePhase(ctx, o, bin, self, filepath.Join(work, "idle")); err != nil {
			return "", err
		}
	}
	r.Machine.LoadEnd = measure.Loadavg()
	return out, measure.WriteResults(out, r, render(r))
}
