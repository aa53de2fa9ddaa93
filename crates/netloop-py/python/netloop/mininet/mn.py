"""``netloop mn``: Mininet's ``mn`` command on netloop.

``--topo minimal|single,N|linear,K[,N]|reversed,N|tree,D[,F]`` (or a
``--custom`` file's ``topos``), ``--link default|tc[,bw=…,delay=…,…]``,
``--test cli|build|pingall|pingpair|iperf|iperfudp|all|none`` (``cli``, the
prompt, by default), ``-c`` to clean up, ``-i/--ipbase``, ``--arp``,
``-v/--verbosity``; ``--switch``, ``--controller``, ``--mac`` and other
OpenFlow/OVS options are accepted and have no effect (noted once). Unlike
``mn``, a test that loses packets or fails makes the exit status 1."""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from typing import Any, Callable

from .._native import NetloopError
from . import install
from .cli import CLI
from .clean import cleanup
from .link import Link, TCLink, TCULink
from .log import LEVELS, error, info, note_once, output, setLogLevel
from .net import DEFAULT_IP_BASE, Mininet
from .topo import LinearTopo, MinimalTopo, SingleSwitchReversedTopo, SingleSwitchTopo
from .topolib import TreeTopo

TOPOS: dict[str, Callable[..., Any]] = {
    "minimal": MinimalTopo,
    "single": SingleSwitchTopo,
    "linear": LinearTopo,
    "reversed": SingleSwitchReversedTopo,
    "tree": TreeTopo,
}
LINKS: dict[str, Callable[..., Any]] = {"default": Link, "tc": TCLink, "tcu": TCULink, "ovs": Link}
TESTS = ("cli", "build", "pingall", "pingpair", "iperf", "iperfudp", "all", "none")


def _number(s: str) -> Any:
    for kind in (int, float):
        try:
            return kind(s)
        except ValueError:
            pass
    return s


def split_args(spec: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``'tree,2,fanout=3'`` as ``('tree', [2], {'fanout': 3})``, numbers
    made numbers (Mininet's splitArgs)."""
    name, *rest = spec.split(",")
    args, kwargs = [], {}
    for item in rest:
        if "=" in item:
            k, v = item.split("=", 1)
            kwargs[k] = _number(v)
        else:
            args.append(_number(item))
    return name, args, kwargs


def _build(choices: dict[str, Callable[..., Any]], spec: str, what: str) -> Callable[[], Any]:
    name, args, kwargs = split_args(spec)
    if name not in choices:
        raise SystemExit(f"netloop mn: unknown {what} {name!r} in --{what} {spec!r}; one of {', '.join(choices)}")
    cls = choices[name]
    return lambda: cls(*args, **kwargs)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="netloop mn", description="Mininet's mn command on netloop: builds a "
                                "Mininet network, runs a test or the prompt, and tears it down.")
    p.add_argument("--topo", default="minimal", help="minimal, single,N, linear,K[,N], reversed,N, tree,D[,F] "
                   "(or a name from --custom)")
    p.add_argument("--link", default="default", help="default (no shaping) or tc[,bw=Mbit/s,delay=..,loss=%%,"
                   "jitter=..,max_queue_size=N]")
    p.add_argument("--test", default=None, action="append", dest="tests", help=", ".join(TESTS))
    p.add_argument("-c", "--clean", action="store_true", help="remove what earlier runs left behind, and exit")
    p.add_argument("--custom", action="append", default=[], help="a Python file adding to topos (and tests)")
    p.add_argument("-i", "--ipbase", default=DEFAULT_IP_BASE, help="the hosts' network (default %(default)s)")
    p.add_argument("--arp", action="store_true", help="fill every host's neighbour table in advance")
    p.add_argument("-v", "--verbosity", default="info", choices=list(LEVELS))
    for flag in ("--switch", "--controller", "--host", "--listenport"):
        p.add_argument(flag, default=None, help="accepted for mn's sake; no effect in netloop")
    for flag in ("--mac", "--nolistenport", "--innamespace", "--pin", "--nat", "-x", "--xterms", "--wait", "-w"):
        p.add_argument(flag, action="store_true", default=False, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    setLogLevel(opts.verbosity)
    if opts.clean:
        cleanup()
        return 0
    install()
    tests: dict[str, Callable[..., Any]] = {}
    for path in opts.custom:
        found = runpy.run_path(path)
        TOPOS.update(found.get("topos", {}))
        LINKS.update(found.get("links", {}))
        tests.update(found.get("tests", {}))
    for flag in ("switch", "controller", "host"):
        if getattr(opts, flag):
            note_once(flag, f"--{flag} {getattr(opts, flag)} has no effect: netloop's own {flag}s are used")
    if opts.mac:
        note_once("mac", "--mac ignored: netloop assigns every interface's MAC itself")
    chosen = opts.tests or ["cli"]
    for t in chosen:
        if t not in TESTS and t not in tests:
            error(f"netloop mn: unknown test {t!r}; one of {', '.join(TESTS + tuple(tests))}\n")
            return 2
    topo = _build(TOPOS, opts.topo, "topo")()
    link_name, link_args, link_kwargs = split_args(opts.link)
    if link_name not in LINKS:
        error(f"netloop mn: unknown link {link_name!r} in --link {opts.link!r}; one of {', '.join(LINKS)}\n")
        return 2

    def link(*a: Any, **kw: Any) -> Any:
        return LINKS[link_name](*a, **{**link_kwargs, **kw})

    start = time.time()
    info("*** Creating network\n")
    try:
        net = Mininet(topo=topo, link=link, ipBase=opts.ipbase, autoStaticArp=opts.arp)
    except NetloopError as e:
        error(f"netloop mn: {e}\n")
        return 1
    failed = False
    try:
        net.start()
        for t in chosen:
            if t in tests:
                tests[t](net)
            elif t == "cli":
                CLI(net)
            elif t in ("pingall", "all") and net.pingAll() > 0:
                failed = True
            elif t == "pingpair" and net.pingPair() > 0:
                failed = True
            elif t in ("iperf", "all"):
                failed |= not all(net.iperf())
            elif t == "iperfudp":
                failed |= not all(net.iperf(l4Type="UDP"))
    except NetloopError as e:
        error(f"netloop mn: {e}\n")
        failed = True
    finally:
        net.stop()
    output(f"completed in {time.time() - start:0.3f} seconds\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
