#!/usr/bin/env python3
"""after-turn.py ID -- COMMAND [ARGS...]

Runs COMMAND each time an agent's turn ends: when instance ID (NAME:K, or a
bare NAME for each of its instances) goes from a turn (turn_active) to idle.
It follows tend's event stream (`tend events -f --json`), so no turn is
missed, however short, and none is counted twice. COMMAND gets the instance
in $TEND_AGENT; its output goes to this program's own output (and so, run
under tend, to its log). Turns that ended before it started are not run for.

Use it for the chores that follow an agent's work: run the tests, show
`git diff --stat`, send a notification, `tend send` the next task.
"""
import json
import os
import subprocess
import sys
from datetime import datetime, timezone


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print("usage: after-turn.py ID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    sel, command = argv[1], argv[3:]
    started = datetime.now(timezone.utc)
    events = subprocess.Popen(["tend", "events", "-f", "--json", "--kinds", "status_changed", "--id", sel],
                              stdout=subprocess.PIPE, text=True)
    in_turn = {}  # instance id -> whether its last status was in a turn
    for line in events.stdout:
        ev = json.loads(line)
        agent, active = ev.get("id"), bool(ev.get("turn_active"))
        was = in_turn.get(agent, False)
        in_turn[agent] = active
        if not was or active:
            continue
        if datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")) < started:
            continue  # the backlog: a turn that ended before we started
        print(f"after-turn: {agent}'s turn ended; running {' '.join(command)}", flush=True)
        subprocess.run(command, env=dict(os.environ, TEND_AGENT=agent))
    return events.wait() or 1  # the stream ended: the daemon went away


if __name__ == "__main__":
    sys.exit(main(sys.argv))
