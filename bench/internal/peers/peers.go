// Package peers reads one run of the side-by-side harness
// (bench/peers/results/STAMP: latency.json, crashloop.json, scale*.json,
// floor.jsonl) so that bench/restart and bench/scale can set the peers'
// figures of that run beside their own, instead of figures copied by hand
// from another day.
package peers

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Summary is the harness's summary of a list of samples (lib/harness.py).
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P95    float64 `json:"p95"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Latency is one tool's row of section 1 (SIGKILL of a supervised sleep), ms.
type Latency struct {
	Skipped  string  `json:"skipped"`
	Exit     Summary `json:"exit_ms"`
	Fork     Summary `json:"fork_ms"`
	Exec     Summary `json:"exec_ms"`
	Status   Summary `json:"status_ms"`
	CLI      Summary `json:"cli_ms"`
	CLICall  Summary `json:"cli_call_ms"`
	Failures int     `json:"failures"`
}

// Crash is one tool's row of section 2 (the /bin/false crash loop).
type Crash struct {
	Skipped       string  `json:"skipped"`
	Rate          Summary `json:"rate"`                   // restarts/s over the runs
	CPUPerRestart Summary `json:"sup_cpu_ms_per_restart"` // ms
}

// Scale is one run of one tool at one N (section 3). Runs before issue 22
// have no cold listing and no peak (zero here).
type Scale struct {
	Skipped   string  `json:"skipped"`
	Error     string  `json:"error"`
	UpS       float64 `json:"up_s"`
	NProc     int     `json:"nproc"`
	PSSKB     float64 `json:"pss_kb"`      // at rest
	RSSKB     float64 `json:"rss_kb"`      // at rest
	PeakPSSKB float64 `json:"peak_pss_kb"` // the largest sum seen through the cell
	IdleCPUMs float64 `json:"idle_cpu_ms"`
	IdleS     float64 `json:"idle_s"`
	List      Summary `json:"list_ms"`      // warm: back to back
	ListCold  Summary `json:"list_cold_ms"` // each the first call after 2 s without one
	ListedOK  bool    `json:"listed_ok"`
	StopS     float64 `json:"stop_s"`
	Loop      struct {
		Seconds float64 `json:"seconds"`
	} `json:"loop"` // go-floor only: the loop's own time
}

// Ok reports whether the run measured everything (for go-floor: its start).
func (s Scale) Ok() bool {
	return s.Skipped == "" && s.Error == "" && (s.IdleS > 0 || s.Loop.Seconds > 0)
}

// IdlePercent is the idle CPU as a percentage of one core.
func (s Scale) IdlePercent() float64 { return 100 * s.IdleCPUMs / 1000 / s.IdleS }

// Floor is one line of floor.jsonl (section 4).
type Floor struct {
	Lang     string  `json:"lang"`
	Mode     string  `json:"mode"`
	Workers  int     `json:"workers"`
	PerSec   float64 `json:"per_sec"`
	USMedian float64 `json:"us_median"`
	USP95    float64 `json:"us_p95"`
}

// Run is what one results directory holds; a file that is missing leaves
// its part empty.
type Run struct {
	Dir     string
	Stamp   string
	Latency map[string]Latency
	Crash   map[string]Crash
	Scale   map[string]map[int][]Scale // tool -> N -> runs
	Floor   []Floor
}

// Load reads the results directory dir.
func Load(dir string) (*Run, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	r := &Run{Dir: dir, Stamp: filepath.Base(filepath.Clean(dir)), Scale: map[string]map[int][]Scale{}}
	var lat struct {
		Tools map[string]Latency `json:"tools"`
	}
	if err := readJSON(filepath.Join(dir, "latency.json"), &lat); err != nil {
		return nil, err
	}
	r.Latency = lat.Tools
	var crash struct {
		Tools map[string]Crash `json:"tools"`
	}
	if err := readJSON(filepath.Join(dir, "crashloop.json"), &crash); err != nil {
		return nil, err
	}
	r.Crash = crash.Tools
	files, _ := filepath.Glob(filepath.Join(dir, "scale*.json"))
	slices.Sort(files)
	for _, f := range files {
		var sc struct {
			Tools map[string]map[string][]Scale `json:"tools"`
		}
		if err := readJSON(f, &sc); err != nil {
			return nil, err
		}
		for tool, byN := range sc.Tools {
			for ns, runs := range byN {
				n, err := strconv.Atoi(ns)
				if err != nil {
					return nil, fmt.Errorf("%s: N %q: %w", f, ns, err)
				}
				if r.Scale[tool] == nil {
					r.Scale[tool] = map[int][]Scale{}
				}
				r.Scale[tool][n] = append(r.Scale[tool][n], runs...)
			}
		}
	}
	if r.Floor, err = readFloor(filepath.Join(dir, "floor.jsonl")); err != nil {
		return nil, err
	}
	if len(r.Latency) == 0 && len(r.Crash) == 0 && len(r.Scale) == 0 && len(r.Floor) == 0 {
		return nil, fmt.Errorf("%s holds no results of bench/peers", dir)
	}
	return r, nil
}

// readJSON decodes file into v; a missing file leaves v as it is.
func readJSON(file string, v any) error {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

func readFloor(file string) ([]Floor, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Floor
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var fl Floor
		if err := json.Unmarshal([]byte(line), &fl); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, fl)
	}
	return out, sc.Err()
}

// Peers are the tools that are neither tend nor the floor, in a stable order.
func Peers[V any](m map[string]V) []string {
	var names []string
	for t := range m {
		if !strings.HasPrefix(t, "tend") && t != "go-floor" {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	return names
}

// FloorMedian is the median over the runs of a floor probe's figure
// (per_sec for spawn probes, us_median for wake-up probes); false if the
// probe was not run.
func (r *Run) FloorMedian(lang, mode string, workers int, spawn bool) (float64, bool) {
	var v []float64
	for _, f := range r.Floor {
		if f.Lang == lang && f.Mode == mode && (workers == 0 || f.Workers == workers) {
			if spawn {
				v = append(v, f.PerSec)
			} else {
				v = append(v, f.USMedian)
			}
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	return v[(len(v)-1)/2], true
}

// Cite names the run in a report: "bench/peers run STAMP".
func (r *Run) Cite() string { return "bench/peers run " + r.Stamp }

// Rel is how a results file records the peers directory dir: relative to
// the module root when it is inside it, so that the record holds wherever
// the repository is checked out.
func Rel(dir, root string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	if rel, err := filepath.Rel(root, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return abs
}

// Find loads a recorded peers directory: as given, else relative to root.
func Find(dir, root string) (*Run, error) {
	if filepath.IsAbs(dir) {
		return Load(dir)
	}
	if _, err := os.Stat(dir); err == nil {
		return Load(dir)
	}
	return Load(filepath.Join(root, dir))
}
