"""Registry of adapters ("columns").  tend is ours; add another tool as one more entry
(see adapters/ours_template.py)."""
import importlib

REGISTRY = {
    "supervisord": ("adapters.supervisord", "Supervisord"),
    "pm2": ("adapters.pm2", "PM2"),
    "s6": ("adapters.s6", "S6"),
    "s6-noready": ("adapters.s6", "S6NoReady"),
    "runit": ("adapters.runit", "Runit"),
    "tend": ("adapters.tend", "Tend"),
    "tend-nocgroup": ("adapters.tend", "TendNoCgroup"),  # [daemon] cgroup = "off"
    "go-floor": ("adapters.floor", "GoFloor"),           # no supervisor: a Go loop (scale only)
    "tend-maxrss": ("adapters.tend", "TendMaxRSS"),   # max_rss sampling on every program
}

DEFAULT_TOOLS = ["supervisord", "pm2", "s6", "runit"]


def make(name, workdir):
    mod, cls = REGISTRY[name]
    return getattr(importlib.import_module(mod), cls)(workdir)
