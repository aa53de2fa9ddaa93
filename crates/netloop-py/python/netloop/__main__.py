"""The ``netloop`` command, as ``pip install`` puts it on the PATH (and as
``python -m netloop``): the same command line as the binary ``cargo build``
makes, run by the native module.

    netloop run examples/dumbbell.toml --json out.json
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    # What netloop runs of itself (the demo's programs on real hosts,
    # mpirun's ranks) it runs as this Python with `-m netloop`.
    os.environ["NETLOOP_PYTHON"] = sys.executable
    from ._native import cli

    sys.exit(cli(["netloop", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
