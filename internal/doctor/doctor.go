// Package doctor reads the audit log and says what went wrong lately: exits
// by cause per program, crash loops, memory-drain loops, wedges and budget
// warnings, each with one line of advice a person can act on. It streams the
// daily files and keeps only counts, so a day of a crash loop costs no more
// memory than a quiet one.
package doctor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// Report accumulates a program.DoctorReport.
type Report struct {
	program.DoctorReport
	byName map[string]*ProgramReport
	// storage: the degraded_storage events of the period, what the
	// state directory could not keep for a while.
	lostEvents uint64   // events the audit log lost (the gaps' sizes)
	lostFiles  []string // the files that could not be written, once each
	// keepers: the keeper_replaced events of the period (a keeper that
	// died, docs/terminal.md#a-keeper-that-dies), the last one's words.
	keepers    int
	keeperLast string
}

// ProgramReport is one program's part, with when each cause first and last
// happened.
type ProgramReport struct {
	*program.DoctorProgram
	first, last map[string]time.Time
}

// Scan reads the audit files in dir (events.ListFiles: every part of a
// day, oldest first) for events in [since, until].
func Scan(dir *statedir.Dir, since, until time.Time) (*program.DoctorReport, error) {
	r := newReport(since, until)
	files, err := events.ListFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Day.Add(24*time.Hour).Before(since) || f.Day.After(until) {
			continue
		}
		if err := r.scanFile(dir, f.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err // a file removed meanwhile (retention) is no error
		}
	}
	r.finish()
	return &r.DoctorReport, nil
}

func newReport(since, until time.Time) *Report {
	return &Report{
		DoctorReport: program.DoctorReport{Since: program.Time{Time: since}, Until: program.Time{Time: until}},
		byName:       map[string]*ProgramReport{},
	}
}

func (r *Report) scanFile(dir *statedir.Dir, name string) error {
	f, err := dir.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e program.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a torn line from a crash; readers skip it
		}
		r.Add(e)
	}
	return sc.Err()
}

// Add counts one event if it falls in the report's period.
func (r *Report) Add(e program.Event) {
	if e.TS.Before(r.Since.Time) || e.TS.After(r.Until.Time) {
		return
	}
	if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseDegradedStorage {
		r.addStorage(d)
		return
	}
	if d, ok := e.Data.(*program.DaemonPhase); ok && d.Phase == program.PhaseKeeperReplaced {
		r.addKeeper(e.TS, d)
		return
	}
	if e.Program == "" {
		return
	}
	r.Events++
	p := r.program(e.Program)
	switch d := e.Data.(type) {
	case *program.Exited:
		p.Exits[d.LikelyCause]++
		if p.first[d.LikelyCause].IsZero() {
			p.first[d.LikelyCause] = e.TS
		}
		p.last[d.LikelyCause] = e.TS
		if isCrash(d.LikelyCause) {
			p.LastCrash, p.LastID = exitText(d)+" on "+e.ID, e.ID
		}
	case *program.HealthWarn:
		p.Warnings[d.Reason]++
	case *program.Wedged:
		p.Wedges[d.Source]++
	case *program.GaveUp:
		p.GaveUp++
	case *program.SpawnFailed:
		if len(p.SpawnErrors) < 3 && !slices.Contains(p.SpawnErrors, d.Error) {
			p.SpawnErrors = append(p.SpawnErrors, d.Error)
		}
	}
}

func (r *Report) program(name string) *ProgramReport {
	p, ok := r.byName[name]
	if !ok {
		p = &ProgramReport{
			DoctorProgram: &program.DoctorProgram{Program: name, Exits: map[string]int{}, Warnings: map[string]int{}, Wedges: map[string]int{}},
			first:         map[string]time.Time{}, last: map[string]time.Time{},
		}
		r.byName[name] = p
	}
	return p
}

func isCrash(cause string) bool {
	switch cause {
	case program.CauseRuntimeError, program.CauseUnknown, program.CauseGraceful, program.CauseOOMOrKill,
		program.CauseSpawnFailed, program.CauseStartTimeout:
		return true
	}
	return false
}

func exitText(d *program.Exited) string {
	switch {
	case d.Signal != nil:
		return fmt.Sprintf("%s (%s)", *d.Signal, d.LikelyCause)
	case d.Code != nil:
		return fmt.Sprintf("exit %d (%s)", *d.Code, d.LikelyCause)
	}
	return d.LikelyCause
}

// finish orders the programs by trouble and writes the advice.
func (r *Report) finish() {
	progs := make([]*ProgramReport, 0, len(r.byName))
	for _, p := range r.byName {
		progs = append(progs, p)
	}
	slices.SortFunc(progs, func(a, b *ProgramReport) int {
		if d := b.trouble() - a.trouble(); d != 0 {
			return d
		}
		return strings.Compare(a.Program, b.Program)
	})
	r.Programs = []*program.DoctorProgram{}
	r.Advice = []string{}
	for _, p := range progs {
		r.Programs = append(r.Programs, p.DoctorProgram)
		r.Advice = append(r.Advice, p.advice()...)
	}
	if len(r.lostFiles) > 0 || r.lostEvents > 0 {
		line := "the state directory could not be written for a while (" + strings.Join(r.lostFiles, ", ") + ")"
		if r.lostEvents > 0 {
			line += fmt.Sprintf("; %d events are missing from the audit log, each gap marked by a degraded_storage event", r.lostEvents)
		}
		r.Advice = append(r.Advice, line+": keep free space on its file system (docs/daemon.md#when-the-disk-fills)")
	}
	if r.keepers > 0 {
		r.Advice = append(r.Advice, fmt.Sprintf("the keeper that holds tty runs' terminals died %d time(s) (last: %s): look for what kills it (the OOM killer in dmesg, a kill by hand); while none held them a daemon crash would have ended the tty runs (docs/terminal.md#a-keeper-that-dies)", r.keepers, r.keeperLast))
	}
}

// addKeeper counts a keeper_replaced event.
func (r *Report) addKeeper(ts time.Time, d *program.DaemonPhase) {
	r.keepers++
	last := fmt.Sprintf("pid %d at %s", d.PID, ts.UTC().Format(time.RFC3339))
	if d.Keeper > 0 && d.Count != nil {
		last += fmt.Sprintf(", replaced by pid %d holding %d terminal(s) again", d.Keeper, *d.Count)
	} else {
		last += ", not replaced"
	}
	if d.Error != "" {
		last += ": " + d.Error
	}
	r.keeperLast = last
}

// addStorage counts a degraded_storage event.
func (r *Report) addStorage(d *program.DaemonPhase) {
	if d.LostTo >= d.LostFrom && d.LostFrom > 0 {
		r.lostEvents += d.LostTo - d.LostFrom + 1
	}
	if d.File != "" && !slices.Contains(r.lostFiles, d.File) {
		r.lostFiles = append(r.lostFiles, d.File)
	}
}

// Storage words what the state directory cannot keep now (failing, from
// its statedir.Health), one line each, most serious first: the intent
// record, whose loss means operator decisions are refused.
func Storage(failing []statedir.Failure, now time.Time) []string {
	var out []string
	for _, f := range failing {
		out = append(out, fmt.Sprintf("cannot write %s since %s ago (%d failed writes, last: %v): %s",
			f.File, now.Sub(f.Since).Round(time.Second), f.Errors, f.Err, StorageConsequence(f.File)))
	}
	return out
}

// StorageConsequence says what a file of the state directory that cannot
// be written costs (docs/daemon.md#when-the-disk-fills).
func StorageConsequence(file string) string {
	switch file {
	case "intent.json":
		return "its journal, intent.json.log, still keeps every decision; free space in the state directory"
	case "runs.json":
		return "its journal, runs.json.log, still keeps every run; free space in the state directory"
	case "intent.json.log":
		return "operator decisions (start, stop, restart, scale) are refused with 507 until it can; policy verdicts may not survive a daemon crash; free space in the state directory"
	case "runs.json.log":
		return "a run started now may not be adopted by the next daemon after a crash; free space in the state directory"
	case "programs.json":
		return "tend add, rm and scale of added programs are refused until it can; free space in the state directory"
	case "audit":
		return "events still go out live, but the audit log misses them (the gap is marked once it can be written); free space in the state directory"
	}
	return "free space in the state directory"
}

// trouble ranks programs: giving up, then crashes, then memory drains and
// wedges, then budget warnings.
func (p *ProgramReport) trouble() int {
	n := p.GaveUp*1000 + p.crashes()*10 + p.Exits[program.CauseRSSWatchdog]*5 + sum(p.Wedges)*5
	for _, c := range p.Warnings {
		n += c
	}
	return n
}

// crashes sums the crash causes.
func (p *ProgramReport) crashes() (n int) {
	for cause, c := range p.Exits {
		if isCrash(cause) {
			n += c
		}
	}
	return n
}

// span says how long the exits of cause took: "in 10 min".
func (p *ProgramReport) span(cause string) string {
	d := p.last[cause].Sub(p.first[cause])
	switch {
	case d < time.Minute:
		return fmt.Sprintf("in %ds", int(d.Seconds())+1)
	case d < 2*time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()+0.5))
	}
	return fmt.Sprintf("in %.1f h", d.Hours())
}

// advice is one line per kind of trouble, most pressing first.
func (p *ProgramReport) advice() []string {
	var out []string
	name := p.Program
	if p.GaveUp > 0 {
		out = append(out, fmt.Sprintf("%s gave up %d time(s) after reaching its crash budget (last: %s): fix the cause in tend logs %s, then tend start %s", name, p.GaveUp, p.LastCrash, p.LastID, name))
	}
	if n := p.crashes(); n > 0 && (n >= 3 || p.Warnings[program.WarnCrashDegraded] > 0) {
		out = append(out, fmt.Sprintf("%s crashed %d times (%s; last: %s): it is crash-looping; read tend logs %s", name, n, p.causes(), p.LastCrash, p.LastID))
	}
	if n := p.Exits[program.CauseOOMOrKill]; n > 0 {
		out = append(out, fmt.Sprintf("%s was SIGKILLed from outside tend %d times: check the kernel log for the OOM killer (dmesg) and the container's memory limit", name, n))
	}
	if n := p.Exits[program.CauseRSSWatchdog]; n > 0 {
		out = append(out, fmt.Sprintf("%s hit its memory cap %d times %s: raise max_rss or fix the leak", name, n, p.span(program.CauseRSSWatchdog)))
	}
	if n := sum(p.Wedges); n > 0 {
		loop := ""
		if p.Warnings[program.WarnWedgeRestartLoop] > 0 {
			loop = "; wedge restarts paused by wedge_loop_budget"
		}
		out = append(out, fmt.Sprintf("%s wedged %d times (%s)%s: look for a stuck handler or a dead connection pool, or loosen the watchdog", name, n, keys(p.Wedges), loop))
	}
	if n := p.Warnings[program.WarnCleanBudget]; n > 0 {
		out = append(out, fmt.Sprintf("%s exited cleanly %d times and passed its clean_restart_budget %d times: it exits after every job; raise the budget if that is by design", name, p.Exits[program.CauseCleanExit], n))
	}
	if n := p.Exits[program.CauseSpawnFailed]; n > 0 && len(p.SpawnErrors) > 0 {
		out = append(out, fmt.Sprintf("%s could not be started %d times: %s", name, n, p.SpawnErrors[0]))
	}
	return out
}

func (p *ProgramReport) causes() string {
	var parts []string
	for _, cause := range keysOf(p.Exits) {
		if isCrash(cause) {
			parts = append(parts, fmt.Sprintf("%s %d", cause, p.Exits[cause]))
		}
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int) (n int) {
	for _, c := range m {
		n += c
	}
	return n
}

func keys(m map[string]int) string {
	var parts []string
	for _, k := range keysOf(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func keysOf(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
