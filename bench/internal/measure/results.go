package measure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Results live in DIR/STAMP/, one directory per run: ResultsFile holds
// every sample the report quotes, the settings and the machine, and
// ReportFile the report printed from it (re-derivable with -report).
const (
	ResultsFile = "results.json"
	ReportFile  = "report.txt"
)

// Ms is a duration that JSON carries as milliseconds, a number with up to
// three decimals (a microsecond): raw samples stay readable and exact
// enough to derive any percentile again.
type Ms time.Duration

// NewMs is d to the microsecond, as a results file holds it: a value
// written and read back is the value measured.
func NewMs(d time.Duration) Ms { return Ms(d.Round(time.Microsecond)) }

// D is m as a time.Duration.
func (m Ms) D() time.Duration { return time.Duration(m) }

func (m Ms) MarshalJSON() ([]byte, error) {
	us := time.Duration(m).Round(time.Microsecond) / time.Microsecond
	return strconv.AppendFloat(nil, float64(us)/1000, 'f', -1, 64), nil
}

func (m *Ms) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("milliseconds: %w", err)
	}
	*m = Ms(math.Round(f * float64(time.Millisecond)))
	return nil
}

// MsOf converts samples for a results file.
func MsOf(ds []time.Duration) []Ms {
	out := make([]Ms, len(ds))
	for i, d := range ds {
		out[i] = NewMs(d)
	}
	return out
}

// Stamp names a run's directory: its start in UTC, as bench/peers does.
func Stamp(t time.Time) string { return t.UTC().Format("20060102T150405Z") }

// Machine is what the figures of a run depend on besides tend.
type Machine struct {
	Kernel     string `json:"kernel"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemMiB     int64  `json:"mem_mib"`
	Go         string `json:"go"`
	Euid       int    `json:"euid"`
	NofileSoft uint64 `json:"nofile_soft"`
	NofileHard uint64 `json:"nofile_hard"`
	PidMax     int    `json:"pid_max"`
	LoadStart  string `json:"loadavg_start"` // /proc/loadavg's first three fields
	LoadEnd    string `json:"loadavg_end"`
	WorkDir    string `json:"workdir,omitempty"` // WorkDir(os.TempDir()): where the state directories were
}

// ReadMachine describes this machine now (LoadEnd is the caller's to set).
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Euid: os.Geteuid(), LoadStart: Loadavg(), WorkDir: WorkDir(os.TempDir())}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		m.Kernel = string(b)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.MemMiB = kb >> 10
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		m.NofileSoft, m.NofileHard = lim.Cur, lim.Max
	}
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		m.PidMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return m
}

// Source is the tend code a run measured: the commit of the module root
// and whether the working tree differed from it.
type Source struct {
	Commit    string `json:"commit"`     // full hash of HEAD, "" outside git
	Describe  string `json:"describe"`   // git describe --always --dirty
	BuiltFrom string `json:"built_from"` // "working tree" or what was built instead
}

// ReadSource reads the commit of the repository at root.
func ReadSource(root string) Source {
	s := Source{BuiltFrom: "working tree"}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		s.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		s.Describe = strings.TrimSpace(string(out))
	}
	return s
}

// ModuleRoot is the directory of the go.mod that holds dir (tend's, when
// the benchmarks run from the repository).
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("not inside tend's module: run from the repository")
		}
	}
}

// WriteResults writes v as DIR/ResultsFile and report beside it, making DIR.
func WriteResults(dir string, v any, report []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ReportFile), report, 0o644)
}

// ReadResults decodes DIR/ResultsFile (or the file itself, if dir names
// one) into v, refusing fields v does not know: a report must not be
// derived from figures it silently ignores.
func ReadResults(dir string, v any) error {
	file := dir
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		file = filepath.Join(dir, ResultsFile)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
