"""Hand-made frames for netloop's hostile-traffic tests (``test_hostile.py``).

Two halves:

- **Builders** (imported by the tests): Ethernet, 802.1Q, ARP, IPv4 (with
  any header length, options, fragment fields, TTL, a wrong checksum or
  total length), UDP, ICMP echo and IPv6 frames as ``bytes``, and RFC 791
  fragmentation at arbitrary offsets. Nothing here checks what it builds:
  building bad frames is the point.
- **A program** run inside a real host's network namespace (``ip netns exec
  NS python3 inject.py ...``):

  ``send IFACE [--listen S] [--expect-icmp N] [--mtu M] [--pps R]``
      reads ``{"frames": [hex, ...]}`` (or ``{"repeat": [hex, count]}``)
      from stdin and writes every frame, in order, to an AF_PACKET socket on
      IFACE (at most R frames a second if given, else as fast as it can). With ``--listen`` it opens a raw ICMP socket *before* sending
      and collects the ICMP messages that arrive for up to S seconds (or
      until N of them came). ``--mtu`` first raises IFACE's MTU so that the
      kernel lets larger frames out. Prints one JSON object: frames sent,
      send errors by errno name, the ICMP messages (type, code, source and
      the quoted bytes in hex).

  ``capture IFACE UDP_PORT``
      binds a UDP socket to UDP_PORT (what an application gets, after the
      kernel's reassembly) and an AF_PACKET socket to IFACE (every incoming
      IPv4/UDP frame as it came off the wire, fragments included), prints
      ``ready`` and collects until stdin is closed; then prints one JSON
      object with both lists in hex.

Only the Python standard library is used, so any ``python3`` will do.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
ETH_P_IPV6 = 0x86DD
BROADCAST = b"\xff" * 6
PACKET_OUTGOING = 4


# ----- builders ---------------------------------------------------------------


def mac(text: str) -> bytes:
    """``02-00-00-05-00-00`` or ``02:00:...`` as 6 bytes."""
    b = bytes.fromhex(text.replace("-", "").replace(":", ""))
    assert len(b) == 6, text
    return b


def ip4(text: str) -> bytes:
    return socket.inet_aton(text)


def csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def eth(dst: bytes, src: bytes, ethertype: int, payload: bytes) -> bytes:
    return dst + src + struct.pack("!H", ethertype) + payload


def vlan(dst: bytes, src: bytes, vid: int, ethertype: int, payload: bytes, tpid: int = ETH_P_8021Q) -> bytes:
    """An 802.1Q (or, with ``tpid=0x88a8``, 802.1ad) tagged frame."""
    return dst + src + struct.pack("!HHH", tpid, vid & 0x0FFF, ethertype) + payload


def arp(op: int, sha: bytes, spa: bytes, tha: bytes, tpa: bytes) -> bytes:
    """An Ethernet/IPv4 ARP packet (op 1 request, 2 reply)."""
    return struct.pack("!HHBBH", 1, ETH_P_IP, 6, 4, op) + sha + spa + tha + tpa


def ipv4(
    src: bytes,
    dst: bytes,
    proto: int,
    payload: bytes,
    *,
    ttl: int = 64,
    ident: int = 0,
    df: bool = False,
    mf: bool = False,
    offset: int = 0,
    options: bytes = b"",
    version: int = 4,
    ihl: int | None = None,
    total: int | None = None,
    good_csum: bool = True,
    tos: int = 0,
) -> bytes:
    """An IPv4 packet. ``offset`` is in bytes (a multiple of 8); ``ihl`` and
    ``total`` override the computed fields (the checksum is computed over the
    header as built, then spoilt if ``good_csum`` is false)."""
    assert len(options) % 4 == 0 and offset % 8 == 0
    hl = 20 + len(options)
    flags = (0x4000 if df else 0) | (0x2000 if mf else 0) | (offset // 8)
    h = bytearray(
        struct.pack(
            "!BBHHHBBH4s4s",
            (version << 4) | (ihl if ihl is not None else hl // 4),
            tos,
            total if total is not None else hl + len(payload),
            ident,
            flags,
            ttl,
            proto,
            0,
            src,
            dst,
        )
        + options
    )
    c = csum(bytes(h))
    h[10:12] = struct.pack("!H", c if good_csum else c ^ 0x5A5A)
    return bytes(h) + payload


def udp(src: bytes, dst: bytes, sport: int, dport: int, data: bytes) -> bytes:
    """A UDP datagram with its checksum (over the pseudo-header)."""
    length = 8 + len(data)
    pseudo = src + dst + struct.pack("!BBH", 0, 17, length)
    head = struct.pack("!HHHH", sport, dport, length, 0)
    c = csum(pseudo + head + data) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length, c) + data


def icmp_echo(ident: int, seq: int, data: bytes, kind: int = 8) -> bytes:
    head = struct.pack("!BBHHH", kind, 0, 0, ident, seq)
    c = csum(head + data)
    return struct.pack("!BBHHH", kind, 0, c, ident, seq) + data


def fragments(packet: bytes, pieces: list[tuple[int, int]]) -> list[bytes]:
    """Fragments of the IPv4 ``packet`` (20-byte header, no options) holding
    the payload bytes ``[start, end)`` of each piece, in the order given;
    MF is set on every piece that does not reach the payload's end. Pieces
    may overlap or leave holes."""
    h, payload = packet[:20], packet[20:]
    src, dst, proto, ident, ttl = h[12:16], h[16:20], h[9], struct.unpack("!H", h[4:6])[0], h[8]
    out = []
    for start, end in pieces:
        out.append(
            ipv4(src, dst, proto, payload[start:end], ttl=ttl, ident=ident, offset=start, mf=end < len(payload))
        )
    return out


def ipv6(src: bytes, dst: bytes, next_header: int, payload: bytes, hop_limit: int = 64) -> bytes:
    return struct.pack("!IHBB", 6 << 28, len(payload), next_header, hop_limit) + src + dst + payload


# ----- the program ------------------------------------------------------------


def _errname(e: OSError) -> str:
    return errno.errorcode.get(e.errno or 0, str(e.errno))


def _send(argv: list[str]) -> None:
    iface = argv[0]
    listen = float(argv[argv.index("--listen") + 1]) if "--listen" in argv else 0.0
    want = int(argv[argv.index("--expect-icmp") + 1]) if "--expect-icmp" in argv else None
    pps = float(argv[argv.index("--pps") + 1]) if "--pps" in argv else 0.0
    if "--mtu" in argv:
        subprocess.run(["ip", "link", "set", "dev", iface, "mtu", argv[argv.index("--mtu") + 1]], check=True)
    spec = json.load(sys.stdin)
    if "repeat" in spec:
        frame, n = bytes.fromhex(spec["repeat"][0]), int(spec["repeat"][1])
        frames = [frame] * n
    else:
        frames = [bytes.fromhex(f) for f in spec["frames"]]
    icmp = None
    if listen > 0:
        icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        icmp.setblocking(False)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    sent, errors = 0, {}
    t0 = time.monotonic()
    for i, f in enumerate(frames):
        if pps and i % 32 == 0 and (ahead := t0 + i / pps - time.monotonic()) > 0:
            time.sleep(ahead)
        try:
            n = s.send(f)
            assert n == len(f), (n, len(f))
            sent += 1
        except OSError as e:
            errors[_errname(e)] = errors.get(_errname(e), 0) + 1
    took = time.monotonic() - t0
    got = []
    if icmp is not None:
        deadline = time.monotonic() + listen
        while (want is None or len(got) < want) and (left := deadline - time.monotonic()) > 0:
            if not select.select([icmp], [], [], left)[0]:
                continue
            pkt, (src, _) = icmp.recvfrom(65535)
            hl = (pkt[0] & 0x0F) * 4
            m = pkt[hl:]
            if m[0] == 8:
                continue  # echo requests: of our own pings, not answers
            got.append({"type": m[0], "code": m[1], "src": src, "rest": m[4:8].hex(), "quoted": m[8:].hex()})
    print(json.dumps({"sent": sent, "errors": errors, "seconds": round(took, 4), "icmp": got}))


def _capture(argv: list[str]) -> None:
    iface, port = argv[0], int(argv[1])
    app = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    app.bind(("0.0.0.0", port))
    app.setblocking(False)
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    raw.bind((iface, 0))
    raw.setblocking(False)
    print("ready", flush=True)
    frames, datagrams = [], []
    stdin = sys.stdin.fileno()
    done = False
    while not done:
        ready = select.select([app, raw, stdin], [], [], 5.0)[0]
        if raw in ready:
            f, addr = raw.recvfrom(65535)
            if addr[2] != PACKET_OUTGOING and len(f) >= 34 and f[23] == 17:
                frames.append(f.hex())
        if app in ready:
            d, _ = app.recvfrom(65535)
            datagrams.append(d.hex())
        if stdin in ready and not os.read(stdin, 4096):
            done = True
    # What arrived just before the end.
    for sock, out, strip in ((raw, frames, True), (app, datagrams, False)):
        while True:
            try:
                x, addr = sock.recvfrom(65535)
            except BlockingIOError:
                break
            if not strip or (addr[2] != PACKET_OUTGOING and len(x) >= 34 and x[23] == 17):
                out.append(x.hex())
    print(json.dumps({"frames": frames, "datagrams": datagrams}), flush=True)


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    {"send": _send, "capture": _capture}[cmd](rest)
