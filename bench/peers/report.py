#!/usr/bin/python3
"""Render RESULTS.md from one results directory.

usage: report.py RESULTS_DIR [OUT.md] [--notes NOTES.md]
RESULTS_DIR holds latency.json, crashloop.json, scale*.json, tini.json,
floor.jsonl, env.txt (any may be missing).  NOTES.md (hand-written
interpretation) is inserted after the summary if given.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import harness as H  # noqa: E402


NOTES_HEAD = 20  # NOTES.md must name the run's stamp in its first lines


def ordered(tools):
    """tend's columns first (its default mode, then the others), then the peers, then the floor."""
    def key(t):
        return (0 if t == "tend" else 1 if t.startswith("tend") else 3 if t == "go-floor" else 2, t)
    return sorted(tools, key=key)


def tool_label(t):
    return {"tend": "tend (cgroup auto: the default)", "tend-nocgroup": "tend (cgroup off)",
            "tend-maxrss": "tend (cgroup auto) + max_rss on every program",
            "go-floor": "floor: a Go loop, a pipe each (no supervisor)"}.get(t, t)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def mp(s, d=1):
    """median / p95"""
    if not s or not s.get("n"):
        return "n/a"
    f = "%%.%df" % d
    return (f + " / " + f) % (s["median"], s["p95"])


def mpp(s, d=2):
    """median / p95 / p99 (n): p99 only where the harness recorded it"""
    if not s or not s.get("n"):
        return "n/a"
    if "p99" not in s:
        return mp(s, d)
    f = "%%.%df" % d
    return (f + " / " + f + " / " + f + " (n=%d)") % (s["median"], s["p95"], s["p99"], s["n"])


def load_mark(rs):
    """The load averages a row was measured under, marked when above 2."""
    loads = [x for r in rs for x in (r.get("load_start"), r.get("load_end")) if x is not None]
    if not loads:
        return ""
    hi = max(loads)
    return ("**load %.1f** ⚠" if hi > H.LOADED else "load %.1f") % hi


def stop_text(rs):
    """Stop times, or "did not stop in 120 s" (the timeout plus the clean-up is no time)."""
    errs = [r["stop_error"] for r in rs if r.get("stop_error")]
    if errs:
        return "%s (%d of %d)" % (errs[0], len(errs), len(rs))
    v = [r["stop_s"] for r in rs if r.get("stop_s") is not None]
    if v and max(v) >= 120:  # runs before the harness said so itself
        return "did not stop in 120 s"
    return mr(v)


def mr(vals, d=1):
    """median (min-max) of a list of numbers"""
    v = [x for x in vals if x is not None]
    if not v:
        return "n/a"
    f = "%%.%df" % d
    if len(v) == 1:
        return f % v[0]
    return (f + " (" + f + "–" + f + ")") % (H.pct(v, 50), min(v), max(v))


def scale_section(L, scales):
    idle = sorted(set("%.0f s" % sc.get("idle_s", 30) for sc in scales))
    L.append("## 3. Scale / overhead: N supervised programs\n")
    L.append("Per cell: median (min–max) over runs. The program is the argv-less sleeper every tool "
             "execs directly. **PSS** = proportional set size summed over the supervisor's own processes "
             "(programs excluded; shared pages split fairly), at rest (the end of the idle window) and "
             "at **peak** (the largest sum a watcher saw sampling every 0.1 s through the whole cell, "
             "start and listings included; every 9× what a sample took when that is longer: about "
             "3 s for 10,000 s6 or runit processes); RSS-sum counts shared libraries once per process and "
             "hugely overstates multi-process supervisors. **Idle CPU** = supervisor CPU time over "
             "the idle window (%s, after %.0f s settle), as %% of one core. **List** = one full status "
             "listing through the CLI: **cold** = the first call after ≥ 2 s without one (the first "
             "after the idle window, then calls spaced 2 s apart; median), warm = back to back (median). "
             "**up ×floor** = up over the go-floor's up at the same N (a Go loop starting the N programs "
             "with a pipe each, timed the same way). The harness checks at every step that the "
             "supervisor is alive: a cell whose supervisor died says \"crashed after …\" and keeps its "
             "logs; a cell whose programs were not all running within its time limit (start included; "
             "%s) says \"did not finish\". *left* = programs still alive after the stop (killed by the "
             "harness).\n"
             % (", ".join(idle), scales[0]["settle_s"], ", ".join(sorted(set(
                 "%.0f s" % sc.get("up_timeout_s", 600) for sc in scales)))))
    if not any("peak_pss_kb" in r for sc in scales for byn in sc["tools"].values() for runs in byn.values() for r in runs):
        L.append("*(This run predates peak and cold measurement: every tool ran `/bin/sleep 100000` (s6 and "
                 "runit through a `/bin/sh` run script), PSS was read after the settle, before the idle window "
                 "and any listing, and the listings ran back to back after it.)*\n")
    for sc in scales:
        if sc.get("seed") is not None:
            L.append("Cells of `%s` in the orders %s (shuffled with seeds %d…); harness descriptor limit %s "
                     "(fs.nr_open %s). Cold = the first call after ≥ %.0f s without one (twice tend's %.0f s "
                     "sample age) with the page cache dropped, for every tool; rows measured above load %.0f "
                     "are marked ⚠.\n" % (
                         os.path.basename(sc.get("_path", "scale")), "; ".join(" ".join(o) for o in sc.get("order", [])),
                         sc["seed"], sc.get("harness_nofile", {}).get("after"), sc.get("harness_nofile", {}).get("fs_nr_open"),
                         sc.get("cold_gap_s", 20), sc.get("tend_sample_age_s", 10), sc.get("loaded_above", 2)))
    L.append("| tool | N | runs | up (s) | up ×floor | supervisor procs | PSS MiB at rest / **peak** | "
             "RSS-sum MiB at rest / peak | idle CPU % of a core | list ms **cold: first** / cold median / warm | "
             "listing complete | stop (s) | left | load |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    merged = {}
    for sc in scales:
        for t, byn in sc["tools"].items():
            for n, runs in byn.items():
                merged.setdefault(t, {}).setdefault(int(n), []).extend(runs)

    def med(v):
        return H.pct(v, 50) if v else None
    floor_up = {n: med([r["up_s"] for r in runs if "up_s" in r]) for n, runs in merged.get("go-floor", {}).items()}
    for t in ordered(merged):
        for n in sorted(merged[t]):
            runs = merged[t][n]
            ups = [r["up_s"] for r in runs if "up_s" in r and "error" not in r]
            ratio = "%.1f×" % (med(ups) / floor_up[n]) if ups and floor_up.get(n) else ""
            if t == "go-floor":
                loops = [r.get("loop", {}).get("seconds") for r in runs if r.get("loop")]
                L.append("| %s | %d | %d | %s (its loop: %s) | 1× ||||||||| %s |" % (
                    tool_label(t), n, len(ups), mr(ups, 2), mr(loops, 2), load_mark(runs)))
                continue
            good = [r for r in runs if "up_s" in r and "idle_cpu_ms" in r and "error" not in r]
            if not good:
                why = "; ".join(r.get("error") or r.get("skipped") or "?" for r in runs)
                logs = [r["logs"] for r in runs if r.get("logs")]
                if logs:
                    why += " (logs: %s)" % ", ".join("`%s`" % x for x in logs)
                left = [r.get("left_behind") for r in runs if r.get("left_behind") is not None]
                nof = sorted(set(str(r.get("nofile")) for r in runs if r.get("nofile")))
                if nof:
                    why += " (descriptor limit %s)" % ", ".join(nof)
                L.append("| %s | %d | %d | %s |||||||||%s | %s |" % (tool_label(t), n, len(runs), why,
                                                                       mr(left, 0) if left else "", load_mark(runs)))
                continue
            idle_pct = [100 * r["idle_cpu_ms"] / 1000 / r["idle_s"] for r in good]
            pss = mr([r["pss_kb"] / 1024 for r in good])
            rss = mr([r["rss_kb"] / 1024 for r in good], 0)
            if all("peak_pss_kb" in r for r in good):
                pss += " / **%s**" % mr([r["peak_pss_kb"] / 1024 for r in good])
                rss += " / %s" % mr([r["peak_rss_kb"] / 1024 for r in good], 0)
            lst = mr([r["list_ms"]["median"] for r in good], 0)
            if all("list_cold_ms" in r for r in good):
                lst = "%s / %s" % (mr([r["list_cold_ms"]["median"] for r in good], 0), lst)
                first = [r.get("list_cold_first_ms") or (r.get("list_cold_samples_ms") or [None])[0] for r in good]
                lst = "**%s** / %s" % (mr(first, 0), lst)
            left = [r.get("left_behind") for r in good if r.get("left_behind") is not None]
            L.append("| %s | %d | %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                tool_label(t), n, len(good), mr(ups), ratio, good[0]["nproc"], pss, rss,
                mr(idle_pct, 3), lst, "yes" if all(r["listed_ok"] for r in good) else "NO",
                stop_text(good), mr(left, 0) if left else "n/a", load_mark(good)))
    L.append("")
    peaks = ["%s N=%s %s" % (t, n, "/".join(sorted(set(r.get("peak_pss_phase") or "?" for r in runs))))
             for t in ordered(merged) for n, runs in sorted(merged[t].items())
             if any(r.get("peak_pss_phase") for r in runs) and t != "go-floor"]
    if peaks:
        L.append("Phase of the PSS peak: " + "; ".join(peaks) + ".\n")


def tend_section(L, d):
    """Section 6: the rows only tend has (bench_tend.py)."""
    ph = d.get("phases", {})
    L.append("## 6. tend only: recovery, upgrade pause, tty fleet, audit growth, the VM lane\n")
    L.append("Cells shuffled with seed %s; median (min–max) over runs; rows above load %.0f marked ⚠.\n"
             % (d.get("seed"), d.get("loaded_above", 2)))
    L.append("| measure | N | runs | result | load |")
    L.append("|---|---|---|---|---|")

    def rows(name, label, key, unit, digits=0):
        for n, rs in sorted(ph.get(name, {}).items(), key=lambda x: int(x[0])):
            errs = [r["error"] for r in rs if r.get("error")]
            v = [r.get(key) for r in rs if r.get(key) is not None]
            L.append("| %s | %s | %d | %s%s | %s |" % (label, n, len(rs), mr(v, digits) + " " + unit if v else "",
                                                       (" failed: " + "; ".join(errs)) if errs else "", load_mark(rs)))
    rows("recovery", "daemon SIGKILLed → `tend up` again → every run listed running with its old pid",
         "recovery_ms", "ms")
    rows("upgrade", "`tend upgrade`: the longest gap between answered `GET /healthz` polls (every %s ms)"
         % d.get("poll_ms"), "longest_gap_ms", "ms", 1)
    rows("upgrade", "`tend upgrade` as the client waits", "upgrade_ms", "ms")
    rows("tty", "tty runs: daemon PSS added per tty run at peak (kernel.pty.max %s, mode %s)"
         % (d.get("kernel_pty_max"), d.get("pty_max_mode")), "pss_per_tty_run_at_peak_kb", "KiB", 1)
    a = ph.get("audit")
    if a:
        L.append("| audit directory growth under churn (%s) | — | 1 | %s | |" % (
            a.get("command", ""), "%.1f MiB per hour at %.0f programs per hour" % (
                a["audit_bytes_per_hour"] / 2**20, a.get("programs_per_hour", 0))
            if a.get("audit_bytes_per_hour") is not None else a.get("error", "n/a")))
    v = ph.get("vm")
    if v:
        L.append("| 1,000-program start in the VM lane's guest | 1000 | 1 | %s | |" % (
            v.get("skipped") or json.dumps(v.get("guest"))))
    L.append("")


def main():
    args = sys.argv[1:]
    notes = None
    if "--notes" in args:
        i = args.index("--notes")
        notes = args[i + 1]
        del args[i:i + 2]
    rd = args[0]
    out_md = args[1] if len(args) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
    L = []
    lat = load(os.path.join(rd, "latency.json"))
    crash = load(os.path.join(rd, "crashloop.json"))
    tini = load(os.path.join(rd, "tini.json"))
    scales = []
    for p in sorted(glob.glob(os.path.join(rd, "scale*.json"))):
        sc = load(p)
        if sc:
            sc["_path"] = p
            scales.append(sc)
    tend = load(os.path.join(rd, "tend.json"))
    floor = []
    if os.path.exists(os.path.join(rd, "floor.jsonl")):
        for line in open(os.path.join(rd, "floor.jsonl")):
            line = line.strip()
            if line.startswith("{"):
                floor.append(json.loads(line))
    env = open(os.path.join(rd, "env.txt")).read() if os.path.exists(os.path.join(rd, "env.txt")) else ""

    L.append("# Peer supervisors: performance anchors\n")
    L.append("Generated by `report.py %s` from the raw JSON in that directory. "
             "Re-run everything with `./run_all.sh` (see README.md).\n" % os.path.relpath(rd, os.path.dirname(out_md)))
    if env:
        L.append("## Machine and versions\n\n```\n" + env.strip() + "\n```\n")
    if notes and os.path.exists(notes):
        text = open(notes).read()
        stamp = os.path.basename(os.path.normpath(rd))
        if stamp in "\n".join(text.splitlines()[:NOTES_HEAD]):
            L.append(text.rstrip() + "\n")
        else:
            # NOTES are written for one run: stale ones are not pasted under new tables
            sys.stderr.write("report.py: %s does not name %s in its first %d lines: not inserted\n"
                             % (notes, stamp, NOTES_HEAD))
            L.append("*(No hand-written reading of this run yet: %s was written for another run.)*\n"
                     % os.path.basename(notes))

    tools_order = []
    for src in (lat, crash):
        if src:
            for t in src["tools"]:
                if t not in tools_order:
                    tools_order.append(t)

    if lat:
        L.append("## 1. Exit-detection / restart latency (SIGKILL of a supervised program)\n")
        new = any("execs" in r for r in lat["tools"].values())
        program = ("Every tool execs the same argv-less program directly (for s6 and runit `./run` is a "
                   "symlink to it); `execs` counts the replacement's exec events up to the program (1: its "
                   "first exec is the program). " if new else "")
        L.append("%d kills per tool (CLI column: %d). Times in ms from just before kill(2), "
                 "**median / p95**. %s**kill→fork** (the replacement "
                 "exists) is the supervisor's own reaction and the primary figure; `exec` and `exit` "
                 "are kernel proc-connector timestamps too (no polling, supervisor undisturbed); "
                 "`status API` = first answer of the cheapest status path showing the new pid (polled "
                 "only once the replacement exists); `CLI` = kill, then loop the user CLI until it shows "
                 "the new pid (the polling can wake an event-loop supervisor). Gap between kills: %.1f s. "
                 "tend runs with zero backoff here (every restart delay minimised, as for every tool)%s.\n"
                 % (lat["reps"], lat["cli_reps"], program, lat["gap_s"],
                    "; its default config is §1b" if lat.get("default_config") else ""))
        if not new:
            L.append("*(This run predates the direct exec: every tool ran `/bin/sleep 1000`, s6 and runit "
                     "through a `/bin/sh` run script, one more exec before the program.)*\n")
        if lat.get("seed") is not None:
            L.append("Tools in the order %s (shuffled with seed %d).\n" % (", ".join(lat.get("order", [])), lat["seed"]))
        L.append("| tool | **kill→fork** (p50 / p95 / p99) | kill→exec | execs | kill→old exits | "
                 "kill→status API shows new pid | kill→CLI shows new pid | one CLI call | failures | load |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for t in ordered(lat["tools"]):
            r = lat["tools"][t]
            if "skipped" in r:
                L.append("| %s | skipped: %s ||||||||" % (tool_label(t), r["skipped"]))
                continue
            execs = "/".join(str(x) for x in r["execs"]) if "execs" in r else "n/a"
            L.append("| %s | **%s** | %s | %s | %s | %s | %s | %s | %d%s | %s |" % (
                tool_label(t), mpp(r["fork_ms"], 2), mp(r["exec_ms"], 2), execs, mp(r["exit_ms"], 2),
                mp(r["status_ms"]), mp(r["cli_ms"]), mp(r["cli_call_ms"]), r["failures"],
                " (%s)" % r["error"] if r.get("error") else "", load_mark([r])))
        if any(t.startswith("s6") and "skipped" not in r for t, r in lat["tools"].items()):
            L.append("\ns6's status API column is one `s6-svstat -p` exec per look (s6 has no "
                     "persistent status client), so it is quantised by that exec (4–7 ms on this VM) "
                     "and overstates how late s6 knows the new pid; its fork and exec columns are "
                     "kernel timestamps and are not affected.")
        L.append("\nmin–max of the fork column: " + "; ".join(
            "%s %.2f–%.2f" % (t, lat["tools"][t]["fork_ms"]["min"], lat["tools"][t]["fork_ms"]["max"])
            for t in ordered(lat["tools"]) if lat["tools"][t].get("fork_ms", {}).get("n")) + " ms.\n")
        dc = lat.get("default_config") or {}
        if dc:
            L.append("### 1b. tend in its default config (every restart key at its default)\n")
            L.append("backoff_initial 1 s, doubling per crash (jitter 0.1), counted from the run's **start**: "
                     "a run older than its backoff is replaced at once, a younger one waits out the rest. "
                     "Each program is killed twice: once its run is older than 1 s (its **first crash**), "
                     "then its replacement, %.1f s old for half the programs (**repeated crash, backoff "
                     "elapsed**: the second crash's backoff is at most 2 s) and %.1f s old for the other half "
                     "(**repeated crash, backoff not elapsed**: the replacement waits out what is left, "
                     "which the `backoff` event announces). ms, median / p95.\n"
                     % (next(iter(dc.values())).get("age_elapsed_s", 2.3), next(iter(dc.values())).get("age_waiting_s", 1.3)))
            L.append("| tool | first crash: kill→fork | kill→exec | repeated, backoff elapsed: kill→fork | kill→exec | "
                     "repeated, backoff not elapsed: kill→fork | backoff announced | kill→fork minus it | failures |")
            L.append("|---|---|---|---|---|---|---|---|---|")
            for t in ordered(dc):
                r = dc[t]
                if "skipped" in r:
                    L.append("| %s | skipped: %s ||||||||" % (tool_label(t), r["skipped"]))
                    continue
                L.append("| %s | **%s** | %s | **%s** | %s | %s | %s | %s | %d |" % (
                    tool_label(t), mp(r["first_fork_ms"], 2), mp(r["first_exec_ms"], 2),
                    mp(r["elapsed_fork_ms"], 2), mp(r["elapsed_exec_ms"], 2), mp(r["waiting_fork_ms"], 0),
                    mp(r["waiting_backoff_ms"], 0), mp(r["waiting_past_backoff_ms"], 2), r["failures"]))
            L.append("")

    bg = (lat or {}).get("background")
    if bg:
        L.append("### 1c. kill → fork with %d other programs supervised\n" % bg["others"])
        L.append("| tool | **kill→fork** (p50 / p95 / p99) | kill→exec | failures | load |")
        L.append("|---|---|---|---|---|")
        for t in ordered(bg["tools"]):
            r = bg["tools"][t]
            if "skipped" in r:
                L.append("| %s | skipped: %s |||||" % (tool_label(t), r["skipped"]))
                continue
            L.append("| %s | **%s** | %s | %d%s | %s |" % (
                tool_label(t), mpp(r["fork_ms"], 2), mpp(r["exec_ms"], 2), r["failures"],
                " (%s)" % r["error"] if r.get("error") else "", load_mark([r])))
        L.append("")
    mass = (lat or {}).get("mass")
    if mass:
        L.append("### 1d. %d programs SIGKILLed at once: until every one is replaced\n" % mass["n"])
        L.append("From the first kill(2) until the last replacement exec'd the program (kernel events); "
                 "median (min–max) over %d runs; the kill loop's own time beside.\n" % mass["runs"])
        L.append("| tool | all replaced (ms) | each replacement's kill→exec, p50 of the last run | kill loop (ms) | load |")
        L.append("|---|---|---|---|---|")
        for t in ordered(mass["tools"]):
            r = mass["tools"][t]
            if "skipped" in r:
                L.append("| %s | skipped: %s ||||" % (tool_label(t), r["skipped"]))
                continue
            runs = r.get("runs", [])
            errs = [x["error"] for x in runs if x.get("error")] + ([r["error"]] if r.get("error") else [])
            L.append("| %s | %s%s | %s | %s | %s |" % (
                tool_label(t), mr([x.get("all_replaced_ms") for x in runs], 0), " (%s)" % "; ".join(errs) if errs else "",
                mp(runs[-1]["each_exec_ms"], 0) if runs else "n/a", mr([x["kill_loop_ms"] for x in runs], 1),
                load_mark([r])))
        L.append("")

    if crash:
        L.append("## 2. Crash-loop restart throughput (`/bin/false`, all backoff minimised)\n")
        L.append("%d runs × %.0f s window per tool (fresh supervisor each run, %.0f s warm-up). "
                 "Counted = processes forked by the supervisor that exec'd (kernel events). "
                 "Supervisor CPU = its own CPU time during the window / restarts. Every restart delay "
                 "is minimised: **tend runs with zero backoff** (`backoff_initial = backoff_max = \"0s\"`); "
                 "with its defaults a crash loop waits 1 s, 2 s, 4 s … up to 60 s between starts.\n"
                 % (len(next(iter(v for v in crash["tools"].values() if "runs" in v))["runs"])
                    if any("runs" in v for v in crash["tools"].values()) else 0,
                    crash["window_s"], crash["warmup_s"]))
        L.append("| tool | restarts/s median (min–max) | supervisor CPU ms per restart, median (min–max) |")
        L.append("|---|---|---|")
        for t in ordered(crash["tools"]):
            r = crash["tools"][t]
            name = tool_label(t) + (", zero backoff" if t.startswith("tend") else "")
            if "skipped" in r:
                L.append("| %s | skipped: %s | |" % (name, r["skipped"]))
                continue
            L.append("| %s | %s | %s |" % (name, mr([x["rate"] for x in r["runs"]], 1),
                                           mr([x["sup_cpu_ms_per_restart"] for x in r["runs"]], 2)))
        L.append("")

    if scales:
        scale_section(L, scales)

    if tend:
        tend_section(L, tend)

    if floor:
        L.append("## 4. Physical limit of this machine (no supervisor)\n")
        L.append("| probe | result: median (min–max) over runs |")
        L.append("|---|---|")
        label = {("c", "fork"): "C fork()+execve+wait4", ("c", "vfork"): "C vfork()+execve+wait4",
                 ("c", "pspawn"): "C posix_spawn+wait4",
                 ("go", "spawn-exec"): "Go os/exec Cmd.Run", ("go", "spawn-forkexec"): "Go syscall.ForkExec+Wait4",
                 ("c", "wait4"): "C thread blocked in wait4(pid)",
                 ("c", "sigchld"): "C SIGCHLD→signalfd→poll→waitpid(WNOHANG)",
                 ("c", "pidfd"): "C pidfd_open→poll→waitid(P_PIDFD)",
                 ("go", "killwait-exec"): "Go goroutine in Cmd.Wait", ("go", "killwait-wait4"): "Go goroutine in syscall.Wait4"}
        groups = {}
        for r in floor:
            key = (r["lang"], r["mode"], r.get("workers"))
            groups.setdefault(key, []).append(r)
        for (lang, mode, workers), rs in groups.items():
            if "per_sec" in rs[0]:
                L.append("| %s of /bin/true, %s worker(s): spawns/s | %s |" % (
                    label.get((lang, mode), lang + " " + mode), workers, mr([r["per_sec"] for r in rs], 0)))
            elif lang == "hyperfine":
                L.append("| hyperfine -N `/bin/true`: µs per run (median) | %.0f (min %.0f) |" % (
                    rs[0]["us_median"], rs[0]["us_min"]))
            else:
                L.append("| SIGKILL→waiter returns, %s: µs median; p95 (%d kills per run) | %s; p95 %s |" % (
                    label.get((lang, mode), lang + " " + mode), rs[0]["reps"],
                    mr([r["us_median"] for r in rs], 0), mr([r["us_p95"] for r in rs], 0)))
        L.append("")

    if tini:
        L.append("## 5. tini (%s): PID-1-style reaping\n" % tini["version"])
        e = tini["exit"]
        L.append("| measure | ms median / p95 (min–max) |")
        L.append("|---|---|")
        def row(name, s):
            L.append("| %s | %s (%.3f–%.3f) |" % (name, mp(s, 3), s["min"], s["max"]) if s.get("n") else "| %s | n/a |" % name)
        row("kill child of `tini -s` → tini exits (kernel event)", e["tini_exit_event_ms"])
        row("kill child of `tini -s` → our waitpid(tini) returns", e["tini_waitpid_ms"])
        row("baseline: kill plain child → our (Python) waitpid returns", e["baseline_python_waitpid_ms"])
        row("orphan re-parented to `tini -s` (subreaper): kill → zombie gone", tini["reap_subreaper"]["reap_ms"])
        row("orphan under tini as PID 1 of a PID namespace: kill → zombie gone", tini["reap_pid1"]["reap_ms"])
        pss = tini["reap_subreaper"]["tini_pss_kb"]
        rss = tini["reap_subreaper"]["tini_rss_kb"]
        if pss.get("n"):
            L.append("\ntini memory: PSS %.0f kB, RSS %.0f kB (median).\n" % (pss["median"], rss["median"]))

    # versions + settings
    L.append("## Versions and settings used\n")
    seen = set()
    for src in (lat, crash):
        if not src:
            continue
        for t, r in src["tools"].items():
            if "skipped" in r:
                continue
            key = (t, src["bench"])
            if key in seen:
                continue
            seen.add(key)
            L.append("- **%s** (%s, %s): `%s`" % (t, r.get("version", "?"), src["bench"],
                                                json.dumps(r.get("settings", {}), sort_keys=True)))
    # tools measured only in the scale benchmark (e.g. tend-maxrss)
    for s in scales:
        for t, byn in s["tools"].items():
            if any(k[0] == t for k in seen):
                continue
            good = [r for runs in byn.values() for r in runs if "settings" in r]
            if good:
                seen.add((t, "scale"))
                L.append("- **%s** (%s, scale): `%s`" % (t, good[0].get("version", "?"),
                                                       json.dumps(good[0]["settings"], sort_keys=True)))
    L.append("")
    with open(out_md, "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote", out_md)


if __name__ == "__main__":
    main()
