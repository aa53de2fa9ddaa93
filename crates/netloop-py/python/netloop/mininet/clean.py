"""``mn -c`` / ``cleanup()``: removes what netloop runs left behind (their
namespaces and devices; only a SIGKILLed run leaves anything)."""

from __future__ import annotations

from .. import network as _netloop
from .log import info


def cleanup() -> None:
    info("*** Removing what earlier netloop runs left behind\n")
    info(_netloop.clean() + "\n")
    info("*** Cleanup complete.\n")


class Cleanup:
    cleanup = staticmethod(cleanup)
