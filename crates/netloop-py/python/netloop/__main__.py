"""The ``netloop`` command, as ``pip install`` puts it on the PATH (and as
``python -m netloop``): the same command line as the binary ``cargo build``
makes, run by the native module.

    netloop run examples/dumbbell.toml --json out.json
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    # What netloop runs of itself (the demo's programs on real hosts,
    # mpirun's ranks) it runs as this Python with `-m netloop`.
    os.environ["NETLOOP_PYTHON"] = sys.executable
    # Ctrl-C as for the binary: the commands that stop cleanly on it set
    # their own handler; the rest end at once (Python's handler would only
    # note it while the command runs with the interpreter's lock let go).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from ._native import cli

    sys.exit(cli(["netloop", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
