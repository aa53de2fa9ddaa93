"""Mininet's utilities that test scripts use: ``irange``, ``quietRun``,
``dumpNodeConnections``, ``custom``, ``waitListening``, ``pmonitor`` and the
address helpers."""

from __future__ import annotations

import functools
import ipaddress
import re
import select
import subprocess
import time
from typing import Any, Iterable, Iterator

from .log import output


def irange(start: int, end: int) -> range:
    """The integers from ``start`` to ``end``, both included."""
    return range(start, end + 1)


def natural(text: Any) -> list[Any]:
    """A sort key that orders ``h2`` before ``h10``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(text))]


def naturalSeq(t: Iterable[Any]) -> list[list[Any]]:  # noqa: N802 - Mininet's name
    return [natural(x) for x in t]


def quietRun(cmd: str | list[str], **kwargs: Any) -> str:  # noqa: N802
    """Runs a command on this machine (not in a host) and returns its
    output, standard error included."""
    argv = cmd.split() if isinstance(cmd, str) and not kwargs.get("shell") else cmd
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                       shell=bool(kwargs.get("shell")))
    return p.stdout


def errRun(*cmd: Any, **kwargs: Any) -> tuple[str, str, int]:  # noqa: N802
    """Runs a command on this machine: (stdout, stderr, exit status)."""
    argv = list(cmd[0]) if len(cmd) == 1 and isinstance(cmd[0], list) else " ".join(map(str, cmd)).split()
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    return p.stdout, p.stderr, p.returncode


def custom(cls: Any, **params: Any) -> Any:
    """``cls`` with ``params`` given in advance (``custom(TCLink, bw=10)``)."""
    made = functools.partial(cls, **params)
    made.__name__ = getattr(cls, "__name__", "custom")  # type: ignore[attr-defined]
    return made


def dumpNodeConnections(nodes: Iterable[Any]) -> None:  # noqa: N802
    """Each node's interfaces and what they connect to, as Mininet prints them."""
    for node in nodes:
        output(node.name)
        for intf in node.intfList():
            output(" ")
            if intf.link:
                other = intf.link.intf2 if intf is intf.link.intf1 else intf.link.intf1
                output(f"{intf.name}:{other.name}")
            else:
                output(f"{intf.name}: ")
        output("\n")


def dumpNetConnections(net: Any) -> None:  # noqa: N802
    dumpNodeConnections(net.controllers + net.switches + net.hosts)


def dumpPorts(switches: Iterable[Any]) -> None:  # noqa: N802
    for switch in switches:
        output(f"{switch.name} ")
        for intf in switch.intfList():
            output(f"{intf.name}:{switch.ports[intf]} ")
        output("\n")


def waitListening(client: Any = None, server: Any = "127.0.0.1", port: int = 80,
                  timeout: float | None = None) -> bool:  # noqa: N802
    """Waits until ``server`` (a host, or an address seen from ``client``)
    listens on TCP ``port``; false after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if getattr(server, "_real", None) is not None:
            # Beside the host's shell, which may be running the server.
            found = server._real.run(["ss", "-Hltn", f"sport = :{int(port)}"], timeout=10)
            listening = bool(found.stdout.strip())
        else:
            probe = f"bash -c 'exec 3<>/dev/tcp/{server}/{int(port)}' 2>/dev/null && echo open"
            runner = client if client is not None else None
            out = runner.cmd(probe) if runner is not None else quietRun(probe, shell=True)
            listening = "open" in out
        if listening:
            return True
        if deadline is not None and time.monotonic() > deadline:
            output(f"waitListening: {server} is not listening on port {port} after {timeout} s\n")
            return False
        time.sleep(0.1)


def pmonitor(popens: dict[Any, subprocess.Popen[Any]], timeoutms: int = 500, readline: bool = True,
             readmax: int = 1024) -> Iterator[tuple[Any, str]]:
    """Yields (host, line) as the programs ``popens`` (by host) write, then
    (None, '') while nothing comes within ``timeoutms``, until all ended."""
    fd_to_host = {p.stdout.fileno(): h for h, p in popens.items() if p.stdout is not None}
    poller = select.poll()
    for fd in fd_to_host:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    while popens and fd_to_host:
        events = poller.poll(timeoutms)
        if not events:
            yield None, ""
            continue
        for fd, event in events:
            host = fd_to_host[fd]
            p = popens[host]
            if event & select.POLLIN:
                line = p.stdout.readline() if readline else p.stdout.read(readmax)  # type: ignore[union-attr]
                yield host, line if isinstance(line, str) else line.decode(errors="replace")
            elif event & select.POLLHUP:
                poller.unregister(fd)
                del fd_to_host[fd]
                del popens[host]


# Address helpers (Mininet's ipAdd/ipParse/netParse/ipStr).
def ipStr(ip: int) -> str:  # noqa: N802
    return str(ipaddress.IPv4Address(ip))


def ipNum(w: int, x: int, y: int, z: int) -> int:  # noqa: N802
    return (w << 24) | (x << 16) | (y << 8) | z


def ipParse(ip: str) -> int:  # noqa: N802
    return int(ipaddress.IPv4Address(ip))


def ipAdd(i: int, prefixLen: int = 8, ipBaseNum: int = 0x0A000000) -> str:  # noqa: N802, N803
    """The ``i``-th address of the network ``ipBaseNum``/``prefixLen``."""
    imax = 0xFFFFFFFF >> prefixLen
    if i > imax:
        raise ValueError(f"address {i} does not fit a /{prefixLen}")
    mask = 0xFFFFFFFF ^ imax
    return ipStr((ipBaseNum & mask) + i)


def netParse(ipstr: str) -> tuple[int, int]:  # noqa: N802
    """``'198.18.0.0/15'`` as (the address as a number, the prefix length)."""
    net = ipaddress.IPv4Interface(ipstr if "/" in ipstr else ipstr + "/24")
    return int(net.ip), net.network.prefixlen


def macColonHex(mac: int) -> str:  # noqa: N802
    return ":".join(f"{(mac >> s) & 0xFF:02x}" for s in range(40, -1, -8))
