"""go-floor: no supervisor, the floor of "N programs all running".

One Go loop (floor/go, `peersfloor startmany N PROGRAM`) forks and execs the
program N times, each child with its stdout and stderr on a pipe of its own
whose read end the loop keeps, then holds them until it is told to stop.
The scale benchmark times it exactly as it times a supervisor (from the
start until N programs exist under it), so that "all running" can be read
as a ratio to what this machine allows; the loop's own time (first fork to
last exec) is in its output.  It has no status listing and nothing to
measure at rest: the scale benchmark skips those phases (measure_rest).

Binary: $PEERS_FLOOR_BIN, else built once per process with `go build` in
floor/go (removed at exit).
"""
import atexit
import json
import os
import shutil
import subprocess
import tempfile

from lib import harness as H
from adapters.base import Adapter

GO_DIR = os.path.join(H.PEERS_DIR, "floor", "go")
_BUILT = {}


def floor_bin():
    """-> (path or None, error)."""
    given = os.environ.get("PEERS_FLOOR_BIN")
    if given:
        return (given, "") if os.access(given, os.X_OK) else (None, "PEERS_FLOOR_BIN=%s is not executable" % given)
    if "bin" not in _BUILT and "err" not in _BUILT:
        d = tempfile.mkdtemp(prefix="peers-floor-bin-", dir="/tmp")
        atexit.register(shutil.rmtree, d, True)
        out = os.path.join(d, "peersfloor")
        env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
        r = H.run(["go", "build", "-o", out, "."], timeout=600, cwd=GO_DIR, env=env)
        if r.returncode != 0:
            _BUILT["err"] = "go build failed: " + r.stderr.strip()[-500:]
        else:
            _BUILT["bin"] = out
    return _BUILT.get("bin"), _BUILT.get("err", "")


class GoFloor(Adapter):
    name = "go-floor"
    measure_rest = False  # no idle window, no listing

    def available(self):
        b, why = floor_bin()
        if not b:
            return False, why
        self.bin = b
        return True, ""

    def version(self):
        return "peersfloor startmany (%s)" % H.run(["go", "version"]).stdout.strip()

    def settings(self):
        return {"loop": "syscall.Pipe2 + syscall.ForkExec(program), sequential; stdout and "
                        "stderr on the pipe, its read end kept; stdin /dev/null"}

    def setup(self, programs, crash=False):
        self.programs, self.crash = programs, crash
        argv = {tuple(p.argv) for p in programs}
        if len(argv) != 1 or len(programs[0].argv) != 1:
            raise ValueError("go-floor runs one argv-less program N times")
        self.pid = None
        self.out = os.path.join(self.workdir, "floor.out")

    def start(self):
        out = open(self.out, "w")
        p = subprocess.Popen([self.bin, "startmany", str(len(self.programs)), self.programs[0].argv[0]],
                             stdin=subprocess.PIPE, stdout=out, stderr=out, start_new_session=True)
        self.procs.append(p)
        H.tracker().add(p.pid)
        self.pid = p.pid

    def roots(self):
        return [self.pid] if self.pid else []

    def log_files(self):
        return [self.out]

    def loop(self):
        """The loop's own report: {"seconds": first fork to last exec, ...}."""
        try:
            with open(self.out) as f:
                for line in f:
                    if line.startswith("{"):
                        return json.loads(line)
        except (OSError, ValueError):
            pass
        return {}

    def status_all_cli(self):
        return {}

    def status_cli(self, name):
        return None

    def graceful_stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.stdin.close()  # end of stdin: kill and reap every child
                except OSError:
                    pass
