#!/usr/bin/env python3
"""A stand-in for an interactive coding agent such as Claude Code, which needs
a network and an account: it reads a task at its prompt, works on it for a
while (a spinner and streamed lines, as agents repaint their screen), answers,
and waits for the next task. Like Claude Code it runs the hooks of
.claude/settings.json (in $CLAUDE_PROJECT_DIR, else the working directory):
the UserPromptSubmit hooks when a task is submitted, the Stop hooks when it
has answered, each a shell command with the event as JSON on its stdin.

FAKE_AGENT_WORK is how long a task takes, in seconds (default 2).
"""
import json
import os
import subprocess
import sys
import time
import uuid

PROJECT = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
WORK = float(os.environ.get("FAKE_AGENT_WORK", "2"))
SESSION = str(uuid.uuid4())
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def hooks(event):
    """The commands settings.json configures for event."""
    try:
        with open(os.path.join(PROJECT, ".claude", "settings.json")) as f:
            settings = json.load(f)
    except FileNotFoundError:
        return []
    return [h for group in settings.get("hooks", {}).get(event, [])
            for h in group.get("hooks", []) if h.get("type") == "command"]


def run_hooks(event, **fields):
    """Runs event's hooks as Claude Code does; a failing hook does not stop
    the agent (only exit status 2 would, and these hooks never block)."""
    payload = dict(session_id=SESSION, cwd=os.getcwd(), hook_event_name=event, **fields)
    for h in hooks(event):
        try:
            subprocess.run(h["command"], shell=True, input=json.dumps(payload), text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=h.get("timeout", 60), env=dict(os.environ, CLAUDE_PROJECT_DIR=PROJECT))
        except subprocess.TimeoutExpired:
            pass


def work(task):
    steps = max(1, int(WORK * 10))
    for i in range(steps):
        print(f"\r{SPINNER[i % len(SPINNER)]} working on: {task} ({i / 10:.1f}s)", end="", flush=True)
        if i % 10 == 9:
            print(f"\r\x1b[K  read {i // 10 + 1} file(s)")
        time.sleep(0.1)
    print(f"\r\x1b[K✓ done: {task}")


def main():
    print("fake-agent: a stand-in for a coding agent. Type a task and press Enter.")
    while True:
        print("\n> ", end="", flush=True)
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            print("^C")
            continue
        if not line:
            return 0  # the terminal closed
        task = line.strip()
        if not task:
            continue
        if task in ("/exit", "exit"):
            return 0
        run_hooks("UserPromptSubmit", prompt=task)
        try:
            work(task)
        except KeyboardInterrupt:
            print("\r\x1b[Kinterrupted")
        run_hooks("Stop", stop_hook_active=False)


if __name__ == "__main__":
    sys.exit(main())
