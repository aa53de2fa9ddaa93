"""``python -m netloop.mininet SCRIPT.py [ARGS…]``: runs a Mininet script
on netloop, its ``mininet.*`` imports resolved to ``netloop.mininet``."""

from __future__ import annotations

import runpy
import sys

from . import install


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m netloop.mininet SCRIPT.py [ARGS...]\n"
              "Runs a Mininet script on netloop (its `mininet` imports are netloop.mininet's);\n"
              "`netloop mn` mirrors Mininet's `mn` command.", file=sys.stderr)
        return 0 if args else 2
    install()
    sys.argv = list(args)
    try:
        runpy.run_path(args[0], run_name="__main__")
    except FileNotFoundError as e:
        if e.filename == args[0]:
            print(f"netloop.mininet: cannot open the script {args[0]!r}: {e.strerror}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
