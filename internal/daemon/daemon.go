// Package daemon runs tend up: it loads the config, takes the state-dir lock,
// starts the reaper, the event log, the broker, the supervisors and the API,
// and stops them all on SIGTERM, SIGINT or tend down, leaving no process of
// any instance behind.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/broker"
	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/metrics"
	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/runs"
	"github.com/tend-sh/tend/internal/spawn"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/supervisor"
)

// ErrAlreadyRunning is returned when another daemon holds the state dir.
var ErrAlreadyRunning = errors.New("a tend daemon is already running")

// Options configure Run.
type Options struct {
	ConfigPath string                     // the TOML file or Procfile
	JSON       bool                       // event lines on Stderr as JSON instead of text
	Stderr     io.Writer                  // where event lines go
	Stdout     io.Writer                  // where forward_output prints the runs' lines (default os.Stdout)
	Format     func(program.Event) string // the text form of an event line
	Version    string                     // reported by the API
}

// Paths inside a state directory.
const (
	SocketName = "tend.sock"
	lockName   = "tend.lock"
)

// Run runs the daemon in the foreground until ctx ends, a SIGTERM/SIGINT
// arrives or a client asks it to stop. Config errors wrap
// program.ErrBadConfig (exit 2); a held lock wraps ErrAlreadyRunning.
func Run(ctx context.Context, opts Options) error {
	prepareProcess(opts)
	spawn.StartForker() // while the descriptor table is small: runs fork from a copy of it
	cfg, defaults, err := config.LoadWithDefaults(opts.ConfigPath)
	if err != nil {
		return err
	}
	d, err := start(cfg, defaults, opts)
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

// daemon is one running tend up. Its fields are set by start and read-only
// after, except what the components guard themselves.
type daemon struct {
	cfg         *program.Config
	opts        Options
	state       *state         // the state dir, its subdirs and the lock
	kept        *kept.Programs // programs added over the API, kept in programs.json
	added       []program.Spec // those parsed at start, added after the config's
	log         *events.Log
	reaper      *reaper.Reaper
	broker      *broker.Broker
	mgr         *supervisor.Manager
	api         *api.Server
	capture     *spawn.Capture // the runs' output: logs, FIFOs, forwarding
	keeper      *ttyKeeper     // holds tty runs' terminals beyond this daemon (keeper.go)
	terminals   *terminals     // the API's terminal routes (terminals.go)
	metrics     *metrics.Metrics
	trim        *trimmer                        // hands memory back after bursts
	runs        *runs.File                      // runs.json, for the next daemon if this one dies
	strays      sync.WaitGroup                  // stops of runs left by an earlier daemon for programs gone from the config
	defaults    atomic.Pointer[config.Defaults] // the config's [defaults], for programs added over the API
	started     atomic.Bool                     // the initial start of the fleet is done (readyz)
	sd          *sdNotifier                     // tend's own service manager (systemd); nil without one
	reloadMu    sync.Mutex                      // one reload's bookkeeping, add, rm or scale at a time
	applyMu     sync.Mutex                      // one reload's Apply at a time
	shutdown    chan struct{}                   // closed by the first request to stop
	once        chanOnce
	printer     chan struct{} // closed when the event printer has caught up and ended
	tls         *tls.Config   // HTTPS for daemon.http, from tls_cert/tls_key; nil = plain HTTP
	cgroups     *cgroup.Tree  // the runs' cgroups; nil when runs are tracked by process group and tree
	shortDir    string        // the private short-path directory for notify sockets (statedir.Runtime); "" = none
	tracking    string        // program.TrackingCgroup or TrackingGroup, for the daemon started event
	trackingWhy string        // why not cgroups, or what they lack
}

func start(cfg *program.Config, defaults *config.Defaults, opts Options) (*daemon, error) {
	httpTLS, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	sd := cfg.Daemon.StateDir
	sock := filepath.Join(sd, SocketName)
	if len(sock) >= 108 {
		return nil, fmt.Errorf("%w: %s: state_dir %s is too deep for a unix socket path (%d bytes, the limit is 107)", program.ErrBadConfig, cfg.File, sd, len(sock))
	}
	st, err := openState(cfg)
	if err != nil {
		return nil, err
	}
	d := &daemon{cfg: cfg, opts: opts, state: st, shutdown: make(chan struct{}), printer: make(chan struct{}), tls: httpTLS}
	d.defaults.Store(defaults)
	started := false
	defer func() {
		if !started { // a start that fails from here leaves no empty cgroup tree or short-path directory behind
			d.tidyAway()
		}
	}()
	d.shortDir = shortDir(sd)
	if err := d.setupCgroups(); err != nil {
		st.Close()
		return nil, err
	}
	if err := d.loadKept(); err != nil {
		st.Close()
		return nil, err
	}
	d.log, err = events.Open(events.Options{Files: st.Audit, Retention: cfg.Daemon.AuditRetention, MaxSize: cfg.Daemon.AuditMaxSize})
	if err != nil {
		st.Close()
		return nil, statedir.Unsafe(err)
	}
	d.reaper = reaper.New()
	if err := d.reaper.Start(cfg.Daemon.Subreaper || os.Getpid() == 1); err != nil {
		d.log.Close()
		st.Close()
		return nil, err
	}
	d.raiseLimits(instances(d.cfg.Programs, d.added)) // the whole fleet's, before any of it starts
	if err := d.openCapture(); err != nil {
		d.reaper.Stop()
		d.log.Close()
		st.Close()
		return nil, err
	}
	publish := func(e program.Event) { d.log.Publish(e) }
	d.keeper = d.openKeeper() // before the instances: adoptions take their terminals back from it
	tree := proctree.New()
	d.broker = broker.New(publish, nil, tree)
	d.mgr = supervisor.NewManager(supervisor.Deps{
		Reaper: d.reaper, Publish: publish, Update: d.broker.Update,
		Rand: rand.Float64, Capture: d.capture, NotifyDir: st.Notify.Path(), ShortDir: d.shortDir,
		Cgroups:    d.cgroups,
		NotifyDrop: func(err error) { d.metrics.CountNotifyDrop(err) }, Tree: tree,
		Detected: func(l time.Duration) { d.metrics.ObserveExitDetection(l) },
		Record:   d.record, Keeper: d.keeper,
	}, d.broker.Forget)
	if err := d.openRuns(); err != nil { // before the API: an added program records its runs
		d.closeCapture()
		d.reaper.Stop()
		d.log.Close()
		st.Close()
		return nil, err
	}
	d.trim = newTrimmer()
	d.metrics = metrics.New(metrics.Source{
		Statuses:        func() []program.Status { return d.broker.List(false) },
		OrphansReaped:   d.reaper.Orphans,
		EventsPublished: d.log.Published,
		SubscribersCut:  d.log.CutOffs,
	})
	d.terminals = &terminals{d: d} // the API's Terminals, for its screen, input and attach routes
	d.api = api.New(&backend{d: d}, eventSource{d.log}, api.Options{Version: opts.Version, Activity: d.trim.poke, Metrics: d.metrics.Handler()})
	started = true
	if testStarted != nil {
		testStarted(d)
	}
	return d, nil
}

func (d *daemon) serve(ctx context.Context) error {
	go d.print(d.log.LastSeq())
	bctx, stopBroker := context.WithCancel(context.Background())
	defer stopBroker()
	go d.broker.Run(bctx)
	d.sd = startSystemd(d)
	defer d.sd.close()
	defer d.trim.stop()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	stopHTTP, err := d.serveHTTP() // before the socket, which hands out its logins
	if err != nil {
		return errors.Join(err, d.stop())
	}
	defer stopHTTP()
	sock := d.state.Root.Join(SocketName)
	apiErr := make(chan error, 1)
	go func() { apiErr <- d.api.ServeUnix(sock) }()
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStarted, PID: os.Getpid(), Tracking: d.tracking, TrackingWhy: d.trackingWhy}})
	progs := slices.Concat(d.cfg.Programs, d.added) // the config's, then those added over the API
	_, errs := d.mgr.AddAll(progs)
	for i, err := range errs {
		if err != nil {
			d.note("adding %s: %v", progs[i].Name, err)
		}
	}
	d.settleAdoptions()
	d.removeStaleGroups()
	go func() { // the fleet starts a few at a time while this loop serves
		if d.mgr.WaitStarted(ctx) == nil {
			d.started.Store(true)
			d.sd.ready()
		}
	}()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-d.shutdown:
			break loop
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if _, rerr := d.reload(); rerr != nil {
					d.note("reload refused:\n%v", rerr)
				}
				continue
			}
			break loop
		case err = <-apiErr:
			if err != nil {
				err = fmt.Errorf("api: %w", err)
				break loop
			}
		}
	}
	return errors.Join(err, d.stop())
}

// stop stops every instance, then everything else, in the reverse order of start.
func (d *daemon) stop() error {
	d.sd.stopping()
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStopping, PID: os.Getpid()}})
	d.announceStop()
	ctx, cancel := context.WithTimeout(context.Background(), d.stopBudget())
	defer cancel()
	err := d.mgr.Shutdown(ctx)
	d.strays.Wait()
	d.keeper.quit()
	err = errors.Join(err, d.closeCapture())
	killStragglers(d.reaper)
	d.runs.Close()
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStopped, PID: os.Getpid()}})
	select { // let the printer show the last lines
	case <-d.printer:
	case <-time.After(2 * time.Second):
	}
	d.api.Close()
	d.reaper.Stop()
	d.tidyAway()
	d.log.Close()
	d.state.Root.Remove(SocketName)
	d.state.Close()
	return err
}

// requestStop starts a shutdown once, from any goroutine.
func (d *daemon) requestStop() { d.once.close(d.shutdown) }

// note writes a daemon message among the event lines.
func (d *daemon) note(format string, args ...any) {
	if d.opts.Stderr != nil {
		fmt.Fprintf(d.opts.Stderr, "tend: "+format+"\n", args...)
	}
}

// print writes every event after seq to Stderr until the daemon stops.
func (d *daemon) print(seq uint64) {
	defer close(d.printer)
	for {
		sub := d.log.Subscribe(seq)
		for e := range sub.C() {
			seq = e.Seq
			d.trim.poke()
			d.printEvent(e)
			if e.Kind == program.KindDaemon && e.Data.(*program.DaemonPhase).Phase == program.PhaseStopped {
				sub.Close()
				return
			}
		}
		if !sub.CutOff() {
			return // the log closed
		}
	}
}

func (d *daemon) printEvent(e program.Event) {
	if d.opts.Stderr == nil {
		return
	}
	if d.opts.JSON || d.opts.Format == nil {
		b, err := e.MarshalJSON()
		if err == nil {
			d.opts.Stderr.Write(append(b, '\n'))
		}
		return
	}
	if line := d.opts.Format(e); line != "" {
		fmt.Fprintln(d.opts.Stderr, line)
	}
}
