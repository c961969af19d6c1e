#!/usr/bin/python3
"""The first answer after a quiet spell (issue 34).

For each N (default 1,000 and 10,000) and each tool (default tend, tend with
cgroups off, runit, s6): supervise N programs (the argv-less sleeper, as
bench_scale.py does), let it settle, then
  idle_cpu_ms     CPU time (schedstat, every thread of every supervisor
                  process) over IDLE s (150) with nothing asked
  first_warm_ms   the full status listing a user types, the first call after
                  QUIET s (60) without one, the page cache warm
  first_drop_ms   the same after another QUIET s, right after
                  `sync; echo 3 > /proc/sys/vm/drop_caches`
  warm_ms         WARM listings back to back
ROUNDS times each (3), the tools one after the other. Beside each listing's
wall time, the CPU it cost: the listing's processes (getrusage of the reaped
children) and the supervisor's (its schedstat, before and after): wall time
on a loaded machine is provisional, CPU time steadier.

The listings: tend: `tend ps` run in the config's directory, as an operator
types it (the nearest tend.toml finds the socket); runit: `sv status DIR...`
over the N service directories (one exec); s6: `s6-svstat` of each service
directory from one shell loop (one exec each), as bench_scale.py lists them.

Runs as root (drop_caches; runit's and s6's supervisors). One command:

  sudo bench/peers/bench_firstcall.py                  # about 1 h 45 min (s6 at 10,000 is 15 s a listing)
  sudo bench/peers/bench_firstcall.py -quick           # a minute or two: proves it works
  ... --out results/STAMP/firstcall.json               # raw samples, with the machine's figures

usage: bench_firstcall.py [-quick] [--tools a,b] [--ns 1000,10000] [--idle 150]
                          [--quiet 60] [--rounds 3] [--warm 10] [--out FILE]
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import harness as H  # noqa: E402
import adapters  # noqa: E402
from adapters.base import Program  # noqa: E402

# Settling after every program runs, before the idle window: 5 s, and 3 s more
# per 1,000 programs: at 10,000 the tail of a start (tend's first announcements,
# each with a sample of its run; a collection) outlasts 5 s and would be counted
# as idle CPU.
SETTLE = 5.0
SETTLE_PER_1000 = 3.0
UP_TIMEOUT = 900
STALL = 120


def drop_caches():
    """Write back and drop the page cache, dentries and inodes."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def children_cpu_ms():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000


def supervisor_cpu_ms(pids):
    return sum(H.cpu_ns(p) for p in pids) / 1e6


def lister(tool, ad):
    """-> a function that runs one full listing and returns how many
    programs it shows running."""
    if tool.startswith("tend"):
        def tend_ps():
            # As an operator types it: in the config's directory, no flags.
            r = H.run([ad.bin, "ps"], timeout=600, cwd=ad.workdir)
            return sum(1 for line in r.stdout.splitlines()[1:] if " running " in line)
        return tend_ps
    return lambda: sum(1 for v in ad.status_all_cli().values() if v)


def timed(fn, sup):
    """One listing: wall ms, the CLI's CPU ms, the supervisor's CPU ms, and
    the running programs it showed."""
    c0, s0 = children_cpu_ms(), supervisor_cpu_ms(sup)
    a = H.now_ns()
    k = fn()
    wall = H.ms(H.now_ns() - a)
    c1, s1 = children_cpu_ms(), supervisor_cpu_ms(sup)
    return {"wall_ms": wall, "cli_cpu_ms": c1 - c0, "supervisor_cpu_ms": s1 - s0, "running": k}


def one(tool, n, a):
    wd = tempfile.mkdtemp(prefix="peers-firstcall-%s-" % tool)
    ad = adapters.make(tool, wd)
    ok, why = ad.available()
    if not ok:
        shutil.rmtree(wd, ignore_errors=True)
        return {"skipped": why}
    prog = H.program_copy(wd)
    ad.setup([Program("p%d" % i, [prog]) for i in range(n)])
    r = {"n": n}
    phase = "start"
    try:
        t0 = time.time()
        ad.deadline = t0 + UP_TIMEOUT
        ad.start()
        if ad.wait_all_running(n, UP_TIMEOUT, stall=STALL) is None:
            r["error"] = "not all running after %.0f s (%d of %d)" % (time.time() - t0, ad.running, n)
            return r
        r["up_s"] = time.time() - t0
        ad.track_tree()
        time.sleep(SETTLE + SETTLE_PER_1000 * n / 1000)
        sup = ad.supervisor_pids()
        r["supervisor_processes"] = len(sup)
        phase = "idle"
        c0 = supervisor_cpu_ms(sup)
        time.sleep(a.idle)
        r["idle_s"], r["idle_cpu_ms"] = a.idle, supervisor_cpu_ms(sup) - c0
        phase = "listings"
        ls = lister(tool, ad)
        rounds = []
        for i in range(a.rounds):
            rd = {}
            time.sleep(a.quiet)
            rd["first_warm"] = timed(ls, sup)
            time.sleep(a.quiet)
            drop_caches()
            rd["first_drop"] = timed(ls, sup)
            rd["warm"] = [timed(ls, sup) for _ in range(a.warm)]
            rounds.append(rd)
            print("  %-13s N=%-5d round %d: first %.1f ms (cache dropped %.1f), warm median %.1f ms" % (
                tool, n, i + 1, rd["first_warm"]["wall_ms"], rd["first_drop"]["wall_ms"],
                H.summary([w["wall_ms"] for w in rd["warm"]])["median"]), flush=True)
        r["rounds"] = rounds
        for key in ("first_warm", "first_drop"):
            r[key + "_ms"] = H.summary([rd[key]["wall_ms"] for rd in rounds])
            r[key + "_cpu_ms"] = H.summary([rd[key]["cli_cpu_ms"] + rd[key]["supervisor_cpu_ms"] for rd in rounds])
        warm = [w for rd in rounds for w in rd["warm"]]
        r["warm_ms"] = H.summary([w["wall_ms"] for w in warm])
        r["warm_cpu_ms"] = H.summary([w["cli_cpu_ms"] + w["supervisor_cpu_ms"] for w in warm])
        listed = [rd[k]["running"] for rd in rounds for k in ("first_warm", "first_drop")] + [w["running"] for w in warm]
        r["listed_ok"] = all(k >= n for k in listed)
        r["version"] = ad.version()
    except Exception as e:  # one tool's failure must not cost the others' cells
        r["error"] = "%s: %s: %s" % (phase, type(e).__name__, str(e)[-300:])
    finally:
        ad.stop(timeout=120)
        left = H.pids_running(prog)
        r["left_behind"] = len(left)
        for p in left:
            H.tracker().add(p)
        if left:
            H.tracker().kill_all()
            H.wait_gone(left, 30)
        shutil.rmtree(wd, ignore_errors=True)
    return r


def describe(tool, n, r):
    if "skipped" in r or "error" in r:
        return "%-13s N=%-5d %s" % (tool, n, r.get("skipped") or r.get("error"))
    return ("%-13s N=%-5d idle CPU %.1f ms/%.0fs  first after quiet %s (CPU %s)  cache dropped %s (CPU %s)  "
            "warm %s (CPU %s)  ok=%s  left %d" % (
                tool, n, r["idle_cpu_ms"], r["idle_s"],
                H.fmt_summary(r["first_warm_ms"], "ms", 1), H.fmt_summary(r["first_warm_cpu_ms"], "ms", 1),
                H.fmt_summary(r["first_drop_ms"], "ms", 1), H.fmt_summary(r["first_drop_cpu_ms"], "ms", 1),
                H.fmt_summary(r["warm_ms"], "ms", 1), H.fmt_summary(r["warm_cpu_ms"], "ms", 1),
                r["listed_ok"], r["left_behind"]))


def main():
    ap = argparse.ArgumentParser(description="first status listing after a quiet spell, tend beside runit and s6")
    ap.add_argument("-quick", "--quick", action="store_true",
                    help="a short run that proves the harness works: N=200, 5 s windows, one round")
    ap.add_argument("--tools", default="tend,tend-nocgroup,runit,s6")
    ap.add_argument("--ns", default="1000,10000")
    ap.add_argument("--idle", type=float, default=150.0, help="idle window for the idle CPU, s")
    ap.add_argument("--quiet", type=float, default=60.0, help="quiet before each first listing, s (>= 60)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=10, help="back-to-back listings per round")
    ap.add_argument("--out", default=None)
    ap.add_argument("--deadline", type=int, default=3 * 3600)
    a = ap.parse_args()
    if a.quick:
        a.ns, a.idle, a.quiet, a.rounds, a.warm = "200", 5.0, 5.0, 1, 3
    if os.geteuid() != 0:
        sys.exit("bench_firstcall.py: run as root (drop_caches, the peers' supervisors)")
    H.deadline_guard(a.deadline)
    out = {"bench": "firstcall", "sys": H.sysinfo(), "quick": a.quick, "settle_s": SETTLE,
           "settle_per_1000_s": SETTLE_PER_1000, "idle_s": a.idle,
           "quiet_s": a.quiet, "rounds": a.rounds, "warm": a.warm, "tools": {}}
    for n in [int(x) for x in a.ns.split(",")]:
        for tool in a.tools.split(","):
            r = one(tool, n, a)
            out["tools"].setdefault(tool, {})[str(n)] = r
            print(describe(tool, n, r), flush=True)
            if a.out:
                H.write_json(a.out, out)
    out["sys_after"] = H.sysinfo()
    if a.out:
        H.write_json(a.out, out)


if __name__ == "__main__":
    main()
