"""tend as one more column.

Config: one tend.toml per run under the private workdir, `[program.pN]
command = argv` for every program, state_dir inside the workdir.  Every
restart delay is minimised in every benchmark, not only the crash loop:
for tend a SIGKILL from outside is a crash (row 4 of docs/restarts.md#the-four-rows), so the
default backoff_initial of 1 s would otherwise delay the latency benchmark's
replacement (bench_latency.py's default-config phase sets zero_backoff =
False: every key at its default).  No watchdog, probe or max_rss is set
(tool "tend", cgroup placement at its default, "auto", which uses cgroups
here); "tend-nocgroup" is the same with `[daemon] cgroup = "off"` (runs
tracked by process group); "tend-maxrss" adds `max_rss = "1GiB"` in
[defaults], which makes every instance sample its process tree's RSS once a
second (`sleep` never comes near 1 GiB).

Binary: $TEND_BIN, else built once per benchmark process as shipped (README,
docs/cli.md#two-files): `CGO_ENABLED=0 go build` of ./cmd/tend-lean as
/tmp/peers-tend-bin-XXXX/tend and of ./cmd/tend beside it as tend-daemon (which
`tend up` runs in its place), from the module root two directories up (removed
at exit).

start()          `tend up -c FILE` in the foreground (its own session)
roots()          the daemon's pid (tend is one process; programs are its children)
status_fast      GET /v1/status/NAME:0 on one kept-open HTTP/1.1 connection
                 over the daemon's unix socket
status_cli       `tend status NAME:0 --json --socket SOCK`
status_all_cli   `tend ps --socket SOCK` (the table; the daemon renders it)
graceful_stop    `tend down --socket SOCK` (returns once the daemon stopped answering)
"""
import atexit
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile

from lib import harness as H
from adapters.base import Adapter

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
_BUILT = {}  # "bin" -> path, "rev" -> git revision, "err" -> build error


def _git_rev():
    r = H.run(["git", "-C", MODULE_ROOT, "describe", "--always", "--dirty"], timeout=30)
    return r.stdout.strip() if r.returncode == 0 else ""


def tend_bin():
    """-> (path or None, error). Builds once per process unless TEND_BIN is set."""
    env_bin = os.environ.get("TEND_BIN")
    if env_bin:
        return (env_bin, "") if os.access(env_bin, os.X_OK) else (None, "TEND_BIN=%s is not executable" % env_bin)
    if "bin" in _BUILT or "err" in _BUILT:
        return _BUILT.get("bin"), _BUILT.get("err", "")
    if not os.path.exists(os.path.join(MODULE_ROOT, "cmd", "tend")):
        _BUILT["err"] = "no ./cmd/tend under %s; set TEND_BIN" % MODULE_ROOT
        return None, _BUILT["err"]
    d = tempfile.mkdtemp(prefix="peers-tend-bin-", dir="/tmp")
    atexit.register(shutil.rmtree, d, True)
    out = os.path.join(d, "tend")
    # Static, as shipped (README): cgo costs every exec about 1 ms.
    for name, pkg in (("tend", "./cmd/tend-lean"), ("tend-daemon", "./cmd/tend")):
        r = H.run(["env", "CGO_ENABLED=0", "go", "build", "-o", os.path.join(d, name), pkg], timeout=600, cwd=MODULE_ROOT)
        if r.returncode != 0:
            _BUILT["err"] = "go build %s failed: %s" % (pkg, r.stderr.strip()[-500:])
            return None, _BUILT["err"]
    _BUILT["bin"] = out
    _BUILT["rev"] = _git_rev()
    return out, ""


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a unix socket; http.client keeps the connection open."""

    def __init__(self, path, timeout=10):
        super().__init__("tend", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def _toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


class Tend(Adapter):
    name = "tend"
    extra_defaults = {}
    extra_program = {}   # keys written in every [program.NAME] (bench_tend.py: tty = true)
    cgroup = None        # [daemon] cgroup; None leaves it at its default ("auto")
    zero_backoff = True  # False: every restart key at its default

    def available(self):
        b, why = tend_bin()
        if not b:
            return False, why
        self.bin = b
        return True, ""

    def version(self):
        v = H.run([self.bin, "version"]).stdout.strip()
        rev = _BUILT.get("rev") if _BUILT.get("bin") == self.bin else os.environ.get("TEND_REV")
        if rev:
            v += ", built from %s" % rev
        return v

    def settings(self):
        d = {"restart": "always", "backoff_initial": "0s", "backoff_max": "0s",
             "backoff_jitter": 0, "max_crashes": 10**9, "hard_max_crashes": 0,
             "clean_restart_budget": 10**9, "watchdogs": "none (no watchdog, "
             "idle_output_timeout, probe)", "logs": "stdout/stderr captured to state_dir/logs",
             "cgroup": self.cgroup or "auto (the default: cgroups here)",
             "note": "backoff is 0 in every benchmark but the default-config phase of §1: tend "
                     "counts an outside SIGKILL as a crash, and by default (backoff_initial 1s, "
                     "doubling per crash, counted from the run's start) a run killed younger "
                     "than its backoff waits out the rest; a run killed older restarts at once"}
        if not self.zero_backoff:
            for k in ("backoff_initial", "backoff_max", "backoff_jitter", "max_crashes",
                      "hard_max_crashes", "clean_restart_budget"):
                d.pop(k)
            d["defaults"] = "every restart key at its default"
        if self.extra_program:
            d["program"] = dict(self.extra_program)
        if self.extra_defaults:
            d["defaults"] = dict(self.extra_defaults)
        else:
            d["max_rss"] = "unset (no RSS sampling)"
        return d

    def setup(self, programs, crash=False):
        self.programs, self.crash = programs, crash
        self.state = os.path.join(self.workdir, "state")
        self.sock = os.path.join(self.state, "tend.sock")
        self.conf = os.path.join(self.workdir, "tend.toml")
        lines = ["[daemon]", "state_dir = %s" % _toml_str(self.state)]
        if self.cgroup is not None:
            lines.append("cgroup = %s" % _toml_str(self.cgroup))
        lines += ["", "[defaults]", 'restart = "always"']
        if self.zero_backoff:
            lines += ['backoff_initial = "0s"', 'backoff_max = "0s"', "backoff_jitter = 0.0",
                      "max_crashes = %d" % 10**9, "hard_max_crashes = 0",
                      "clean_restart_budget = %d" % 10**9]
        for k, v in self.extra_defaults.items():
            lines.append("%s = %s" % (k, _toml_str(v)))
        lines.append("")
        for p in programs:
            lines += ["[program.%s]" % p.name,
                      "command = [%s]" % ", ".join(_toml_str(a) for a in p.argv)]
            lines += ["%s = %s" % (k, _toml_str(v)) for k, v in self.extra_program.items()] + [""]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines))
        self._conn = None
        self.pid = None

    def start(self):
        log = open(os.path.join(self.workdir, "tend-up.log"), "w")
        p = subprocess.Popen([self.bin, "up", "-c", self.conf], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        H.tracker().add(p.pid)
        self.pid = p.pid

    def roots(self):
        return [self.pid] if self.pid else []

    def log_files(self):
        return [os.path.join(self.workdir, "tend-up.log")]

    # --- status ----------------------------------------------------------
    def _get(self, path):
        """GET on the kept-open connection; one reconnect on a broken one."""
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = UnixHTTPConnection(self.sock)
            try:
                self._conn.request("GET", path)
                resp = self._conn.getresponse()
                body = resp.read()
                return resp.status, body
            except (OSError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt:
                    return None, None
        return None, None

    def events(self, since=0, query=""):
        """The event backlog after seq since (GET /v1/events?format=json)."""
        code, body = self._get("/v1/events?format=json&limit=100000&since=%d%s" % (since, query))
        return json.loads(body) if code == 200 else []

    def last_seq(self):
        return max([e.get("seq", 0) for e in self.events()] or [0])

    def status_fast(self, name):
        code, body = self._get("/v1/status/%s:0" % name)
        if code != 200:
            return None
        return json.loads(body).get("pid") or None

    def _cli(self, args, timeout):
        return H.run([self.bin] + args + ["--socket", self.sock], timeout=timeout)

    def status_cli(self, name):
        r = self._cli(["status", "%s:0" % name, "--json"], 30)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout).get("pid") or None
        except ValueError:
            return None

    def status_all_cli(self):
        # The table a human reads, as `sv status` and `supervisorctl status`
        # print theirs: ID STATE LIFECYCLE PID ... WHY.
        r = self._cli(["ps"], 600)
        out = {}
        for line in (r.stdout or "").splitlines()[1:]:
            f = line.split()
            if len(f) >= 4:
                out[f[0].split(":")[0]] = int(f[3]) if f[3].isdigit() else None
        return out

    def graceful_stop(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        r = self._cli(["down"], 120)
        if r.returncode != 0:
            # no daemon reachable (or down failed): fall back to SIGTERM, which
            # tend treats exactly like `tend down`
            super().graceful_stop()

    def stop(self, timeout=60, graceful=True):
        return super().stop(timeout, graceful)


class TendNoCgroup(Tend):
    """tend with cgroup placement off: runs tracked by their process group."""
    name = "tend-nocgroup"
    cgroup = "off"


class TendMaxRSS(Tend):
    """tend with max_rss set for every program: each instance samples its
    process tree's RSS once a second."""
    name = "tend-maxrss"
    extra_defaults = {"max_rss": "1GiB"}
