"""Hostile traffic from real hosts (issue 6): the model survives what a real
program can put on a wire, and counts every frame it refuses where it
refuses it.

A real host is a network namespace: anything in it can write any bytes to
its interface with an AF_PACKET socket, and netloop has to take whatever
comes. Here ``inject.py`` does exactly that, inside real hosts of

    h1 (real, veth) --+
    h3 (real, TAP) ---+-- s1 (switch) -- r1 (router) -- h2 (real)
    a, b (simulated) -+

(h3 and b only where a test needs them) with: 802.1Q/802.1ad-tagged and
IPv6 frames, broken IPv4 headers at a simulated host, frames just over and
far over the link MTU (jumbo frames), TTL 0 and 1 towards h2, IPv4 options
(forwarded, and copied into fragments when r1 fragments), fragments out of
order, overlapping and never completed (to the real h2 and to a simulated
host), ARP floods with invented addresses against r1's neighbour table,
spoofed gratuitous ARP, and a broadcast storm through the switch.

For each kind the tests check:

- that the run survives: it is still running afterwards, a ping from h1 to
  h2 still works, and it ends by request with no interface faults;
- where each frame died: drops by reason at the node (r1's ``stats.drops``;
  simulated hosts and switches, which have no per-node drop counters, as the
  rest of ``conservation.dropped``) or link direction, compared as whole
  maps, so that a frame dropped anywhere else fails the test too. Once a
  frame is inside the model its fate is deterministic, so counts are exact;
- what came back: ICMP errors at h1 (read with a raw socket), packets and
  datagrams at h2 (read with an AF_PACKET socket and a UDP socket);
- packet conservation: created = delivered + dropped + in flight, nothing
  unaccounted, at every step and at the end.

``crates/netloop-cli/tests/realtime.rs`` (section 7) already sends malformed
IPv4/ARP headers, unknown EtherTypes and one over-MTU frame straight at a
router from a TAP host; nothing here repeats that. Only netloop's own
addresses (198.18.0.0/15) are used. Needs root (network namespaces): skipped
without it, failed instead under ``NETLOOP_REQUIRE_REAL=1``.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

import netloop

HERE = Path(__file__).resolve().parent
INJECT = HERE / "inject.py"
sys.path.insert(0, str(HERE))
import inject as w  # noqa: E402  (the frame builders)

#: The switched segment's subnet: a /18, so that thousands of invented
#: neighbours can all be "on link" for r1.
SEGMENT = "198.19.0.0/18"
#: r1's neighbour-table bound (``ArpConfig::default().max_entries``).
ARP_MAX_ENTRIES = 4096
#: A MAC address nobody has (locally administered).
NOBODY = bytes.fromhex("02dead00be01")
#: The UDP port h2 listens on.
PORT = 9


# ----- snapshots and what changed between two of them ------------------------


class Snap:
    """Results and self-report of the run at one moment."""

    def __init__(self, raw: dict[str, Any], realtime: dict[str, Any]):
        self.raw, self.rt = raw, realtime

    def node(self, name: str) -> dict[str, Any]:
        return next(n["stats"] for n in self.raw["nodes"] if n["name"] == name)

    def link(self, name: str) -> dict[str, Any]:
        return next(l for l in self.raw["links"] if l["name"] == name)

    def rx(self, host: str) -> int:
        """Frames netloop read from a real host's interface."""
        return sum(p["rx_frames"] for p in self.rt["ports"] if p["host"] == host)

    def drops(self) -> dict[str, Counter]:
        """Drops by place: each router by name, each link direction as
        ``link:a_to_b``; simulated hosts and switches (which keep no drop
        counters of their own) together as ``elsewhere``."""
        out: dict[str, Counter] = {}
        rest = Counter(self.raw["conservation"]["dropped"])
        for n in self.raw["nodes"]:
            if n["kind"] == "router":
                out[n["name"]] = Counter(n["stats"]["drops"])
                rest -= out[n["name"]]
        for l in self.raw["links"]:
            for d in ("a_to_b", "b_to_a"):
                out[f"{l['name']}:{d}"] = Counter(l[d]["drops"])
                rest -= out[f"{l['name']}:{d}"]
        out["elsewhere"] = rest
        return out


def value(stats: dict[str, Any], path: str) -> int:
    for k in path.split("."):
        stats = stats.get(k, 0) if isinstance(stats, dict) else 0
    return int(stats or 0)


class Delta:
    """What one injection changed."""

    def __init__(self, out: dict[str, Any], before: Snap, after: Snap):
        self.out, self.before, self.after = out, before, after

    def drops(self) -> dict[str, dict[str, int]]:
        """Drops by place (see :meth:`Snap.drops`), only places and reasons
        that changed."""
        a, b = self.before.drops(), self.after.drops()
        d = {k: dict(b[k] - a.get(k, Counter())) for k in b}
        return {k: v for k, v in d.items() if v}

    def node(self, name: str, path: str) -> int:
        return value(self.after.node(name), path) - value(self.before.node(name), path)

    def link(self, name: str, path: str) -> int:
        return value(self.after.link(name), path) - value(self.before.link(name), path)

    def delivered(self, sink: str) -> int:
        c = "conservation.delivered." + sink
        return value(self.after.raw, c) - value(self.before.raw, c)

    def created(self, origin: str) -> int:
        c = "conservation.created." + origin
        return value(self.after.raw, c) - value(self.before.raw, c)

    @property
    def icmp(self) -> list[tuple[int, int, str]]:
        return [(m["type"], m["code"], m["src"]) for m in self.out["icmp"]]


def assert_conserved(raw: dict[str, Any]) -> None:
    c = raw["conservation"]
    assert c["created_total"] == sum(c["created"].values()), c
    assert c["delivered_total"] == sum(c["delivered"].values()), c
    assert c["dropped_total"] == sum(c["dropped"].values()), c
    assert c["in_flight_total"] == sum(c["in_flight"].values()), c
    assert c["created_total"] == c["delivered_total"] + c["dropped_total"] + c["in_flight_total"], c
    assert c["unaccounted"] == 0, c


# ----- the network -------------------------------------------------------------


class Lab:
    """h1 (veth) and optionally h3 (TAP) and b on switch s1 with simulated
    host a; s1 - r1 - h2. Links are unlimited in rate (nothing queues unless
    a test slows a link down) with 1 ms of delay."""

    def __init__(self, net: netloop.Network, *, tap: bool = False, b: bool = False, h2_mtu: int | None = None):
        self.net = net
        self.h1 = net.add_real_host("h1")
        self.h2 = net.add_real_host("h2")
        self.h3 = net.add_real_host("h3", via="tap") if tap else None
        self.a = net.add_host("a")
        self.b = net.add_host("b") if b else None
        s1, r1 = net.add_switch("s1"), net.add_router("r1")
        net.add_link(self.h1, s1, delay="1ms", subnet=SEGMENT)
        if self.h3:
            net.add_link(self.h3, s1, delay="1ms")
        net.add_link(self.a, s1, delay="1ms")
        if self.b:
            net.add_link(self.b, s1, delay="1ms")
        net.add_link(s1, r1, delay="1ms")
        net.add_link(r1, self.h2, delay="1ms", **({"mtu": h2_mtu} if h2_mtu else {}))
        self.mac: dict[str, bytes] = {}
        self.ip: dict[str, str] = {}
        for n in net.info()["nodes"]:
            for i in n["interfaces"]:
                key = n["name"] if n["kind"] != "router" else f"r1@{i['link']}"
                self.mac[key] = w.mac(i["mac"])
                if i["address"]:
                    self.ip[key] = i["address"].split("/")[0]
        # r1 as seen from the switch, and from h2.
        self.mac["r1"], self.ip["r1"] = self.mac["r1@s1-r1"], self.ip["r1@s1-r1"]

    def ip4(self, name: str) -> bytes:
        return w.ip4(self.ip[name])

    def start(self) -> None:
        self.net.start()
        # s1 learns r1 and a, r1 learns h1 and h2, a learns h1.
        assert self.ping(self.h1, self.ip["h2"], count=1)
        assert self.ping(self.h1, self.ip["a"], count=1)

    def ping(self, src: netloop.Host, dst: str, count: int = 2, wait: float = 2) -> bool:
        """Whether every echo request got its reply (``wait`` s for the last)."""
        p = src.run(["ping", "-n", "-c", str(count), "-i", "0.2", "-W", str(wait), dst], timeout=30)
        return p.returncode == 0 and f"{count} received" in p.stdout

    def snap(self) -> Snap:
        s = self.net.stats()
        assert s.realtime["end"] == "running", s.realtime
        assert_conserved(s.results.raw)
        return Snap(s.results.raw, s.realtime)

    def send(
        self, host: netloop.Host, frames: list[bytes] | tuple[bytes, int], *, listen: float = 0,
        expect_icmp: int | None = None, mtu: int | None = None, pps: float | None = None,
    ) -> dict[str, Any]:
        """Runs ``inject.py send`` in ``host``: the frames (or one frame and
        a count) out of its eth0; ICMP that comes back within ``listen`` s."""
        args = [sys.executable, str(INJECT), "send", "eth0"]
        if listen:
            args += ["--listen", str(listen)]
        if expect_icmp is not None:
            args += ["--expect-icmp", str(expect_icmp)]
        if mtu:
            args += ["--mtu", str(mtu)]
        if pps:
            args += ["--pps", str(pps)]
        spec = {"repeat": [frames[0].hex(), frames[1]]} if isinstance(frames, tuple) else {"frames": [f.hex() for f in frames]}
        p = host.run(args, input=json.dumps(spec), timeout=120)
        assert p.returncode == 0, p.stdout
        return json.loads(p.stdout.strip().splitlines()[-1])

    def settle(self, before: Snap, host: str, frames: int, timeout: float = 20.0, held: int = 0) -> Snap:
        """Waits until netloop has read ``frames`` more frames from ``host``
        and nothing is left inside the model (queues, wires, ARP) but
        ``held`` frames (fragments waiting for the rest of a datagram)."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.snap()
            if s.rx(host) - before.rx(host) >= frames and s.raw["conservation"]["in_flight_total"] == held:
                # And once more: a reaction (an ICMP error, an ARP reply) may
                # still have been on its way out of a node.
                time.sleep(0.05)
                s2 = self.snap()
                if s2.raw["conservation"]["in_flight_total"] == held:
                    return s2
            assert time.monotonic() < deadline, (
                f"{host}: {s.rx(host) - before.rx(host)} of {frames} frames read, "
                f"in flight {s.raw['conservation']['in_flight']}"
            )
            time.sleep(0.02)

    def inject(
        self, host: netloop.Host, frames: list[bytes] | tuple[bytes, int], *, enter: int | None = None, held: int = 0, **kw: Any
    ) -> Delta:
        """Sends frames from ``host`` and waits for the model to be done with
        them (``enter``: how many should reach netloop, all sent by default;
        ``held``: how many stay in it, waiting for the rest of a datagram)."""
        before = self.snap()
        out = self.send(host, frames, **kw)
        after = self.settle(before, host.name, out["sent"] if enter is None else enter, held=held)
        return Delta(out, before, after)

    def survives(self) -> None:
        assert self.net.running
        assert self.ping(self.h1, self.ip["h2"]), "ping h1 -> h2 failed after the hostile traffic"

    def stop(self) -> netloop.Results:
        r = self.net.stop()
        assert r.end_reason == "control", r.realtime
        assert_conserved(r.raw)
        for p in r.realtime["ports"]:
            assert p["faults"] == 0, p
            assert p["rx_truncated"] == 0 and p["rx_malformed"] == 0, p
        return r

    @staticmethod
    def capture(host: netloop.Host) -> "Capture":
        return Capture(host)


class Capture:
    """``inject.py capture`` in a host: what reaches its wire (IPv4/UDP
    frames, fragments included) and its UDP port ``PORT``."""

    def __init__(self, host: netloop.Host):
        self.p = host.popen([sys.executable, str(INJECT), "capture", "eth0", str(PORT)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout is not None and self.p.stdout.readline().strip() == "ready"

    def result(self) -> tuple[list[bytes], list[bytes]]:
        """Stops it: (frames, datagrams)."""
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.close()
        got = json.loads(self.p.stdout.read())
        self.p.wait(timeout=10)
        return [bytes.fromhex(f) for f in got["frames"]], [bytes.fromhex(d) for d in got["datagrams"]]


@pytest.fixture
def lab_factory(netloop_real_network: netloop.Network) -> Iterator[Any]:
    yield lambda **kw: Lab(netloop_real_network, **kw)


def ip_id(frame: bytes) -> int:
    return int.from_bytes(frame[18:20], "big")


def quoted_id(icmp: dict[str, Any]) -> int:
    """The IP identification of the packet an ICMP error quotes."""
    return int(icmp["quoted"][8:12], 16)


def quoted_udp(icmp: dict[str, Any]) -> tuple[str, str, int, bytes]:
    """Source, destination, destination port and the first data bytes of
    the UDP datagram an ICMP error quotes. (smoltcp's errors quote a header
    rebuilt without the original identification, so hosts' errors are
    matched by these instead.)"""
    q = bytes.fromhex(icmp["quoted"])
    hl = (q[0] & 0x0F) * 4
    assert q[9] == 17, q.hex()
    return socket.inet_ntoa(q[12:16]), socket.inet_ntoa(q[16:20]), int.from_bytes(q[hl + 2:hl + 4], "big"), q[hl + 8:hl + 12]


# ----- 1. what the model doesn't speak, broken headers, oversized frames -------


def test_tags_ipv6_broken_headers_and_oversized_frames(lab_factory: Any) -> None:
    lab = lab_factory(tap=True)
    R1, A, H1, H3, BC = lab.mac["r1"], lab.mac["a"], lab.mac["h1"], lab.mac["h3"], w.BROADCAST
    h1ip, h2ip, aip = lab.ip4("h1"), lab.ip4("h2"), lab.ip4("a")

    def udp_to(dst: bytes, n: int = 18, src: bytes = h1ip, **kw: Any) -> bytes:
        return w.ipv4(src, dst, 17, w.udp(src, dst, 5000, PORT, bytes(n)), **kw)

    lab.start()

    # 802.1Q and 802.1ad: the switch forwards and floods tagged frames like
    # any other; r1 and a drop them as unsupported. A tagged frame with a
    # full 1500-byte payload is 1518 bytes: within the link's MTU.
    d = lab.inject(lab.h1, [
        w.vlan(R1, H1, 5, 0x0800, udp_to(h2ip)),
        w.vlan(R1, H1, 5, 0x0800, udp_to(h2ip), tpid=w.ETH_P_8021AD),
        w.vlan(A, H1, 5, 0x0800, udp_to(aip)),
        w.vlan(BC, H1, 5, 0x0806, w.arp(1, H1, h1ip, bytes(6), lab.ip4("r1"))),
        w.vlan(R1, H1, 5, 0x0800, udp_to(h2ip, 1500 - 28)),
    ])
    assert d.out["sent"] == 5 and not d.out["errors"], d.out
    assert d.drops() == {"r1": {"unsupported": 4}, "elsewhere": {"unsupported": 2}}
    assert d.node("s1", "flooded") == 1 and d.created("switch_flood") == 2
    assert d.delivered("external") == 1, "the tagged broadcast reaches h3"
    assert d.node("r1", "forwarded") == 0

    # IPv6: unicast to r1 and a, to the all-nodes multicast MAC, broadcast.
    v6 = w.ipv6(bytes.fromhex("fe80" + "00" * 13 + "01"), bytes.fromhex("ff02" + "00" * 13 + "01"), 59, b"")
    d = lab.inject(lab.h1, [
        w.eth(R1, H1, w.ETH_P_IPV6, v6),
        w.eth(A, H1, w.ETH_P_IPV6, v6),
        w.eth(bytes.fromhex("333300000001"), H1, w.ETH_P_IPV6, v6),
        w.eth(BC, H1, w.ETH_P_IPV6, v6),
    ])
    # r1 drops a frame to a multicast MAC as not_for_us (it joins no group)
    # before looking at its EtherType; a host counts it as unsupported.
    assert d.drops() == {"r1": {"unsupported": 2, "not_for_us": 1}, "elsewhere": {"unsupported": 3}}
    assert d.delivered("external") == 2

    # Broken IPv4 headers at a simulated host (smoltcp's side of the model),
    # then a good datagram, answered with port-unreachable.
    good = w.ipv4(h1ip, aip, 17, w.udp(h1ip, aip, 5000, PORT, b"good"))
    d = lab.inject(lab.h1, [
        w.eth(A, H1, 0x0800, udp_to(aip, version=6)),     # a valid checksum, but not IPv4
        w.eth(A, H1, 0x0800, udp_to(aip, good_csum=False)),
        w.eth(A, H1, 0x0800, udp_to(aip, total=600)),     # total length beyond the frame
        w.eth(A, H1, 0x0800, udp_to(aip, total=10)),      # total length below the header
        w.eth(A, H1, 0x0800, udp_to(aip, ihl=4)),
        w.eth(A, H1, 0x0800, udp_to(aip, ihl=15)),        # header beyond the frame
        w.eth(A, H1, 0x0800, udp_to(aip)[:12]),           # cut inside the header
        w.eth(A, H1, 0x0800, good),
    ], listen=3, expect_icmp=1)
    assert d.drops() == {"elsewhere": {"malformed": 6, "bad_checksum": 1}}
    assert d.node("a", "frames_received") == 8 and d.node("a", "to_stack") == 1
    assert d.icmp == [(3, 3, lab.ip["a"])], d.out["icmp"]
    assert quoted_udp(d.out["icmp"][0]) == (lab.ip["h1"], lab.ip["a"], PORT, b"good")

    # Over the MTU. Frames from a veth host can be at most 1518 bytes (the
    # root end's MTU plus a tag's worth); raise h1's MTU to let them out.
    d = lab.inject(lab.h1, [w.eth(R1, H1, 0x0800, udp_to(h2ip, 1504 - 28))], mtu=9000)
    assert d.out["sent"] == 1, d.out
    assert d.drops() == {"h1-s1:a_to_b": {"mtu_exceeded": 1}}
    # A 9000-byte jumbo frame never leaves h1's veth pair: the kernel refuses
    # it (the peer's MTU is the link's), so netloop never sees it.
    d = lab.inject(lab.h1, [w.eth(R1, H1, 0x0800, udp_to(h2ip, 9000 - 14 - 28))], enter=0)
    time.sleep(0.2)
    d = Delta(d.out, d.before, lab.snap())
    assert d.out["sent"] + sum(d.out["errors"].values()) == 1
    assert d.link("h1-s1", "a_to_b.offered_packets") == 0 and d.drops() == {}
    # A TAP carries anything: jumbo frames reach the link, which drops them,
    # as it drops a tagged frame one byte over and an untagged one a tag over.
    d = lab.inject(lab.h3, [
        w.eth(R1, H3, 0x0800, udp_to(h2ip, 9000 - 14 - 28, src=lab.ip4("h3"))),
        w.eth(BC, H3, 0x0800, udp_to(h2ip, 9000 - 14 - 28, src=lab.ip4("h3"))),
        w.vlan(R1, H3, 5, 0x0800, udp_to(h2ip, 1501 - 28)),
        w.eth(R1, H3, 0x0800, udp_to(h2ip, 1501 - 28, src=lab.ip4("h3"))),
        w.eth(A, H3, 0x0800, udp_to(aip, 1500 - 28, src=lab.ip4("h3"))),   # just fits
    ], mtu=9000)
    assert d.out["sent"] == 5, d.out
    assert d.drops() == {"h3-s1:a_to_b": {"mtu_exceeded": 4}}
    assert d.node("r1", "forwarded") == 0 and d.node("a", "to_stack") == 1

    lab.survives()
    lab.stop()


# ----- 2. TTL expiry and IP options through the router --------------------------


def udp(lab: Lab, dst: str, n: int = 18, *, tag: int, **kw: Any) -> bytes:
    """A UDP datagram from h1 to ``dst`` (a node name) whose payload is ``n``
    bytes of ``tag`` and whose IP identification is ``tag``."""
    s, d = lab.ip4("h1"), lab.ip4(dst)
    return w.ipv4(s, d, 17, w.udp(s, d, 5000, PORT, bytes([tag & 0xFF]) * n), ident=tag, **kw)


def test_ttl_expiry_and_ip_options_through_the_router(lab_factory: Any) -> None:
    lab = lab_factory(h2_mtu=1280)
    R1, H1 = lab.mac["r1"], lab.mac["h1"]
    lab.start()
    cap = lab.capture(lab.h2)

    # TTL 0 and 1 are not forwarded and are answered with time-exceeded from
    # the address r1 received them on; TTL 2 goes through. A TTL of 1 to r1
    # itself is no reason to drop (port-unreachable instead). No error about
    # an ICMP error or a later fragment (suppressed), nor about a link-layer
    # broadcast, which is not forwarded in the first place.
    h1ip, h2ip = lab.ip4("h1"), lab.ip4("h2")
    icmp_error = w.ipv4(h1ip, h2ip, 1, bytes([3, 1, 0, 0, 0, 0, 0, 0]) + udp(lab, "h1", tag=1)[:28], ttl=1, ident=0x104)
    d = lab.inject(lab.h1, [
        w.eth(R1, H1, 0x0800, udp(lab, "h2", tag=0x100, ttl=0)),
        w.eth(R1, H1, 0x0800, udp(lab, "h2", tag=0x101, ttl=1)),
        w.eth(R1, H1, 0x0800, udp(lab, "h2", tag=0x102, ttl=2)),
        w.eth(R1, H1, 0x0800, udp(lab, "r1", tag=0x103, ttl=1)),
        w.eth(R1, H1, 0x0800, icmp_error),
        w.eth(R1, H1, 0x0800, w.ipv4(h1ip, h2ip, 17, bytes(16), ttl=1, ident=0x105, offset=8)),
        w.eth(w.BROADCAST, H1, 0x0800, udp(lab, "h2", tag=0x106, ttl=1)),
    ], listen=3, expect_icmp=3)
    assert d.drops() == {"r1": {"ttl_expired": 4, "not_for_us": 1}, "elsewhere": {"not_for_us": 1}}
    assert d.node("r1", "icmp_sent.time_exceeded") == 2
    assert d.node("r1", "icmp_sent.port_unreachable") == 1
    assert d.node("r1", "icmp_suppressed") == 2
    assert (d.node("r1", "forwarded"), d.node("r1", "local")) == (1, 1)
    got = sorted((quoted_id(m), m["type"], m["code"], m["src"]) for m in d.out["icmp"])
    assert got == [(0x100, 11, 0, lab.ip["r1"]), (0x101, 11, 0, lab.ip["r1"]), (0x103, 3, 3, lab.ip["r1"])], got
    # Time-exceeded quotes the header as it arrived (TTL 0 and 1).
    assert sorted(bytes.fromhex(m["quoted"])[8] for m in d.out["icmp"] if m["type"] == 11) == [0, 1]

    # Options (an experimental option with the "copied" flag, a NOP, EOL)
    # are forwarded untouched. When r1 fragments for the 1280-byte link to
    # h2, the first fragment keeps every option and the second only the
    # copied one, padded; with DF set, fragmentation-needed says 1280.
    opts = bytes([0x9E, 6]) + b"NLOP" + bytes([1, 0])
    d = lab.inject(lab.h1, [
        w.eth(R1, H1, 0x0800, udp(lab, "h2", 100, tag=0x200, options=opts)),
        w.eth(R1, H1, 0x0800, udp(lab, "h2", 1400, tag=0x201, options=opts)),
        w.eth(R1, H1, 0x0800, udp(lab, "h2", 1400, tag=0x202, options=opts, df=True)),
    ], listen=3, expect_icmp=1)
    assert d.drops() == {"r1": {"fragmentation_needed": 1}}
    assert (d.node("r1", "forwarded"), d.node("r1", "fragmented"), d.node("r1", "fragments_created")) == (2, 1, 1)
    assert d.created("fragment") == 1
    assert [(m["type"], m["code"], m["rest"], quoted_id(m)) for m in d.out["icmp"]] == [(3, 4, "00000500", 0x202)]

    lab.survives()
    frames, datagrams = cap.result()
    by_id: dict[int, list[bytes]] = {}
    for f in frames:
        by_id.setdefault(ip_id(f), []).append(f[14:])
    assert set(by_id) >= {0x102, 0x200, 0x201} and not set(by_id) & {0x100, 0x101, 0x104, 0x105, 0x106, 0x202}, sorted(by_id)
    (ttl2,) = by_id[0x102]
    assert ttl2[8] == 1, "TTL 2 arrives with 1"
    (with_opts,) = by_id[0x200]
    sent = udp(lab, "h2", 100, tag=0x200, options=opts)
    assert with_opts[:8] == sent[:8] and with_opts[9:10] == sent[9:10] and with_opts[12:] == sent[12:], "only TTL and checksum change"
    assert with_opts[8] == 63 and w.csum(with_opts[:28]) == 0
    first, second = sorted(by_id[0x201], key=lambda p: int.from_bytes(p[6:8], "big") & 0x1FFF)
    assert first[0] == 0x47 and first[20:28] == opts and first[6] & 0x20, first[:28].hex()
    assert second[0] == 0x47 and second[20:28] == opts[:6] + bytes(2) and not second[6] & 0x20, second[:28].hex()
    assert w.csum(first[:28]) == 0 and w.csum(second[:28]) == 0
    # The application got each datagram whole (h2 reassembled the fragments).
    payloads = Counter((len(x), x[0]) for x in datagrams)
    assert payloads == Counter({(18, 0x02): 1, (100, 0x00): 1, (1400, 0x01): 1}), payloads
    lab.stop()


# ----- 3. fragments: out of order, overlapping, never complete -------------------


def test_fragments_out_of_order_overlapping_and_incomplete(lab_factory: Any) -> None:
    lab = lab_factory()
    R1, A, H1 = lab.mac["r1"], lab.mac["a"], lab.mac["h1"]
    h1ip, aip = lab.ip4("h1"), lab.ip4("a")
    lab.start()
    cap = lab.capture(lab.h2)

    # To the real h2 through r1: r1 forwards fragments as they come (it
    # never reassembles), so h2 sees them in the order sent; h2's kernel
    # reassembles the out-of-order datagram for the application.
    ooo = udp(lab, "h2", 1000, tag=0x300)
    overlap = udp(lab, "h2", 1000, tag=0x301)
    pieces = w.fragments(ooo, [(800, 1008), (400, 800), (0, 400)]) + w.fragments(overlap, [(0, 600), (400, 1008)])
    d = lab.inject(lab.h1, [w.eth(R1, H1, 0x0800, f) for f in pieces])
    assert d.drops() == {}
    assert d.node("r1", "forwarded") == 5 and d.node("r1", "fragmented") == 0

    # To a simulated host: its IP layer reassembles out-of-order pieces (an
    # echo request in two and in three, which it answers itself, and a UDP
    # datagram to a closed port, which smoltcp answers).
    def echo(ident: int, n: int = 1024) -> bytes:
        data = bytes((ident + i) & 0xFF for i in range(n))
        return w.ipv4(h1ip, aip, 1, w.icmp_echo(ident, 1, data), ident=ident)

    legit = (
        w.fragments(echo(0x400), [(512, 1032), (0, 512)])
        + w.fragments(echo(0x401), [(1024, 1032), (0, 512), (512, 1024)])
        + w.fragments(udp(lab, "a", 600, tag=0x402), [(304, 608), (0, 304)])
    )
    d = lab.inject(lab.h1, [w.eth(A, H1, 0x0800, f) for f in legit], listen=3, expect_icmp=3)
    assert d.drops() == {}
    assert d.node("a", "reassembled") == 3 and d.delivered("host") == 7
    assert d.node("a", "to_stack") == 1 and d.node("a", "echo_replies") == 2
    replies = {(m["type"], m["code"]): m for m in d.out["icmp"] if m["src"] == lab.ip["a"]}
    assert sorted(replies) == [(0, 0), (3, 3)] and len(d.out["icmp"]) == 3, d.out["icmp"]
    echoes = sorted(bytes.fromhex(m["rest"] + m["quoted"]) for m in d.out["icmp"] if m["type"] == 0)
    assert echoes == sorted(echo(i)[24:] for i in (0x400, 0x401)), "echo replies carry the reassembled data"
    assert quoted_udp(replies[(3, 3)]) == (lab.ip["h1"], lab.ip["a"], PORT, bytes([0x02]) * 4)

    # Hostile pieces: an overlap whose bytes differ, a "ping of death"
    # (its last fragment ends beyond 65535 bytes), 25 pieces with holes
    # between them, a first piece alone. As on Linux, the overlap and the
    # ping of death drop their whole datagrams (2 pieces each, counted as
    # reassembly_invalid); the 26 others are held, waiting for what never
    # comes (in flight, until 30 s give them up); nothing is answered.
    differ = bytearray(echo(0x403))
    differ[520:580] = b"\xaa" * 60
    hostile = (
        w.fragments(echo(0x403), [(0, 600)])
        + w.fragments(bytes(differ), [(400, 1032)])
        + w.fragments(echo(0x404, 1400), [(0, 1000)])
        + [w.ipv4(h1ip, aip, 1, bytes(100), ident=0x404, offset=65528)]
        + [w.ipv4(h1ip, aip, 1, bytes(8), ident=0x405, offset=o, mf=True) for o in range(0, 400, 16)]
        + w.fragments(echo(0x406), [(0, 512)])
    )
    d = lab.inject(lab.h1, [w.eth(A, H1, 0x0800, f) for f in hostile], listen=1, held=26)
    assert d.out["sent"] == len(hostile) == 30
    assert d.drops() == {"elsewhere": {"reassembly_invalid": 4}}
    assert d.node("a", "to_stack") == 0 and d.delivered("host") == 0
    assert d.out["icmp"] == [], d.out["icmp"]
    assert lab.ping(lab.h1, lab.ip["a"]), "a's stack still answers (unfragmented) pings"

    lab.survives()
    frames, datagrams = cap.result()
    seen = [(ip_id(f), (int.from_bytes(f[20:22], "big") & 0x1FFF) * 8) for f in frames if ip_id(f) in (0x300, 0x301)]
    assert seen == [(0x300, 800), (0x300, 400), (0x300, 0), (0x301, 0), (0x301, 400)], seen
    assert bytes([0x00]) * 1000 in datagrams, "h2's application got the out-of-order datagram whole"
    lab.stop()


# ----- 4. ARP floods and spoofed ARP -----------------------------------------------


def test_arp_floods_fill_the_neighbour_table_to_its_bound_and_spoofing_stays_local(lab_factory: Any) -> None:
    lab = lab_factory(b=True)
    R1, H1, BC = lab.mac["r1"], lab.mac["h1"], w.BROADCAST
    r1ip = lab.ip4("r1")
    rng = random.Random(6)
    # Invented neighbours: distinct addresses of the segment's /18 beyond its
    # first /24 (where the real nodes are), each with a random unicast MAC.
    invented = iter(rng.sample(range(256, 16383), 12000))

    def someone() -> tuple[bytes, bytes]:
        i = next(invented)
        return bytes([rng.randrange(256) & 0xFE | 0x02]) + rng.randbytes(5), w.ip4(f"198.19.{i >> 8}.{i & 255}")

    def request(target: bytes, sender: tuple[bytes, bytes] | None = None) -> bytes:
        m, ip = sender or someone()
        return w.eth(BC, m, w.ETH_P_ARP, w.arp(1, m, ip, bytes(6), target))

    lab.start()  # r1 knows h1 and h2: 2 neighbour entries

    # 1. ARP that must not add entries: requests for other addresses
    # (overheard), requests for r1 from outside its subnet (answered, not
    # learned), replies to r1 claiming a multicast MAC.
    junk = [request(someone()[1]) for _ in range(600)]
    junk += [request(r1ip, (someone()[0], w.ip4(f"198.18.200.{k % 250 + 1}"))) for k in range(200)]
    for k in range(100):
        m, ip = bytes([0x01, 0x00, 0x5E, 0, k >> 8, k & 255]), someone()[1]
        junk.append(w.eth(R1, H1, w.ETH_P_ARP, w.arp(2, m, ip, R1, r1ip)))
    d = lab.inject(lab.h1, junk, pps=20000)
    assert d.drops() == {}
    assert d.node("r1", "received") == 900 and d.delivered("router") == 900
    assert d.node("r1", "arp_replies_sent") == 200

    # 2. Requests for r1 from 4093 invented neighbours: learned, answered.
    # With h1 and h2 that is 4095 entries, one short of the bound.
    d = lab.inject(lab.h1, [request(r1ip) for _ in range(ARP_MAX_ENTRIES - 3)], pps=20000)
    assert d.drops() == {}
    assert d.node("r1", "received") == d.node("r1", "arp_replies_sent") == ARP_MAX_ENTRIES - 3

    # 3. A neighbour r1 never met still gets the last entry: so nothing in
    # step 1 took one, and the table holds at least 4096.
    before = lab.snap()
    assert lab.ping(lab.h2, lab.ip["a"])
    d = Delta({}, before, lab.snap())
    assert d.node("r1", "arp_requests_sent") == 1 and d.drops() == {}

    # 4. More of the same (requests, and unsolicited replies to r1) once the
    # table is full: answered, never learned, nothing dropped.
    flood = [request(r1ip) for _ in range(1000)]
    for _ in range(500):
        m, ip = someone()
        flood.append(w.eth(R1, m, w.ETH_P_ARP, w.arp(2, m, ip, R1, r1ip)))
    d = lab.inject(lab.h1, flood, pps=20000)
    assert d.drops() == {}
    assert d.node("r1", "arp_replies_sent") == 1000 and d.delivered("router") == 1500

    # 5. The table is full of live entries (none expires for 60 s): r1 can't
    # resolve b, and drops what it would send there as arp_queue_full,
    # without even asking. So the bound is exactly 4096. Known neighbours
    # are unaffected.
    before = lab.snap()
    assert not lab.ping(lab.h2, lab.ip["b"], wait=1)
    d = Delta({}, before, lab.snap())
    assert d.drops() == {"r1": {"arp_queue_full": 2}}
    assert d.node("r1", "arp_requests_sent") == 0
    assert lab.ping(lab.h2, lab.ip["a"]) and lab.ping(lab.h1, lab.ip["h2"])

    # 6. Spoofing. Gratuitous ARP claiming h2's address is ignored by r1 (h2
    # is not on that side; believing it would cut h1 off h2). Claiming r1's
    # address: r1 ignores it, but a, which knows r1, believes it (RFC 826:
    # update what you have), as a real host would, and its answers to h2 go
    # to the spoofed MAC. Nothing is dropped: the switch hands them to h1.
    # Claiming r1's address with r1's real MAC puts things right again.
    h2ip = lab.ip4("h2")
    d = lab.inject(lab.h1, [
        w.eth(BC, NOBODY, w.ETH_P_ARP, w.arp(1, NOBODY, h2ip, bytes(6), h2ip)),
        w.eth(BC, NOBODY, w.ETH_P_ARP, w.arp(2, NOBODY, h2ip, BC, h2ip)),
        w.eth(R1, NOBODY, w.ETH_P_ARP, w.arp(2, NOBODY, h2ip, R1, r1ip)),
        w.eth(BC, NOBODY, w.ETH_P_ARP, w.arp(1, NOBODY, r1ip, bytes(6), r1ip)),
    ])
    assert d.drops() == {}
    assert lab.ping(lab.h1, lab.ip["h2"])
    before = lab.snap()
    assert not lab.ping(lab.h2, lab.ip["a"], wait=1)
    d = Delta({}, before, lab.snap())
    assert d.drops() == {} and d.node("r1", "forwarded") == 2, "requests reach a; its replies go astray"
    d = lab.inject(lab.h1, [w.eth(BC, H1, w.ETH_P_ARP, w.arp(2, R1, r1ip, BC, r1ip))])
    assert d.drops() == {}
    assert lab.ping(lab.h2, lab.ip["a"])

    lab.survives()
    lab.stop()


# ----- 5. a broadcast storm ------------------------------------------------------


def test_broadcast_storm_fills_the_switchs_queues_and_the_network_recovers(lab_factory: Any) -> None:
    lab = lab_factory()
    net = lab.net
    lab.start()
    # The switch's ports towards r1 and a slowed to 2 Mbit/s (about 3000
    # minimum-size frames a second): a storm from h1 can't fit.
    net.link("s1-r1").set(rate="2Mbps", direction="a_to_b")
    net.link("a-s1").set(rate="2Mbps", direction="b_to_a")
    storm = w.eth(w.BROADCAST, lab.mac["h1"], 0x88B5, bytes(46))
    before = lab.snap()
    out = lab.send(lab.h1, (storm, 20000))
    # What netloop read of it settles once the queues drained.
    last, deadline = -1, time.monotonic() + 30
    while True:
        after = lab.snap()
        if after.raw["conservation"]["in_flight_total"] == 0 and after.rx("h1") == last:
            break
        assert time.monotonic() < deadline, after.raw["conservation"]["in_flight"]
        last = after.rx("h1")
        time.sleep(0.2)
    d = Delta(out, before, after)
    came = d.link("h1-s1", "a_to_b.received_packets")
    assert came == after.rx("h1") - before.rx("h1") <= out["sent"], (came, out)
    assert came > 3000, f"only {came} of {out['sent']} storm frames reached netloop"
    # The switch flooded every one to both other ports; each slowed port
    # sent what it could and dropped the rest as queue_full with its queue
    # full (1000 frames); r1 and a dropped what reached them as unsupported.
    assert d.node("s1", "flooded") == came and d.created("switch_flood") == came
    to_r1, to_a = {}, {}
    for port, (link, direction) in (("r1", ("s1-r1", "a_to_b")), ("a", ("a-s1", "b_to_a"))):
        c = {k: d.link(link, f"{direction}.{k}") for k in ("offered_packets", "sent_packets", "received_packets")}
        c["queue_full"] = d.link(link, f"{direction}.drops.queue_full")
        assert c["offered_packets"] == came, c
        assert c["offered_packets"] == c["sent_packets"] + c["queue_full"] and c["sent_packets"] == c["received_packets"], c
        assert c["queue_full"] > 0 and after.link(link)[direction]["queue_high_water_packets"] == 1000, c
        (to_r1 if port == "r1" else to_a).update(c)
    assert d.drops() == {
        "r1": {"unsupported": to_r1["received_packets"]},
        "elsewhere": {"unsupported": to_a["received_packets"]},
        "s1-r1:a_to_b": {"queue_full": to_r1["queue_full"]},
        "a-s1:b_to_a": {"queue_full": to_a["queue_full"]},
    }
    assert d.node("r1", "forwarded") == 0 and d.link("r1-h2", "a_to_b.offered_packets") == 0

    lab.survives()
    assert lab.ping(lab.h1, lab.ip["a"])
    r = lab.stop()
    print(
        f"storm: {out['sent']} sent in {out['seconds']} s ({out['errors'] or 'no errors'}), {came} reached the model; "
        f"to r1 {to_r1['sent_packets']} sent / {to_r1['queue_full']} queue_full; to a {to_a['sent_packets']} / {to_a['queue_full']}; "
        f"boundary_lost {r.boundary_lost}, kept_up {r.kept_up}"
    )
