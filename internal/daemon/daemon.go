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
	"net"
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
	"github.com/tend-sh/tend/internal/locate"
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
var ErrAlreadyRunning = program.ErrAlreadyRunning

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
	SocketName = locate.Socket // where clients look for it
	lockName   = "tend.lock"
)

// Run runs the daemon in the foreground until ctx ends, a SIGTERM/SIGINT
// arrives or a client asks it to stop. Config errors wrap
// program.ErrBadConfig (exit 2); a held lock wraps ErrAlreadyRunning.
func Run(ctx context.Context, opts Options) error {
	up, herr := takeHandover() // first: a run must never find the handover's variable
	prepareProcess(opts)
	startedAs() // while the working directory is the one tend up was started in
	if herr != nil {
		return herr
	}
	var handed []int
	if up != nil {
		handed = up.in.FDs()
	}
	spawn.StartForkerWithout(handed) // while the descriptor table is small: runs fork from a copy of it
	cfg, defaults, text, err := loadConfig(opts.ConfigPath, up)
	if err != nil {
		return err
	}
	d, err := start(cfg, defaults, opts, up)
	if err != nil {
		return err
	}
	d.cfgText = text
	return d.serve(ctx, up)
}

// loadConfig reads the config file, or after an upgrade the text the
// daemon before the exec had loaded last (the same fleet runs on; changes
// to the file since wait for tend reload, as they would have), and
// returns its text too.
func loadConfig(path string, up *upgradeIn) (*program.Config, *config.Defaults, []byte, error) {
	if up != nil {
		cfg, defaults, err := config.ParseWithDefaults(up.st.ConfigFile, up.st.Config)
		return cfg, defaults, up.st.Config, err
	}
	text, err := os.ReadFile(path)
	if err != nil {
		cfg, defaults, err := config.LoadWithDefaults(path) // its error says it best
		return cfg, defaults, nil, err
	}
	cfg, defaults, err := config.ParseWithDefaults(path, text)
	return cfg, defaults, text, err
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
	sessions    *sessions                       // removes remove_on_exit programs once they end
	runs        *runs.File                      // runs.json, for the next daemon if this one dies
	intents     *kept.Intents                   // intent.json: what the next daemon restores if this one dies
	strays      sync.WaitGroup                  // stops of runs left by an earlier daemon for programs gone from the config
	defaults    atomic.Pointer[config.Defaults] // the config's [defaults], for programs added over the API
	started     atomic.Bool                     // the initial start of the fleet is done (readyz)
	fleetUp     atomic.Bool                     // the fleet was added (its intent record taken up)
	sd          *sdNotifier                     // tend's own service manager (systemd); nil without one
	reloadMu    sync.Mutex                      // one reload's bookkeeping, add, rm or scale at a time; guards cfgText
	cfgText     []byte                          // the config file's text as last loaded, for an upgrade
	applyMu     sync.Mutex                      // one reload's Apply at a time
	shutdown    chan struct{}                   // closed by the first request to stop
	once        chanOnce
	printer     chan struct{} // closed when the event printer has caught up and ended
	tls         *tls.Config   // HTTPS for daemon.http, from tls_cert/tls_key; nil = plain HTTP
	cgroups     *cgroup.Tree  // the runs' cgroups; nil when runs are tracked by process group and tree
	shortDir    string        // the private short-path directory for notify sockets (statedir.Runtime); "" = none
	tracking    string        // program.TrackingCgroup or TrackingGroup, for the daemon started event
	trackingWhy string        // why not cgroups, or what they lack

	upgrading atomic.Bool    // an upgrade is under way (upgrade.go)
	upgradeMu sync.Mutex     // held by an upgrade from its start to its exec (or undo), and by stop
	printed   atomic.Uint64  // the seq of the last event printed on stderr
	sigs      chan os.Signal // the serve loop's signals
	sigMu     sync.Mutex     // guards deferred
	deferred  []int          // signals that came during an upgrade, for the new daemon
}

func start(cfg *program.Config, defaults *config.Defaults, opts Options, up *upgradeIn) (*daemon, error) {
	httpTLS, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	sd := cfg.Daemon.StateDir
	sock := filepath.Join(sd, SocketName)
	if len(sock) >= 108 {
		return nil, fmt.Errorf("%w: %s: state_dir %s is too deep for a unix socket path (%d bytes, the limit is 107)", program.ErrBadConfig, cfg.File, sd, len(sock))
	}
	var lock *os.File
	if up != nil {
		lock, _ = up.in.File(lockFD)
	}
	st, err := openState(cfg, lock)
	if err != nil {
		return nil, err
	}
	d := &daemon{cfg: cfg, opts: opts, state: st, shutdown: make(chan struct{}), printer: make(chan struct{}), tls: httpTLS, sigs: make(chan os.Signal, 16)}
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
	if up != nil {
		// Before the first drain: a run handed over that exited during the
		// exec is a zombie of ours, and must reach its instance.
		d.reaper.Expect(up.expected(), true)
	}
	if err := d.reaper.Start(cfg.Daemon.Subreaper || os.Getpid() == 1); err != nil {
		d.log.Close()
		st.Close()
		return nil, err
	}
	d.raiseLimits(instances(d.cfg.Programs, d.added)) // the whole fleet's, before any of it starts
	d.checkPTYs(ttyInstances(d.cfg.Programs, d.added))
	if err := d.openCapture(); err != nil {
		d.reaper.Stop()
		d.log.Close()
		st.Close()
		return nil, err
	}
	intents, err := d.openIntents()
	if err != nil {
		d.closeCapture()
		d.reaper.Stop()
		d.log.Close()
		st.Close()
		return nil, err
	}
	publish := func(e program.Event) {
		d.log.Publish(e)
		d.metrics.CountEvent(e) // set before anything publishes (serve)
	}
	d.keeper = d.openKeeper() // before the instances: adoptions take their terminals back from it
	tree := proctree.New()
	d.broker = broker.New(publish, nil, tree)
	d.broker.AfterRefresh(collectAfterBurst)
	d.sessions = newSessions(d)
	d.mgr = supervisor.NewManager(supervisor.Deps{
		Reaper: d.reaper, Publish: publish, Update: d.update,
		Rand: rand.Float64, Capture: d.capture, NotifyDir: st.Notify.Path(), ShortDir: d.shortDir,
		Cgroups:    d.cgroups,
		NotifyDrop: func(err error) { d.metrics.CountNotifyDrop(err) }, Tree: tree,
		Detected: func(l time.Duration) { d.metrics.ObserveExitDetection(l) },
		Turned:   func(s string, l time.Duration) { d.metrics.ObserveTurn(s, l) },
		Answered: func(by string) { d.metrics.CountPermission(by) },
		Version:  opts.Version,
		Record:   d.record, Intents: d.intents, Keeper: d.keeper,
	}, d.broker.Forget)
	d.mgr.SetIntents(intents)
	if up != nil {
		d.mgr.SetCarried(up.carried())
	}
	if err := d.openRuns(up == nil); err != nil { // before the API: an added program records its runs
		d.intents.Close()
		d.closeCapture()
		d.reaper.Stop()
		d.log.Close()
		st.Close()
		return nil, err
	}
	d.trim = newTrimmer()
	d.metrics = metrics.New(metrics.Source{
		Statuses:        func() []program.Status { return d.broker.List(false) },
		Bare:            d.broker.ListBare,
		Transient:       d.transient,
		Programs:        func() int { return len(d.mgr.Specs()) },
		OrphansReaped:   d.reaper.Orphans,
		EventsPublished: d.log.Published,
		SubscribersCut:  d.log.CutOffs,
		KeeperRestarts:  func() uint64 { return d.keeper.restarts.Load() },

		StateWriteErrors: d.stateWriteErrors,
	})
	d.terminals = &terminals{d: d} // the API's Terminals, for its screen, input and attach routes
	d.api = api.New(&backend{d: d}, eventSource{d.log}, api.Options{Version: opts.Version, Activity: d.trim.poke, Metrics: d.metrics.Handler(), Terminals: d.terminals, Protocols: &protocols{d: d}})
	started = true
	if testStarted != nil {
		testStarted(d)
	}
	return d, nil
}

func (d *daemon) serve(ctx context.Context, up *upgradeIn) error {
	from := d.log.LastSeq()
	if up != nil {
		from = min(up.st.Printed, from) // the old daemon's last lines, if it had not printed them
	}
	go d.print(from)
	bctx, stopBroker := context.WithCancel(context.Background())
	defer stopBroker()
	go d.broker.Run(bctx)
	go d.watchStorage(bctx.Done())
	d.sd = startSystemd(d)
	defer d.sd.close()
	defer d.trim.stop()
	signal.Notify(d.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2)
	defer signal.Stop(d.sigs)

	if up == nil {
		d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStarted, PID: os.Getpid(), Tracking: d.tracking, TrackingWhy: d.trackingWhy}})
	}
	stopHTTP, apiErr, err := d.serveAPI(up)
	if err != nil {
		return errors.Join(err, d.stop())
	}
	defer stopHTTP()
	go d.sessions.run()
	d.addFleet(up != nil)
	if up != nil {
		// The fleet was taken up before the API served again: a client
		// that connected during the upgrade (the next step of a rolling
		// restart) finds every instance.
		d.serveUnix(up, apiErr)
		d.upgraded(up)
	}
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
		case s := <-d.sigs:
			if d.deferSignal(s) {
				continue // for the daemon after the upgrade, or this one if it fails
			}
			switch s {
			case syscall.SIGHUP:
				if _, rerr := d.reload(); rerr != nil {
					d.note("reload refused:\n%v", rerr)
				}
				continue
			case syscall.SIGUSR2:
				go func() {
					if err := d.upgrade(context.Background(), nil); errors.Is(err, errUpgrading) {
						d.note("SIGUSR2: an upgrade is already under way")
					} else if err != nil {
						d.note("SIGUSR2: upgrade refused: %v", err)
					}
				}()
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

// serveAPI serves the API on TCP (if configured) and, on a fresh start, on
// the unix socket; after an upgrade the unix socket waits for the fleet
// (serveUnix). Both use the listeners handed over, if any.
func (d *daemon) serveAPI(up *upgradeIn) (stopHTTP func(), apiErr chan error, err error) {
	stopHTTP, err = d.serveHTTP(up) // before the socket, which hands out its logins
	if err != nil {
		return nil, nil, err
	}
	apiErr = make(chan error, 1)
	if up == nil {
		sock := d.state.Root.Via(SocketName) // bound through the state dir tend holds (docs/trust.md#sockets)
		go func() { apiErr <- d.api.ServeUnix(sock) }()
	}
	return stopHTTP, apiErr, nil
}

// serveUnix serves the unix socket handed over by the daemon before the
// upgrade (or a new one, if it handed none).
func (d *daemon) serveUnix(up *upgradeIn, apiErr chan error) {
	f, ok := up.in.File(unixFD)
	if !ok {
		sock := d.state.Root.Via(SocketName) // bound through the state dir tend holds (docs/trust.md#sockets)
		go func() { apiErr <- d.api.ServeUnix(sock) }()
		return
	}
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		apiErr <- fmt.Errorf("the socket handed over: %w", err)
		return
	}
	go func() { apiErr <- d.api.ServeUnixListener(l) }()
}

// addFleet adds the config's programs, then those added over the API,
// and settles what an earlier daemon left that none of them took up.
func (d *daemon) addFleet(upgraded bool) {
	added := d.added
	if !upgraded { // across an upgrade every run is still there: nothing ended meanwhile
		added = d.dropEndedSessions(added)
	}
	progs := slices.Concat(d.cfg.Programs, added) // the config's, then those added over the API
	_, errs := d.mgr.AddAll(progs)
	d.fleetUp.Store(true)
	for i, err := range errs {
		if err != nil {
			d.note("adding %s: %v", progs[i].Name, err)
		}
	}
	d.reaper.Unexpect() // a run handed over that no instance took: its exit is an orphan's
	d.settleKept(slices.Concat(d.settleAdoptions(), d.settleIntents()))
	d.removeStaleGroups()
	d.removeStaleFIFOs()
}

// stop stops every instance, then everything else, in the reverse order of
// start. It is a clean stop: the intent record is frozen first (these stops
// are not the operator's, and a daemon killed halfway restores the fleet
// as it was) and removed at the end, so the next tend up starts afresh.
func (d *daemon) stop() error {
	d.upgradeMu.Lock() // an upgrade under way execs (and this stop never happens) or is undone first
	defer d.upgradeMu.Unlock()
	d.intents.Freeze()
	d.sd.stopping()
	d.log.Publish(program.Event{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStopping, PID: os.Getpid()}})
	d.announceStop()
	ctx, cancel := context.WithTimeout(context.Background(), d.stopBudget())
	defer cancel()
	d.sessions.stop()
	sessions := d.sessionSpecs()
	err := d.mgr.Shutdown(ctx)
	d.endSessions(sessions, 5*time.Second) // an attached client reads to the end first
	d.strays.Wait()
	d.keeper.quit()
	err = errors.Join(err, d.closeCapture())
	killStragglers(d.reaper)
	d.runs.Close()
	if !d.fleetUp.Load() {
		d.intents.Close() // a start that failed before the fleet came: the record stands
	} else if derr := d.intents.Discard(); derr != nil {
		d.note("%v", derr)
	}
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
			d.printed.Store(seq)
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
