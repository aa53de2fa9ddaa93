"""How the WAN changes a grid's frequency control: grid.toml's federation
(a grid, its AGC, netloop between them) run as it is, with 250 ms more WAN
delay, with 30 % loss on the WAN, and with the WAN down from 1 s (when the
load steps up) to 4 s. Prints, per scenario, the frequency nadir, the
integral of the absolute frequency deviation, the setpoints that reached
the grid and what the network dropped.

    python examples/cosim/grid_study.py [--realtime] [--json OUT] [--netloop PATH]

Simulated time: deterministic, a few seconds per scenario. With --realtime,
grid_rt.toml instead: netloop on the wall clock and the AGC a real program
(agc.py, plain UDP) in a network namespace, so about 15 s per scenario, as
root. Needs the `helics` package in this Python and netloop on PATH (or
--netloop, or $NETLOOP).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import run_federation  # noqa: E402

SCENARIOS = {
    "as is": "",
    "+250 ms delay": '\n[[event]]\nat = "0s"\nlink = "wan"\naction = "set"\ndelay = "270ms"\n',
    "30 % loss": '\n[[event]]\nat = "0s"\nlink = "wan"\naction = "set"\nloss = 0.3\n',
    "outage 1-4 s": '\n[[event]]\nat = "1s"\nlink = "wan"\naction = "down"\n'
    '[[event]]\nat = "4s"\nlink = "wan"\naction = "up"\n',
}


def study(netloop: str, end: float = 10.0, realtime: bool = False,
          scenarios: tuple[str, ...] = tuple(SCENARIOS)) -> dict[str, dict]:
    """Runs `scenarios`; returns the grid's figures and netloop's drops
    (and, in real time, whether the run kept up)."""
    base = (HERE / ("grid_rt.toml" if realtime else "grid.toml")).read_text()
    out = {}
    for name in scenarios:
        with tempfile.TemporaryDirectory(prefix="netloop-grid-") as d:
            # In real time the AGC is the real program in the namespace:
            # only the grid is a federate.
            r = run_federation(base + SCENARIOS[name], Path(d), netloop, script=HERE / "grid.py",
                               roles=("grid",) if realtime else ("grid", "agc"), args=[str(end)])
        res = r["results"]
        grid = json.loads(json.dumps(r["got"]["grid"]))
        out[name] = {**grid, "dropped": res["conservation"]["dropped"],
                     "unaccounted": res["conservation"]["unaccounted"]}
        if realtime:
            out[name]["kept_up"] = res["realtime"]["kept_up"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--realtime", action="store_true",
                    help="real time, with the AGC a real program in a namespace (root)")
    ap.add_argument("--json", help="write every scenario's figures and traces here")
    ap.add_argument("--netloop", default=os.environ.get("NETLOOP", "netloop"), help="the netloop binary")
    args = ap.parse_args()
    out = study(args.netloop, realtime=args.realtime)
    print(f"{'scenario':<16} {'nadir Hz':>9} {'|Δf| integral Hz·s':>19} {'setpoints':>10}  dropped in the network")
    for name, g in out.items():
        drops = ", ".join(f"{k} {v}" for k, v in sorted(g["dropped"].items())) or "none"
        kept = "" if "kept_up" not in g else ("; kept up" if g["kept_up"] else "; FELL BEHIND real time")
        print(f"{name:<16} {g['nadir_hz']:>9.4f} {g['iae_hz_s']:>19.4f} {g['setpoints']:>10}  {drops}{kept}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
