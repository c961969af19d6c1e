#!/usr/bin/python3
"""Measure 6: the rows only tend has (issue 32's "missing figures").

Phases (--phases, comma list; each N of --ns, --runs times, cells shuffled
with random.Random(seed + run), the seed and order in the JSON):

  recovery  N programs running; SIGKILL the daemon; start `tend up` again on
            the same config at once; time until GET /v1/status (a fresh
            connection per look, as a client that lost its daemon does) lists
            every instance running with the pid it had before the kill:
            recovery_ms from the SIGKILL, restart_to_adopted_ms from the
            new daemon's start, looks, and any run whose pid changed.
  upgrade   N programs running; a client thread polls GET /healthz on the
            unix socket every --poll-ms (1 ms; a fresh connection each time,
            so a handed-over listener is seen as a client sees it) while
            `tend upgrade` runs; longest_gap_ms = the longest time between two
            answered polls around the upgrade, with the upgrade's own wall time
            and whether every run kept its pid.
  tty       N programs with `tty = true` (each a pseudo-terminal), beside the
            same N without: PSS of the daemon and its keeper (tend-keeper, which
            holds the masters and shares the binary's pages) at rest and at peak
            (CellWatch, every 0.1 s) of each, PSS per tty run at peak = (tty
            peak - plain peak) / N, and kernel.pty.max / kernel.pty.nr (before,
            at peak).  When
            pty.max is below N + 64, --pty-max raise sets it to 2N for the cell
            and restores it after (recorded); --pty-max keep leaves it, to see
            what tend says and does when it runs out (its log's head and tail kept).
  audit     bytes the audit directory grows per hour under churn: runs
            `go run ./bench/churn -phases soak -duration D -spread` (the
            churn harness: programs added and removed with remove_on_exit)
            and fits its audit_bytes samples: (last - first) / hours.
  vm        the 1,000-program start in the VM lane's guest (pure cgroup2 with
            the memory controller) beside the host: runs $VM_LANE_CMD (a
            command that prints one JSON object with "up_s"; the lead's
            scripts/vm-test.sh hook) and records its output; without it the
            phase records "not run: VM_LANE_CMD unset".

Each daemon is tend's adapter (adapters/tend.py, zero backoff, cgroup auto),
its descriptor limit raised as for every tool (H.raise_nofile); its log's head
and tail (64 KiB each) are kept under --logs.  Root.

usage: bench_tend.py [--phases recovery,upgrade,tty,audit,vm] [--ns 1000,10000]
                     [--runs 3] [--poll-ms 1] [--pty-max raise|keep]
                     [--audit-duration 1h] [--seed S] [--out FILE]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import harness as H  # noqa: E402
import adapters  # noqa: E402
from adapters.base import Program  # noqa: E402
from adapters.tend import MODULE_ROOT, UnixHTTPConnection  # noqa: E402
import bench_scale as S  # noqa: E402

UP_TIMEOUT = 900
PTY_MAX = "/proc/sys/kernel/pty/max"
PTY_NR = "/proc/sys/kernel/pty/nr"


def get(sock, path, timeout=10):
    """One GET on a fresh connection -> (status, body) or (None, None)."""
    c = UnixHTTPConnection(sock, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException):
        return None, None
    finally:
        c.close()


def running_pids(sock):
    """{id: pid} of every running instance, or None when no daemon answers."""
    code, body = get(sock, "/v1/status", 120)
    if code != 200:
        return None
    return {s["id"]: s.get("pid") for s in json.loads(body) if s.get("state") == "running"}


def fleet(n, wd, extra_program=None, cgroup=None):
    ad = adapters.make("tend", wd)
    ok, why = ad.available()
    if not ok:
        raise RuntimeError(why)
    if extra_program:
        ad.extra_program = dict(extra_program)
    if cgroup:
        ad.cgroup = cgroup
    prog = H.program_copy(wd)
    ad.setup([Program("p%d" % i, [prog]) for i in range(n)])
    return ad, prog


def up(ad, n, watch=None):
    t0 = time.time()
    ad.start()
    t = ad.wait_all_running(n, UP_TIMEOUT, check=watch.check if watch else None, stall=120)
    if t is None:
        raise RuntimeError("%d of %d running after %.0f s" % (ad.running, n, time.time() - t0))
    ad.track_tree()
    return t


def cell(name, n, run, logdir, body):
    """Run body(ad-maker) in a fresh workdir; record load, errors, logs."""
    wd = tempfile.mkdtemp(prefix="peers-tend-%s-" % name)
    r = {"n": n, "run": run, "load_start": H.loadavg()}
    ads = []

    def make(**kw):
        sub = os.path.join(wd, "f%d" % len(ads))
        os.makedirs(sub)
        ad, prog = fleet(n, sub, **kw)
        ads.append((ad, prog))
        return ad, prog
    try:
        body(make, r)
    except Exception as e:
        r["error"] = "%s: %s" % (type(e).__name__, str(e)[-300:])
    finally:
        for i, (ad, prog) in enumerate(ads):
            try:
                if not ad.stop(timeout=S.STOP_TIMEOUT):
                    r.setdefault("stop_errors", []).append("did not stop in %d s" % S.STOP_TIMEOUT)
            except Exception as e:
                r.setdefault("stop_errors", []).append(str(e))
            left = H.pids_running(prog)
            for p in left:
                H.tracker().add(p)
            if left:
                H.tracker().kill_all()
                H.wait_gone(left, 30)
            r.setdefault("logs", []).append(S.keep_logs(ad, logdir, "tend-%s-%d-run%d-%d" % (name, n, run, i)))
        shutil.rmtree(wd, ignore_errors=True)
        r["load_end"] = H.loadavg()
        r["loaded"] = any(x is not None and x > H.LOADED for x in (r["load_start"], r["load_end"]))
    return r


def recovery(make, r):
    n = r["n"]
    ad, _ = make()
    r["up_s"] = up(ad, n)
    before = running_pids(ad.sock)
    if before is None or len(before) != n:
        raise RuntimeError("%s of %d listed running before the kill" % (None if before is None else len(before), n))
    old = ad.pid
    t_kill = time.time()
    os.kill(old, signal.SIGKILL)
    H.wait_gone([old], 30)
    ad.procs = [p for p in ad.procs if p.pid != old]
    t_start = time.time()
    ad.start()  # the same config: adopts the runs it finds
    looks, last_adopted, listed, took = 0, 0, None, []
    while time.time() - t_kill < UP_TIMEOUT:
        a = time.time()
        now = running_pids(ad.sock)
        took.append((time.time() - a) * 1000)
        looks += 1
        if now is not None:
            listed = len(now)
            last_adopted = sum(1 for k, v in before.items() if now.get(k) == v)
            if last_adopted == n:
                t = time.time()
                r["recovery_ms"] = (t - t_kill) * 1000
                r["restart_to_adopted_ms"] = (t - t_start) * 1000
                break
        time.sleep(max(0.005, 2 * (time.time() - a)))  # the poller takes at most a third of a core
    # The resolution of recovery_ms: one look (a full listing at N) and the pause after it.
    r["looks"], r["adopted_with_old_pid"], r["listed_running"] = looks, last_adopted, listed
    r["look_ms"] = H.summary(took)
    if "recovery_ms" not in r:
        raise RuntimeError("%d of %d adopted with their old pid after %.0f s" % (last_adopted, n, time.time() - t_kill))
    r["version"], r["settings"] = ad.version(), ad.settings()


class HealthPoller(threading.Thread):
    """GET /healthz every interval on a fresh connection; answered times kept."""

    def __init__(self, sock, interval):
        super().__init__(daemon=True)
        self.sock, self.interval = sock, interval
        self.ok, self.failed = [], 0
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            code, _ = get(self.sock, "/healthz", 5)
            if code == 200:
                self.ok.append(time.time())
            else:
                self.failed += 1
            self.stop_flag.wait(self.interval)


def upgrade(make, r, poll_ms):
    n = r["n"]
    ad, _ = make()
    r["up_s"] = up(ad, n)
    before = running_pids(ad.sock)
    time.sleep(1.0)
    p = HealthPoller(ad.sock, poll_ms / 1000)
    p.start()
    time.sleep(0.5)
    t0 = time.time()
    res = H.run([ad.bin, "upgrade", "--socket", ad.sock], timeout=600)
    t1 = time.time()
    time.sleep(0.5)
    p.stop_flag.set()
    p.join(10)
    r["upgrade_ms"] = (t1 - t0) * 1000
    r["upgrade_rc"], r["upgrade_out"] = res.returncode, (res.stdout + res.stderr).strip()[-500:]
    ts = p.ok
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    r["polls_answered"], r["polls_failed"] = len(ts), p.failed
    r["poll_ms"] = poll_ms
    r["poll_gap_ms"] = H.summary([g * 1000 for g in gaps])
    r["longest_gap_ms"] = max(gaps) * 1000 if gaps else None
    after = running_pids(ad.sock)
    r["runs_kept_pid"] = sum(1 for k, v in (before or {}).items() if (after or {}).get(k) == v)
    r["same_daemon_pid"] = H.alive(ad.pid)
    if res.returncode != 0:
        raise RuntimeError("tend upgrade: %s" % r["upgrade_out"])
    r["version"], r["settings"] = ad.version(), ad.settings()


def pty_counts():
    return H.read_int(PTY_MAX), H.read_int(PTY_NR)


def keeper_pid(ad):
    """The tty runs' keeper (docs/terminal.md: `tend-keeper`, the tend binary
    again, which holds every master), from state_dir/keeper.pid, or None."""
    try:
        with open(os.path.join(ad.state, "keeper.pid")) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if H.alive(pid) else None


def with_keeper(ad):
    """Make the adapter's own processes the daemon and its keeper: the two
    share the binary's pages, so the daemon's PSS alone drops when the keeper
    starts; their sum is what the tty runs cost."""
    quick = ad.supervisor_pids_quick

    def pids():
        k = keeper_pid(ad)
        if k is not None:
            H.tracker().add(k)
        return quick() + ([k] if k is not None else [])
    ad.supervisor_pids_quick = pids


def tty(make, r, pty_mode):
    n = r["n"]
    r["pty_max"], r["pty_nr_before"] = pty_counts()
    r["pty_max_mode"] = pty_mode
    raised = None
    if pty_mode == "raise" and r["pty_max"] is not None and r["pty_max"] < n + 64:
        raised = r["pty_max"]
        with open(PTY_MAX, "w") as f:
            f.write("%d\n" % (2 * n))
        r["pty_max_raised_to"] = 2 * n
    try:
        for kind, extra in (("plain", None), ("tty", {"tty": True})):
            ad, prog = make(extra_program=extra)
            with_keeper(ad)
            watch = H.CellWatch(ad)
            watch.start()
            try:
                k = r[kind] = {}
                try:
                    k["up_s"] = up(ad, n, watch)
                except RuntimeError as e:
                    k["error"] = str(e)
                    k["running"] = len(H.pids_running(prog))
                k["pty_nr"] = pty_counts()[1]
                watch.phase = "settle"
                time.sleep(S.SETTLE)
                k["pss_kb"] = S.mem_sum(ad.supervisor_pids_quick())[1]  # daemon + keeper
                kp = keeper_pid(ad)
                k["keeper_pss_kb"] = S.mem_sum([kp])[1] if kp else 0
            finally:
                watch.stop()
                k.update(watch.result())
            ad.stop(timeout=S.STOP_TIMEOUT)
            if kind == "tty":
                r["settings"] = ad.settings()
        if "error" not in r["tty"] and "error" not in r["plain"]:
            r["pss_per_tty_run_at_peak_kb"] = (r["tty"]["peak_pss_kb"] - r["plain"]["peak_pss_kb"]) / n
            r["pss_per_tty_run_at_rest_kb"] = (r["tty"]["pss_kb"] - r["plain"]["pss_kb"]) / n
        elif "error" in r["tty"]:
            raise RuntimeError("tty fleet: " + r["tty"]["error"])
    finally:
        if raised is not None:
            with open(PTY_MAX, "w") as f:
                f.write("%d\n" % raised)
            r["pty_max_restored"] = pty_counts()[0]


def audit(duration, total, out_dir):
    """bench/churn's soak; -> audit growth per hour from its samples."""
    top = d = tempfile.mkdtemp(prefix="peers-churn-")
    try:
        cmd = ["go", "run", "./bench/churn", "-phases", "soak", "-duration", duration, "-total", str(total),
               "-spread", "-out", d]
        t0 = time.time()
        res = H.run(cmd, timeout=7200 + 600, cwd=MODULE_ROOT)
        r = {"command": " ".join(cmd), "wall_s": time.time() - t0, "rc": res.returncode}
        if res.returncode != 0:
            r["error"] = (res.stdout + res.stderr)[-800:]
            return r
        runs = sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))
        if not runs:
            r["error"] = "bench/churn wrote no results directory under %s" % d
            return r
        d = os.path.join(d, runs[-1])  # -out is the parent of its STAMP directory
        with open(os.path.join(d, "results.json")) as f:
            churn = json.load(f)
        soak = churn["soak"]
        smp = [s for s in soak["samples"] if s.get("audit_bytes") is not None]
        r["programs"], r["seconds"] = soak.get("programs"), soak.get("seconds")
        r["samples"] = [{"at_s": s["at_s"], "programs": s["programs"], "audit_bytes": s["audit_bytes"]} for s in smp]
        if len(smp) >= 2 and smp[-1]["at_s"] > smp[0]["at_s"]:
            hours = (smp[-1]["at_s"] - smp[0]["at_s"]) / 3600
            r["audit_bytes_per_hour"] = (smp[-1]["audit_bytes"] - smp[0]["audit_bytes"]) / hours
            r["programs_per_hour"] = (smp[-1]["programs"] - smp[0]["programs"]) / hours
        if out_dir:
            keep = os.path.join(out_dir, "churn")
            shutil.copytree(d, keep, dirs_exist_ok=True)
            r["raw"] = os.path.relpath(keep, out_dir)
        return r
    finally:
        shutil.rmtree(top, ignore_errors=True)


def vm():
    cmd = os.environ.get("VM_LANE_CMD")
    if not cmd:
        return {"skipped": "not run: VM_LANE_CMD unset (the lead's hook: a command that runs the "
                           "1,000-program start in the VM lane's guest and prints one JSON object)"}
    t0 = time.time()
    res = subprocess.run(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=3600)
    r = {"command": cmd, "rc": res.returncode, "wall_s": time.time() - t0, "stderr_tail": res.stderr[-2000:]}
    for line in reversed(res.stdout.splitlines()):
        if line.strip().startswith("{"):
            try:
                r["guest"] = json.loads(line)
                break
            except ValueError:
                pass
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", default="recovery,upgrade,tty,audit,vm")
    ap.add_argument("--ns", default="1000,10000", help="N of the recovery phase")
    ap.add_argument("--upgrade-ns", default="10000")
    ap.add_argument("--tty-ns", default="10000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--poll-ms", type=float, default=1.0)
    ap.add_argument("--pty-max", choices=("raise", "keep"), default="raise")
    ap.add_argument("--audit-duration", default="1h")
    ap.add_argument("--audit-total", type=int, default=100000, help="programs the churn adds and removes")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--logs", default=None)
    ap.add_argument("--deadline", type=int, default=21600)
    a = ap.parse_args()
    H.deadline_guard(a.deadline)
    nofile = H.raise_nofile()
    seed = a.seed if a.seed is not None else int(time.time())
    phases = [p for p in a.phases.split(",") if p]
    out_dir = os.path.dirname(os.path.abspath(a.out)) if a.out else None
    logdir = a.logs or (os.path.join(out_dir, "logs") if out_dir else None)
    out = {"bench": "tend", "sys": H.sysinfo(), "seed": seed, "order": [], "harness_nofile": nofile,
           "loaded_above": H.LOADED, "poll_ms": a.poll_ms, "pty_max_mode": a.pty_max,
           "kernel_pty_max": H.read_int(PTY_MAX), "phases": {}}

    def save():
        if a.out:
            H.write_json(a.out, out)
    cells = []
    ns = {"recovery": a.ns, "upgrade": a.upgrade_ns, "tty": a.tty_ns}
    for ph in ("recovery", "upgrade", "tty"):
        if ph in phases:
            out["phases"][ph] = {}
            cells += [(ph, int(n)) for n in ns[ph].split(",") if n]
    for i in range(a.runs):
        order = list(cells)
        random.Random(seed + i).shuffle(order)
        out["order"].append(["%s/%d" % c for c in order])
        print("run %d of %d, seed %d: %s" % (i + 1, a.runs, seed + i, " ".join(out["order"][-1])), flush=True)
        for ph, n in order:
            body = {"recovery": recovery,
                    "upgrade": lambda mk, r: upgrade(mk, r, a.poll_ms),
                    "tty": lambda mk, r: tty(mk, r, a.pty_max)}[ph]
            r = cell(ph, n, i + 1, logdir, body)
            out["phases"][ph].setdefault(str(n), []).append(r)
            show = {k: r.get(k) for k in ("recovery_ms", "restart_to_adopted_ms", "longest_gap_ms", "upgrade_ms",
                                          "runs_kept_pid", "pss_per_tty_run_at_peak_kb", "pty_max",
                                          "error", "load_start", "load_end", "loaded") if k in r}
            print("%-9s N=%-6d run %d: %s" % (ph, n, i + 1, json.dumps(show)), flush=True)
            save()
    if "audit" in phases:
        out["phases"]["audit"] = audit(a.audit_duration, a.audit_total, out_dir)
        print("audit: %s" % json.dumps({k: v for k, v in out["phases"]["audit"].items() if k != "samples"}), flush=True)
        save()
    if "vm" in phases:
        out["phases"]["vm"] = vm()
        print("vm: %s" % json.dumps(out["phases"]["vm"])[:500], flush=True)
        save()
    save()


if __name__ == "__main__":
    main()
