"""Mininet's links and interfaces on netloop.

A ``Link`` between two nodes is a netloop link; its interfaces keep
Mininet's names (``h1-eth0``, ``s1-eth1``), which are the interface names
inside the hosts' namespaces too. ``TCLink``/``TCIntf`` parameters shape the
direction that leaves the interface, as Mininet's ``tc`` does on that
interface's egress, but in the simulation:

- ``bw`` (Mbit/s) is the direction's line rate (netloop counts Ethernet's
  framing on the wire: a 1 500-byte packet takes 1 538 bytes of time);
- ``delay`` and ``jitter`` are exact (jitter never reorders packets, where
  netem's does); a bare number is microseconds, as ``tc`` reads it;
- ``loss`` is a percentage (``loss=1`` is 1 %);
- ``max_queue_size`` is the direction's queue in packets; ``enable_red`` and
  ``enable_ecn`` make it RED (with ECN marking).

``intf.config(...)`` and ``intf.ifconfig('down'|'up')`` change a running
link at once (a link goes down in both directions, as a veth does when
either end goes down). A plain ``Link`` does not shape, as in Mininet.
"""

from __future__ import annotations

from typing import Any

from .._native import NetloopError
from .log import info, note_once

#: TCIntf parameters netloop applies.
_TC_KEYS = ("bw", "delay", "jitter", "loss", "max_queue_size", "enable_red", "enable_ecn")
#: Mininet's tc options that have no meaning here (accepted, noted once).
_TC_IGNORED = ("speedup", "use_hfsc", "use_tbf", "latency_ms", "smooth_change", "use_htb", "r2q",
               "enable_ecn_only", "gro", "txo", "rxo")


class Intf:
    """An interface of a node, at one end of a link."""

    def __init__(self, name: str, node: Any = None, port: int | None = None, link: "Link | None" = None,
                 mac: str | None = None, **params: Any):
        self.name, self.node, self.link, self.mac = name, node, link, mac
        self.ip: str | None = None
        self.prefixLen: int | None = None
        self.params: dict[str, Any] = {}
        self._up = True
        if node is not None:
            node.addIntf(self, port=port)
        self.config(**params)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name

    # Before the network starts, configuration is recorded and handed to
    # netloop when it builds the network; afterwards it changes the link.
    def config(self, mac: str | None = None, ip: str | None = None, ifconfig: Any = None, up: bool = True,
               **params: Any) -> dict[str, Any]:
        if mac:
            note_once("mac", f"mac={mac!r} on {self.name} ignored: netloop assigns every interface's MAC itself")
        if ip:
            self.setIP(ip)
        self._take(params)
        return {}

    def _take(self, params: dict[str, Any]) -> None:
        shaped = {k: v for k, v in params.items() if k in _TC_KEYS and v is not None}
        if shaped:
            note_once(f"plain:{self.name}", f"{', '.join(shaped)} on {self.name} ignored: a plain Link does "
                      "not shape traffic (link=TCLink does), as in Mininet")
        self.params.update(params)

    def IP(self) -> str | None:  # noqa: N802 - Mininet's names
        return self.ip

    def MAC(self) -> str | None:  # noqa: N802
        if self.mac is None and self.node is not None and self.node.net is not None:
            self.mac = self.node.net._mac_of(self)
        return self.mac

    def setIP(self, ipstr: str, prefixLen: int | None = None) -> None:  # noqa: N802, N803
        if self.node is not None and self.node.net is not None and self.node.net._started:
            raise NetloopError(f"{self.name}.setIP({ipstr!r}): addresses are fixed while a netloop network runs "
                               "(give ip= when adding the host or link)")
        if "/" in ipstr:
            self.ip, plen = ipstr.split("/", 1)
            self.prefixLen = int(plen)
        else:
            self.ip, self.prefixLen = ipstr, prefixLen if prefixLen is not None else self.prefixLen

    def isUp(self, setUp: bool = False) -> bool:  # noqa: N802, N803
        if setUp:
            self.ifconfig("up")
        return self._up

    def ifconfig(self, *args: Any) -> str:
        """``'up'``/``'down'``: the link comes back or goes down (both ways);
        anything else runs ``ifconfig`` on the interface in its host."""
        words = [str(a) for a in args]
        if words in (["up"], ["down"]):
            if self.link is None:
                raise NetloopError(f"{self.name}.ifconfig({words[0]!r}): the interface has no link")
            self.link._set_status(words[0])
            return ""
        return self.node.cmd("ifconfig", self.name, *words)

    def rename(self, newname: str) -> str:
        if self.node is not None and self.node.net is not None and self.node.net._started:
            raise NetloopError(f"{self.name}.rename({newname!r}): interfaces are named before the network starts")
        if self.node is not None:
            self.node.nameToIntf.pop(self.name, None)
            self.node.nameToIntf[newname] = self
        self.name = newname
        return newname

    def status(self) -> str:
        return "OK" if self._up else "MISSING"

    def delete(self) -> None:
        """Netloop removes its interfaces with the network."""

    # ----- what netloop makes of it ---------------------------------------

    def _direction(self) -> dict[str, Any]:
        """The netloop parameters of the direction leaving this interface."""
        return {}


class TCIntf(Intf):
    """An interface whose egress is shaped: ``bw``, ``delay``, ``jitter``,
    ``loss``, ``max_queue_size``, ``enable_red``/``enable_ecn``."""

    def _take(self, params: dict[str, Any]) -> None:
        ignored = [k for k in params if k in _TC_IGNORED and params[k]]
        if ignored:
            note_once("tc-ignored", f"tc options {', '.join(ignored)} have no meaning in netloop (ignored)")
        new = {k: v for k, v in params.items() if k in _TC_KEYS}
        self.params.update(params)
        shown = _describe(new)
        if shown:
            info(f"({shown}) ")
        if new and self.link is not None and self.node is not None and self.node.net is not None \
                and self.node.net._started:
            self.link._change(self, new)

    def config(self, bw: Any = None, delay: Any = None, jitter: Any = None, loss: Any = None,  # type: ignore[override]
               max_queue_size: Any = None, enable_red: Any = None, enable_ecn: Any = None,
               **params: Any) -> dict[str, Any]:
        tc = {"bw": bw, "delay": delay, "jitter": jitter, "loss": loss, "max_queue_size": max_queue_size,
              "enable_red": enable_red, "enable_ecn": enable_ecn}
        return super().config(**{k: v for k, v in tc.items() if v is not None}, **params)

    def _direction(self) -> dict[str, Any]:
        return _netloop_params(self.name, self.params)


def _describe(p: dict[str, Any]) -> str:
    parts = []
    if p.get("bw") is not None:
        parts.append(f"{float(p['bw']):.2f}Mbit")
    if p.get("delay") is not None:
        parts.append(f"{p['delay']} delay")
    if p.get("jitter") is not None:
        parts.append(f"{p['jitter']} jitter")
    if p.get("loss") is not None:
        parts.append(f"{float(p['loss']):.5f}% loss")
    if p.get("max_queue_size") is not None:
        parts.append(f"{p['max_queue_size']} max queue")
    if p.get("enable_red"):
        parts.append("RED")
    if p.get("enable_ecn"):
        parts.append("ECN")
    return " ".join(parts)


def _time(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v}us"  # tc reads a bare number as microseconds
    return str(v)


def _netloop_params(intf: str, p: dict[str, Any]) -> dict[str, Any]:
    """Mininet's tc parameters of one interface as netloop's for the
    direction leaving it; a value out of range names the interface."""
    out: dict[str, Any] = {}
    if p.get("bw") is not None:
        bw = p["bw"]
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) or bw <= 0:
            raise NetloopError(f"{intf}: bw={bw!r}: expected a positive number of Mbit/s (e.g. bw=10)")
        out["rate"] = f"{bw}Mbps"
    for key in ("delay", "jitter"):
        if p.get(key) is not None:
            out[key] = _time(p[key])
    if p.get("loss") is not None:
        loss = p["loss"]
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not 0 <= loss <= 100:
            raise NetloopError(f"{intf}: loss={loss!r}: expected a percentage from 0 to 100 (loss=1 is 1 %)")
        if loss > 0:
            out["loss"] = f"{loss}%"
    queue: dict[str, Any] = {}
    if p.get("max_queue_size") is not None:
        q = p["max_queue_size"]
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise NetloopError(f"{intf}: max_queue_size={q!r}: expected a number of packets, at least 1")
        queue["packets"] = q
    if p.get("enable_red") or p.get("enable_ecn"):
        queue["discipline"] = "red"
        if p.get("enable_ecn"):
            queue["ecn"] = True
    if queue:
        out["queue"] = queue
    return out


class Link:
    """A link between two nodes: a netloop link, its two interfaces named
    as in Mininet. ``params1``/``params2`` configure each end; other
    keywords both."""

    def __init__(self, node1: Any, node2: Any, port1: int | None = None, port2: int | None = None,
                 intfName1: str | None = None, intfName2: str | None = None,  # noqa: N803
                 addr1: str | None = None, addr2: str | None = None, intf: type = Intf,
                 cls1: type | None = None, cls2: type | None = None, params1: dict[str, Any] | None = None,
                 params2: dict[str, Any] | None = None, fast: bool = True, **params: Any):
        if node1 is node2:
            raise NetloopError(f"a link from {node1.name} to itself")
        p1, p2 = dict(params1 or {}), dict(params2 or {})
        for k, v in params.items():
            p1.setdefault(k, v)
            p2.setdefault(k, v)
        if port1 is None:
            port1 = node1.newPort()
        if port2 is None:
            port2 = node2.newPort()
        name1 = intfName1 or f"{node1.name}-eth{port1}"
        name2 = intfName2 or f"{node2.name}-eth{port2}"
        for n in (name1, name2):
            if len(n.encode()) > 15:
                raise NetloopError(f"interface name {n!r} is longer than Linux's 15 bytes (give intfName1/2)")
        self.intf1: Intf = (cls1 or intf)(name1, node=node1, port=port1, link=self, mac=addr1, **p1)
        self.intf2: Intf = (cls2 or intf)(name2, node=node2, port=port2, link=self, mac=addr2, **p2)
        self._net: Any = None
        self._name: str | None = None  # netloop's name of the link, when built

    def __str__(self) -> str:
        return f"{self.intf1}<->{self.intf2}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def intfs(self) -> tuple[Intf, Intf]:
        return self.intf1, self.intf2

    def status(self) -> str:
        return f"({self.intf1.status()} {self.intf2.status()})"

    def delete(self) -> None:
        """Netloop removes its links with the network."""

    stop = delete

    def _live(self) -> Any:
        if self._net is None or not self._net._started:
            return None
        return self._net._netloop.link(self._name)

    def _set_status(self, status: str) -> None:
        live = self._live()
        self.intf1._up = self.intf2._up = status == "up"
        if live is not None:
            (live.up if status == "up" else live.down)()

    def _change(self, intf: Intf, params: dict[str, Any]) -> None:
        """A running link's direction leaving ``intf`` takes ``params``."""
        live = self._live()
        if live is None:
            return
        changed = _netloop_params(intf.name, params)
        if "queue" in changed:
            raise NetloopError(f"{intf.name}.config(max_queue_size/enable_red/enable_ecn): a netloop queue is "
                               "fixed while the network runs (give it when adding the link)")
        if "loss" not in changed and params.get("loss") is not None:
            changed["loss"] = 0.0  # loss=0 clears a loss set before
        if changed:
            live.set(direction="a_to_b" if intf is self.intf1 else "b_to_a", **changed)


class TCLink(Link):
    """A link whose parameters (``bw``, ``delay``, ``jitter``, ``loss``,
    ``max_queue_size``…) shape both directions."""

    def __init__(self, node1: Any, node2: Any, port1: int | None = None, port2: int | None = None,
                 intfName1: str | None = None, intfName2: str | None = None,  # noqa: N803
                 addr1: str | None = None, addr2: str | None = None, **params: Any):
        super().__init__(node1, node2, port1=port1, port2=port2, intfName1=intfName1, intfName2=intfName2,
                         cls1=TCIntf, cls2=TCIntf, addr1=addr1, addr2=addr2, params1=params, params2=params)


class TCULink(TCLink):
    """Mininet's TCLink for user switches: the same here."""


OVSLink = Link
OVSIntf = Intf
