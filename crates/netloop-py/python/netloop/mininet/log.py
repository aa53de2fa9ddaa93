"""Mininet's logging calls (``setLogLevel``, ``info``, ``output``, …).

Mininet's messages carry their own line ends and are joined by spaces; they
go to standard error, below the level set by ``setLogLevel`` (``output`` by
default, so ``info`` shows only after ``setLogLevel('info')``)."""

from __future__ import annotations

import sys
from typing import Any

LEVELS = {
    "debug": 10,
    "info": 20,
    "output": 25,
    "warning": 30,
    "warn": 30,
    "error": 40,
    "critical": 50,
}
LEVEL_DEFAULT = "output"


class MininetLogger:
    """What Mininet's ``lg`` offers: a level and one method per level."""

    def __init__(self) -> None:
        self.level = LEVELS[LEVEL_DEFAULT]

    def setLogLevel(self, levelname: str | None = None) -> None:  # noqa: N802 - Mininet's name
        name = levelname or LEVEL_DEFAULT
        if name not in LEVELS:
            raise ValueError(f"setLogLevel({name!r}): unknown level; one of {', '.join(LEVELS)}")
        self.level = LEVELS[name]

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802
        return level >= self.level

    def _log(self, level: int, args: tuple[Any, ...]) -> None:
        if level >= self.level:
            sys.stderr.write(" ".join(str(a) for a in args))
            sys.stderr.flush()

    def debug(self, *args: Any) -> None:
        self._log(LEVELS["debug"], args)

    def info(self, *args: Any) -> None:
        self._log(LEVELS["info"], args)

    def output(self, *args: Any) -> None:
        self._log(LEVELS["output"], args)

    def warning(self, *args: Any) -> None:
        self._log(LEVELS["warning"], args)

    warn = warning

    def error(self, *args: Any) -> None:
        self._log(LEVELS["error"], args)

    def critical(self, *args: Any) -> None:
        self._log(LEVELS["critical"], args)


lg = MininetLogger()
setLogLevel = lg.setLogLevel
debug, info, output = lg.debug, lg.info, lg.output
warning = warn = lg.warning
error, critical = lg.error, lg.critical

_said: set[str] = set()


def note_once(key: str, text: str) -> None:
    """A one-line note about a Mininet feature netloop treats differently,
    shown once per run whatever the log level (it changes what a script
    measures)."""
    if key not in _said:
        _said.add(key)
        sys.stderr.write(f"*** netloop: {text}\n")
        sys.stderr.flush()
