"""Mininet's ``Topo``: a graph of named hosts, switches and links with their
options, and the bundled topologies (``SingleSwitchTopo``, ``LinearTopo``,
``MinimalTopo``, ``SingleSwitchReversedTopo``). ``Mininet(topo=…)`` turns it
into nodes and links; ports are numbered as Mininet numbers them (hosts from
0, switches from 1)."""

from __future__ import annotations

from typing import Any

from .util import irange, natural


class Topo:
    """A topology to build: subclass it and add nodes and links in
    ``build``, or call ``addHost``/``addSwitch``/``addLink`` on it."""

    def __init__(self, *args: Any, **params: Any) -> None:
        self._nodes: dict[str, dict[str, Any]] = {}
        self._links: list[tuple[str, str, dict[str, Any]]] = []
        self.hopts = params.pop("hopts", {})
        self.sopts = params.pop("sopts", {})
        self.lopts = params.pop("lopts", {})
        self.ports: dict[str, dict[int, tuple[str, int]]] = {}
        self.build(*args, **params)

    def build(self, *args: Any, **params: Any) -> None:
        """Adds the topology's nodes and links (subclasses override it)."""

    def addNode(self, name: str, **opts: Any) -> str:  # noqa: N802 - Mininet's names
        if name in self._nodes:
            raise ValueError(f"addNode({name!r}): a node named {name!r} exists already")
        self._nodes[name] = dict(opts)
        return name

    def addHost(self, name: str, **opts: Any) -> str:  # noqa: N802
        return self.addNode(name, **(opts or dict(self.hopts)))

    def addSwitch(self, name: str, **opts: Any) -> str:  # noqa: N802
        return self.addNode(name, isSwitch=True, **(opts or dict(self.sopts)))

    def addLink(self, node1: str, node2: str, port1: int | None = None, port2: int | None = None,
                key: Any = None, **opts: Any) -> str:  # noqa: N802
        for n in (node1, node2):
            if n not in self._nodes:
                raise ValueError(f"addLink({node1!r}, {node2!r}): {n!r} is not a node of this topology")
        opts = dict(opts or self.lopts)
        port1, port2 = self.addPort(node1, node2, port1, port2)
        opts.update(node1=node1, node2=node2, port1=port1, port2=port2)
        self._links.append((node1, node2, opts))
        return key if key is not None else f"{node1}-{node2}"

    def addPort(self, src: str, dst: str, sport: int | None = None,
                dport: int | None = None) -> tuple[int, int]:  # noqa: N802
        """The ports a new link takes at each end: the next free ones
        (a switch's from 1) unless given."""
        self.ports.setdefault(src, {})
        self.ports.setdefault(dst, {})
        if sport is None:
            sport = len(self.ports[src]) + (1 if self.isSwitch(src) else 0)
        if dport is None:
            dport = len(self.ports[dst]) + (1 if self.isSwitch(dst) else 0)
        self.ports[src][sport] = (dst, dport)
        self.ports[dst][dport] = (src, sport)
        return sport, dport

    def isSwitch(self, n: str) -> bool:  # noqa: N802
        return bool(self._nodes.get(n, {}).get("isSwitch", False))

    def nodes(self, sort: bool = True) -> list[str]:
        names = list(self._nodes)
        return sorted(names, key=natural) if sort else names

    def switches(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if self.isSwitch(n)]

    def hosts(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if not self.isSwitch(n)]

    def links(self, sort: bool = False, withKeys: bool = False, withInfo: bool = False) -> list[Any]:  # noqa: N803
        out: list[Any] = []
        for i, (a, b, info) in enumerate(self._links):
            item: tuple[Any, ...] = (a, b)
            if withKeys:
                item += (i,)
            if withInfo:
                item += (info,)
            out.append(item)
        return sorted(out, key=lambda t: (natural(t[0]), natural(t[1]))) if sort else out

    def iterLinks(self, withKeys: bool = False, withInfo: bool = False) -> list[Any]:  # noqa: N802, N803
        return self.links(False, withKeys, withInfo)

    def port(self, src: str, dst: str) -> tuple[int, int]:
        for sport, (peer, dport) in sorted(self.ports.get(src, {}).items()):
            if peer == dst:
                return sport, dport
        raise KeyError(f"no link between {src!r} and {dst!r}")

    def nodeInfo(self, name: str) -> dict[str, Any]:  # noqa: N802
        return self._nodes[name]

    def setNodeInfo(self, name: str, info: dict[str, Any]) -> None:  # noqa: N802
        self._nodes[name] = dict(info)

    def linkInfo(self, src: str, dst: str, key: Any = None) -> dict[str, Any]:  # noqa: N802
        for a, b, info in self._links:
            if {a, b} == {src, dst}:
                return info
        raise KeyError(f"no link between {src!r} and {dst!r}")


class SingleSwitchTopo(Topo):
    """One switch ``s1`` and ``k`` hosts ``h1``…``hk``."""

    def build(self, k: int = 2, **_opts: Any) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in irange(1, k):
            self.addLink(self.addHost(f"h{h}"), switch)


class SingleSwitchReversedTopo(Topo):
    """``SingleSwitchTopo`` with the switch's ports in the reverse order."""

    def build(self, k: int = 2) -> None:
        self.k = k
        switch = self.addSwitch("s1")
        for h in irange(1, k):
            self.addLink(self.addHost(f"h{h}"), switch, port1=0, port2=(k - h + 1))


class MinimalTopo(SingleSwitchTopo):
    """Two hosts on one switch."""

    def build(self) -> None:  # type: ignore[override]
        SingleSwitchTopo.build(self, k=2)


class LinearTopo(Topo):
    """``k`` switches in a line, ``n`` hosts on each (``h1``… if ``n`` is 1,
    else ``h<j>s<i>``)."""

    def build(self, k: int = 2, n: int = 1, **_opts: Any) -> None:
        self.k, self.n = k, n
        last = None
        for i in irange(1, k):
            switch = self.addSwitch(f"s{i}")
            for j in irange(1, n):
                self.addLink(self.addHost(f"h{i}" if n == 1 else f"h{j}s{i}"), switch)
            if last:
                self.addLink(switch, last)
            last = switch
