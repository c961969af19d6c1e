#!/usr/bin/python3
"""Time two commands in pairs, A then B, N times (after a warm-up), each
exec's wall time (CLOCK_MONOTONIC around fork to reap) and CPU time (user +
system of the reaped child, getrusage): on a shared machine the difference
within a pair holds where absolute figures drift, and CPU time is steadier
than wall time. Prints the medians and the median of the per-pair
differences; --out keeps every sample as JSON.

usage: pairs.py [-n 60] [--warmup 10] [--label NAME] [--out FILE] -- A... --vs B...
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def one(argv):
    """-> (wall ms, cpu ms, exit status) of one exec of argv."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    a = time.monotonic_ns()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = (time.monotonic_ns() - a) / 1e6
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)) * 1000
    return wall, cpu, p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if "--vs" not in cmd:
        sys.exit("pairs.py: give -- A... --vs B...")
    i = cmd.index("--vs")
    A, B = cmd[:i], cmd[i + 1:]
    for _ in range(a.warmup):
        one(A)
        one(B)
    pairs = []
    for _ in range(a.n):
        wa, ca, sa = one(A)
        wb, cb, sb = one(B)
        pairs.append({"a_wall_ms": wa, "a_cpu_ms": ca, "a_status": sa, "b_wall_ms": wb, "b_cpu_ms": cb, "b_status": sb})

    def med(k):
        return statistics.median(p[k] for p in pairs)

    res = {"label": a.label, "a": A, "b": B, "n": a.n, "warmup": a.warmup, "loadavg": open("/proc/loadavg").read().split()[:3],
           "a_wall_ms_median": med("a_wall_ms"), "b_wall_ms_median": med("b_wall_ms"),
           "a_cpu_ms_median": med("a_cpu_ms"), "b_cpu_ms_median": med("b_cpu_ms"),
           "diff_wall_ms_median": statistics.median(p["a_wall_ms"] - p["b_wall_ms"] for p in pairs),
           "diff_cpu_ms_median": statistics.median(p["a_cpu_ms"] - p["b_cpu_ms"] for p in pairs),
           "a_wall_ms_p10": sorted(p["a_wall_ms"] for p in pairs)[len(pairs) // 10],
           "b_wall_ms_p10": sorted(p["b_wall_ms"] for p in pairs)[len(pairs) // 10],
           "failed": sum(1 for p in pairs if p["a_status"] or p["b_status"])}
    print("%s: A %s\n  B %s\n  wall median A %.2f ms, B %.2f ms (p10 %.2f, %.2f), A-B per pair %.2f ms; "
          "CPU median A %.2f, B %.2f, A-B %.2f ms; n=%d, load %s%s" % (
              a.label, " ".join(A), " ".join(B), res["a_wall_ms_median"], res["b_wall_ms_median"],
              res["a_wall_ms_p10"], res["b_wall_ms_p10"], res["diff_wall_ms_median"],
              res["a_cpu_ms_median"], res["b_cpu_ms_median"], res["diff_cpu_ms_median"], a.n,
              " ".join(res["loadavg"]), ", %d pairs failed" % res["failed"] if res["failed"] else ""))
    if a.out:
        res["pairs"] = pairs
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
