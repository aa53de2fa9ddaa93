"""Containment: what a running netloop touches on the machine, and nothing else.

netloop runs as root beside real systems, so it must not leak onto the
machine's own network. While a network with a veth host, a TAP host and a
router runs (ping and a broadcast ARP storm going through it), these tests
read the kernel's own tables about this process and the namespaces:

- every packet socket netloop holds is bound to one interface (never to all,
  ifindex 0), and each is a device of this run, not the machine's own; of a
  veth host's two, only one reads (the other only writes super-frames);
- it holds no TCP, UDP or raw IP socket, and no Unix socket with a name: it
  listens on nothing (the Python API talks to the run over a socket pair);
- a canary veth pair in the root namespace, not in the topology, sees no frame
  during the run; the root namespace's routes and addresses do not change;
- each real host's namespace has lo and its one interface into the model and
  no route out through anything else, and the root-side devices carry no
  address (IPv6 off, so the root kernel does not talk into the model);
- the run records under /run/netloop are private (directory 0700, files 0600).

The network runs in this process (the Python API), so /proc/self is netloop.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

import netloop

pytestmark = pytest.mark.netloop_real

CANARY = ("cnry0", "cnry1")  # not "nl…": `netloop clean` owns that prefix


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def socket_inodes() -> set[int]:
    """Inodes of the sockets this process holds."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def proc_table(name: str, inode_col: int) -> dict[int, list[str]]:
    """Rows of /proc/net/<name> by socket inode."""
    rows = {}
    try:
        lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
    except FileNotFoundError:
        return rows
    for line in lines:
        f = line.split()
        if len(f) > inode_col:
            rows[int(f[inode_col])] = f
    return rows


def tun_devices() -> list[str]:
    """The TAP/TUN devices this process's /dev/net/tun descriptors serve."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "/dev/net/tun":
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("iff:"):
                out.append(line.split()[1])
    return sorted(out)


def ifname(index: int) -> str:
    for entry in Path("/sys/class/net").iterdir():
        try:
            if int((entry / "ifindex").read_text()) == index:
                return entry.name
        except OSError:
            continue
    return f"#{index}"


def counters(dev: str) -> tuple[int, int]:
    base = Path(f"/sys/class/net/{dev}/statistics")
    return int((base / "rx_packets").read_text()), int((base / "tx_packets").read_text())


@pytest.fixture
def canary():
    """A veth pair in the root namespace that no topology names."""
    subprocess.run(["ip", "link", "del", CANARY[0]], capture_output=True)
    sh("ip", "link", "add", CANARY[0], "type", "veth", "peer", "name", CANARY[1])
    try:
        for dev in CANARY:
            Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1")
            sh("ip", "link", "set", dev, "up")
        yield CANARY
    finally:
        subprocess.run(["ip", "link", "del", CANARY[0]], capture_output=True)


def our_record() -> tuple[Path, dict]:
    for p in Path("/run/netloop").glob("*.json"):
        rec = json.loads(p.read_text())
        if rec.get("owner_pid") == os.getpid():
            return p, rec
    raise AssertionError("no run record of this process in /run/netloop")


def others_removed(addrs: str, mine: set[str]) -> list[str]:
    """`ip -br addr` without other netloop runs' devices (nl…, not in
    `mine`)."""
    def name(line: str) -> str:
        return line.split()[0].split("@")[0]

    return [line for line in addrs.splitlines() if not (name(line).startswith("nl") and name(line) not in mine)]


def test_netloop_touches_only_what_the_topology_names(canary):
    before_sockets = socket_inodes()
    routes_before = sh("ip", "-4", "route", "show", "table", "all")
    addrs_before = sh("ip", "-br", "addr")
    canary_before = [counters(d) for d in canary]

    net = netloop.Network("contain", link_defaults={"delay": "1ms"})
    h1 = net.add_real_host("h1")
    h2 = net.add_real_host("h2", via="tap")
    r1 = net.add_router("r1")
    net.add_link(h1, r1)
    net.add_link(r1, h2)
    with net:
        h1.cmd(["ping", "-n", "-c", "3", "-i", "0.2", h2.ip])
        # A broadcast storm from h1: the kernel sends ARP for addresses
        # nobody has, and arping floods broadcasts if installed.
        h1.run(["ping", "-n", "-b", "-c", "20", "-i", "0.01", "-W", "1", "198.18.1.255"])
        for k in range(20):
            h1.run(["ping", "-n", "-c", "1", "-W", "0.05", f"198.18.1.{100 + k}"])

        path, rec = our_record()
        devices = set(rec["devices"])
        namespaces = {n["name"] for n in rec["namespaces"]}
        assert {h1.namespace, h2.namespace} <= namespaces, rec

        # The veth host's packet sockets are bound to its device of this run:
        # one reads it (ETH_P_ALL), one only writes the super-frames that no
        # ring slot holds (protocol 0: the kernel hands it no frame); the
        # TAP host's file descriptor is attached to its TAP device.
        new = socket_inodes() - before_sockets
        packet = proc_table("packet", 8)
        bound = [packet[i] for i in new if i in packet]
        protos = sorted(int(row[3], 16) for row in bound)
        assert protos == [0, 0x0003], f"h1's veth: a reading and a writing-only packet socket expected: {bound}"
        assert len({row[4] for row in bound}) == 1, f"both on h1's veth: {bound}"
        for row in bound:
            index = int(row[4])
            assert index != 0, f"a packet socket bound to every interface: {row}"
            assert ifname(index) in devices, f"bound to {ifname(index)}, not a device of the run {devices}"
        # The TAP device moved into h2's namespace as its eth0 (fdinfo gives
        # the name it has now).
        assert tun_devices() == ["eth0"], tun_devices()
        assert "tun type tap" in sh("ip", "-n", h2.namespace, "-d", "link", "show", "eth0")

        # Nothing listening or talking IP.
        for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6", "udplite", "udplite6"):
            mine = set(proc_table(table, 9)) & new
            assert not mine, f"netloop holds {table} sockets: {[proc_table(table, 9)[i] for i in mine]}"
        unix = proc_table("unix", 6)
        named = [unix[i] for i in new if i in unix and len(unix[i]) > 7]
        assert not named, f"named Unix sockets: {named}"

        # Real hosts: lo and eth0 only, every route through eth0.
        for host in (h1, h2):
            links = sh("ip", "-n", host.namespace, "-br", "link").splitlines()
            names = sorted(line.split()[0].split("@")[0] for line in links)
            assert names == ["eth0", "lo"], f"{host}: {links}"
            for line in sh("ip", "-n", host.namespace, "-4", "route", "show", "table", "all").splitlines():
                if line.startswith(("local", "broadcast")):
                    continue
                assert " dev eth0" in line, f"{host}: route not into the model: {line}"
        # Root-side devices: no address at all.
        for dev in devices:
            if Path(f"/sys/class/net/{dev}").exists():
                assert sh("ip", "-br", "addr", "show", "dev", dev).split()[2:] == [], dev
                assert Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").read_text().strip() == "1", dev

        # Private records.
        # netloop makes the directory 0700; one it finds must at least not
        # be writable by group or others (it refuses it otherwise).
        assert stat.S_IMODE(Path("/run/netloop").stat().st_mode) & 0o022 == 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)

    assert [counters(d) for d in canary] == canary_before, "frames appeared on an interface no topology named"
    assert sh("ip", "-4", "route", "show", "table", "all") == routes_before
    # The run's own devices are gone again; nothing else changed. Other
    # netloop runs on the machine (their devices are named nl…) come and go
    # meanwhile: those lines are not this run's to judge.
    after = sh("ip", "-br", "addr")
    assert not [line for line in after.splitlines() if line.split("@")[0].split()[0] in devices], after
    assert others_removed(after, devices) == others_removed(addrs_before, devices)
    r = net.results
    assert r.conservation["unaccounted"] == 0
