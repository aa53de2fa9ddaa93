"""Runs the co-simulation example: a HELICS broker, the grid and controller
federates of federates.py, and netloop as the federate that moves their
messages across the simulated WAN of wan.toml. Prints, per measurement, when
it was sent, when the controller got it and when the grid got the answer.

    python examples/cosim/run.py [--outage] [--realtime] [--tcp] [--netloop PATH]

--outage takes the WAN's second hop down from 450 to 650 ms: the
measurements sent then never arrive (over UDP) or arrive late (--tcp: the
endpoints, and the real control program, use TCP, which sends again what
the outage took). --realtime runs realtime.toml instead:
netloop on the wall clock (HELICS real-time mode) and, instead of the
controller federate, a real control program (controller.py, plain UDP)
in a network namespace; it needs root. Needs the `helics` package in this
Python (pip install "./crates/netloop-py[cosim]") and netloop on PATH (or
--netloop, or $NETLOOP). The broker listens on a free port of 127.0.0.1, so
the example runs beside other federations.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT = 90

OUTAGE = """
[[event]]
at = "450ms"
link = "r1-control"
action = "down"
[[event]]
at = "650ms"
link = "r1-control"
action = "up"
"""


def over_tcp(topology: str, realtime: bool = False) -> str:
    """`topology` with its endpoints on TCP (and, in real time, the control
    program too)."""
    text = topology.replace("[[endpoint]]\n", '[[endpoint]]\nprotocol = "tcp"\n')
    if realtime:
        text = text.replace("controller.py 5000", "controller.py 5000 --tcp")
        text = text.replace('ready = "udp:5000"', 'ready = "tcp:5000"')
    return text


def free_port(span: int = 64) -> int:
    """A port for a HELICS broker on this machine: it and the `span` ports
    after it (where the broker places its federates' cores: its port + 5
    and on, two a core) free on loopback now, and below the kernel's
    ephemeral range, which hands ports to any program's outgoing
    connections at any moment (a core that found its port so taken failed
    a CI run: "Unable to bind zmq pull socket")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10_000, max(10_001, low - span))
        if all(_bindable(p) for p in range(port, port + span)):
            return port
    raise RuntimeError(f"no {span} free ports in a row below {low} on 127.0.0.1")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_path() -> Path:
    import helics  # the wheel ships its broker

    return Path(helics.__file__).parent / "install" / "bin" / "helics_broker"


def run_federation(*a, **kw) -> dict:
    """run_federation_once, started again on another port (up to three
    times) when the broker could not be reached or a core could not bind
    the port the broker gave it: another program on the machine had it."""
    for attempt in range(3):
        try:
            return run_federation_once(*a, **kw)
        except RuntimeError as e:
            if attempt == 2 or not any(s in str(e) for s in ("Unable to connect to broker", "Unable to bind")):
                raise


def run_federation_once(topology_text: str, workdir: Path, netloop: str, count: int = 10,
                        roles: tuple[str, ...] = ("grid", "controller"), start: float = 0.0,
                        end: float = 2.0, script: Path | None = None, args: list[str] | None = None) -> dict:
    """Runs the broker, the federates `roles` and netloop on `topology_text`
    (its [helics] pointed at a broker on a free port); returns what each
    federate received (message, HELICS time) and netloop's results. netloop
    runs in the repository (the real-time topology's command names
    examples/cosim/controller.py from there). `script` and `args` run
    other federates (`python SCRIPT ROLE PORT *ARGS`) than federates.py's."""
    port = free_port()
    text = topology_text.replace('timeout = "20s"', f'timeout = "20s"\ninit = "--brokerport={port}"', 1)
    topo = workdir / "wan.toml"
    topo.write_text(text)
    procs = []
    try:
        broker = subprocess.Popen(
            [str(broker_path()), f"--federates={len(roles) + 1}", "--coretype=zmq", f"--port={port}",
             # Global time coordination: HELICS 3.6's distributed one can
             # hang a federation in which a federate asks for a far time and
             # waits for messages to wake it, as the controllers here do
             # (GMLC-TDC/HELICS#2574; 1 run in 2 of grid.toml hung here).
             "--globaltime", "--loglevel=warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        procs.append(broker)
        feds = {}
        for role in roles:
            argv = [str(count), str(start), str(end)] if args is None else list(args)
            p = subprocess.Popen(
                [sys.executable, str(script or HERE / "federates.py"), role, str(port), *argv],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            procs.append(p)
            feds[role] = p
        out = workdir / "results.json"
        # netloop finds libhelics in this Python's `helics` package.
        env = dict(os.environ, VIRTUAL_ENV=sys.prefix)
        nl = subprocess.run(
            [netloop, "run", str(topo), "--json", str(out), "-q"],
            capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=HERE.parent.parent,
        )
        if nl.returncode != 0:
            raise RuntimeError(f"netloop failed ({nl.returncode}):\n{nl.stderr}")
        got = {}
        for role, p in feds.items():
            stdout, stderr = p.communicate(timeout=TIMEOUT)
            if p.returncode != 0:
                raise RuntimeError(f"the {role} federate failed:\n{stderr}")
            got[role] = json.loads(stdout)
            if script is None:  # federates.py: (message, time) pairs
                got[role] = [tuple(m) for m in got[role]]
        broker.wait(timeout=TIMEOUT)
        return {"got": got, "results": json.loads(out.read_text())}
    finally:
        # Only what this function started, by its own handle.
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outage", action="store_true", help="take the WAN's second hop down from 450 to 650 ms")
    ap.add_argument("--realtime", action="store_true",
                    help="real time, with a real control program in a namespace (root)")
    ap.add_argument("--tcp", action="store_true", help="TCP endpoints (reliable) instead of UDP")
    ap.add_argument("--netloop", default=os.environ.get("NETLOOP", "netloop"), help="the netloop binary")
    args = ap.parse_args()
    outage = OUTAGE.replace("450ms", "1450ms").replace("650ms", "1650ms") if args.realtime else OUTAGE
    text = (HERE / ("realtime.toml" if args.realtime else "wan.toml")).read_text() + (outage if args.outage else "")
    end = 2.0
    if args.tcp:
        # Time for what an outage took to be sent again.
        text = over_tcp(text, args.realtime)
        text = (text.replace('duration = "4s"', 'duration = "6s"') if args.realtime
                else text.replace('duration = "2s"', 'duration = "4s"'))
        end = 4.0
    # In real time the grid starts at 1 s, once the control program runs.
    start = 1.0 if args.realtime else 0.0
    with tempfile.TemporaryDirectory(prefix="netloop-cosim-") as d:
        if args.realtime:
            r = run_federation(text, Path(d), args.netloop, roles=("grid",), start=start, end=start + end)
        else:
            r = run_federation(text, Path(d), args.netloop, end=end)
    at_ctrl = {m: t for m, t in r["got"].get("controller", [])}
    at_grid = {m[3:]: t for m, t in r["got"]["grid"]}
    print(f"{'message':>8} {'sent s':>8} {'at controller s':>16} {'answer at grid s':>17} {'round trip ms':>14}")
    for k in range(10):
        m = f"m{k}"
        sent = start + k * 0.1
        g = at_grid.get(m)
        # A real controller has no HELICS clock: only the round trip shows.
        c = at_ctrl.get(m) if not args.realtime else ("-" if g is not None else None)
        print(
            f"{m:>8} {sent:>8.3f} {c if c is not None else 'lost':>16} {g if g is not None else 'lost':>17} "
            f"{(g - sent) * 1e3 if g is not None else float('nan'):>14.4f}"
        )
    res = r["results"]
    c = res["cosim"]
    print(
        f"netloop: {c['grants']} grants, {c['from_federation']} messages in, {c['to_federation']} out; "
        f"dropped in the network: {res['conservation']['dropped'] or 'none'}; "
        f"unaccounted frames: {res['conservation']['unaccounted']}"
    )
    if args.realtime:
        rt = res["realtime"]
        print(
            f"real time: kept up {'yes' if rt['kept_up'] else 'NO'}; messages entered the network "
            f"{c.get('intake_lag_p50_ns', 0) / 1e6:.3f} ms (median) after their HELICS time and waited "
            f"{c.get('handoff_wait_p50_ns', 0) / 1e6:.3f} ms (median) to be handed back"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
