"""Mininet's Python API on netloop: Mininet test scripts run unchanged, with
netloop's exact delays and its own switches (no Open vSwitch, no netem).

``python -m netloop.mininet SCRIPT.py`` runs a script whose ``from
mininet.net import Mininet`` (and the other ``mininet.*`` imports) resolve
to these modules; ``netloop mn`` mirrors ``mn``. See docs/mininet.md for what
is there and what differs."""

from __future__ import annotations

import importlib
import sys

#: Mininet's modules that scripts import, and the modules here that stand in.
MODULES = ("net", "topo", "topolib", "node", "link", "log", "cli", "util", "clean")


def install() -> None:
    """Makes ``import mininet…`` import this package's modules (for scripts
    written for Mininet)."""
    sys.modules["mininet"] = sys.modules[__name__]
    for name in MODULES:
        sys.modules[f"mininet.{name}"] = importlib.import_module(f"{__name__}.{name}")
