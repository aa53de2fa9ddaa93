"""Tests of the Python API: building, checking, simulating, and running real
hosts in real time with link changes, statistics, pcap and tear-down.

Real-host tests need root (they create network namespaces); elsewhere they
skip with the reason. Run: ``python3 -m pytest crates/netloop-py/tests``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import netloop

REPO = Path(__file__).resolve().parents[3]


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def chain(net: netloop.Network, delay: str = "5ms", rate: str = "100Mbps") -> tuple[netloop.Host, netloop.Host]:
    """h1 - r1 - h2 with real hosts."""
    h1, h2 = net.add_real_host("h1"), net.add_real_host("h2")
    r1 = net.add_router("r1")
    net.add_link(h1, r1, rate=rate, delay=delay)
    net.add_link(r1, h2, rate=rate, delay=delay)
    return h1, h2


def ping_avg_ms(host: netloop.Host, dst: str, count: int = 5) -> float:
    out = host.cmd(["ping", "-n", "-c", str(count), "-i", "0.05", dst], timeout=30)
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


# ----- building and checking (no root) -------------------------------------


def test_builder_writes_a_topology_the_core_loads() -> None:
    net = netloop.Network("b", seed=7, duration="3s", link_defaults={"rate": "1Gbps"})
    a, r, b = net.add_host("a"), net.add_router("r", forwarding_rate="50000pps"), net.add_host("b")
    net.add_link(a, r, delay="1ms", a_to_b={"rate": "10Mbps"})
    net.add_link(r, b, name="core", delay="2ms", loss={"model": "bernoulli", "p": 0.01})
    net.add_traffic("udp-cbr", a, b, name="cbr", rate="1Mbps", size="500B")
    net.add_event("1s", "core", "down")
    text = net.to_toml()
    assert "[link.a_to_b]" in text or "a_to_b = {" in text
    info = net.info()
    assert [n["name"] for n in info["nodes"]] == ["a", "r", "b"]
    assert info["links"] == ["a-r", "core"]
    assert info["flows"] == ["cbr"]
    assert info["seed"] == 7 and info["duration_s"] == 3.0
    assert a.ip is not None and a.ip.startswith("198.18.")
    # The same text through the command line's loader: identical model.
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"netloop-py-{os.getpid()}.toml"
    path.write_text(text)
    try:
        assert netloop.Network.from_file(path).info() == info
    finally:
        path.unlink()


def test_topology_errors_name_the_item_field_and_value() -> None:
    net = netloop.Network("bad")
    net.add_host("a")
    net.add_router("r")
    net.add_link("a", "r", delay="fast")
    net.add_link("a", "nowhere")
    with pytest.raises(netloop.TopologyError) as e:
        net.check()
    msg = str(e.value)
    assert "field 'delay'" in msg and "'fast' is not a duration" in msg
    assert "'nowhere' is not a node" in msg
    assert "2 errors" in msg
    with pytest.raises(TypeError, match=r"link\[0\]\.delay"):
        n2 = netloop.Network("bad2")
        n2.add_host("a")
        n2.add_link("a", "a", delay=object())
        n2.to_toml()


def test_errors_of_a_network_built_in_code_name_the_call_and_where() -> None:
    """Not the lines of the TOML that netloop's loader read: the Python
    call that made the item at fault, with its arguments, and the file and
    line of this test that made it; each error its own."""
    net = netloop.Network("calls", duration="fast")
    net.add_host("a")
    net.add_real_host("h", commands=[{"cmd": "true", "ready": "sctp:1"}])
    net.add_router("r", forwarding_rate="lots")
    net.add_link("a", "r", delay="1ms", queue=-5)
    net.add_traffic("udp-cbr", "a", "nowhere", rate="1Mbps")
    net.add_event("1s", "a-r", "sideways")
    with pytest.raises(netloop.TopologyError) as e:
        net.check()
    lines = str(e.value).splitlines()
    here = f"{__file__}:"
    want = [
        ("Network('calls', duration='fast')", "field 'duration'"),
        ("add_real_host('h', commands=[{'cmd': 'true', 'ready': 'sctp:1'}])", "field 'command.ready'"),
        ("add_router('r', forwarding_rate='lots')", "field 'forwarding_rate'"),
        ("add_link('a', 'r', delay='1ms', queue=-5)", "field 'queue'"),
        ("add_traffic('udp-cbr', 'a', 'nowhere', rate='1Mbps')", "'nowhere' is not a node"),
        ("add_event('1s', 'a-r', 'sideways')", "field 'action'"),
    ]
    for call, what in want:
        line = next((x for x in lines if x.startswith(call + " at " + here)), None)
        assert line is not None and what in line, f"{call}: {lines}"
    assert not any(x.startswith("calls:") and ":" in x.split(" ")[0][6:] for x in lines), lines
    # A topology from a file keeps its own lines.
    text = net.to_toml()
    with pytest.raises(netloop.TopologyError, match=r"^t:\d+:\d+: "):
        netloop.Network.from_toml(text, "t").check()


def test_duplicate_node_and_missing_file_are_clear() -> None:
    net = netloop.Network("dup")
    net.add_host("a")
    with pytest.raises(netloop.TopologyError, match="'a' exists already"):
        net.add_router("a")
    with pytest.raises(netloop.TopologyError, match="cannot read the file"):
        netloop.Network.from_file("/nonexistent/topology.toml")


def test_dual_stack_addresses_and_routes_from_python() -> None:
    net = netloop.Network("v6", ipv6=True)
    h1, r1, r2 = net.add_real_host("h1"), net.add_router("r1"), net.add_router("r2")
    h2 = net.add_real_host("h2")
    net.add_link(h1, r1)
    net.add_link(r1, r2, addresses6=["2001:2:ff::1/64", "auto"])
    net.add_link(r2, h2, subnet6="2001:2:ee::/64")
    net.add_route(r1, "2001:2:dd::/48", via="2001:2:ff::2")
    assert h1.ip6 == "2001:2::1"
    assert r2.ip6 == "2001:2:ff::2", r2.interfaces()
    assert h2.ip6 == "2001:2:ee::2"
    assert h2.ip == "198.18.2.2"
    # Without IPv6 in the network, IPv6 settings are refused, saying how.
    v4 = netloop.Network("v4")
    a, b = v4.add_real_host("a"), v4.add_router("b")
    v4.add_link(a, b, addresses6=["2001:2::1/64", "auto"])
    with pytest.raises(netloop.TopologyError, match=r"ipv6 = true"):
        v4.check()
    plain = netloop.Network("v4b")
    x, y = plain.add_real_host("x"), plain.add_router("y")
    plain.add_link(x, y)
    assert x.ip == "198.18.0.1" and x.ip6 is None


# ----- as fast as possible (no root) ---------------------------------------


def bulk(rate: str, seconds: str = "5s", seed: int = 1, loss: float = 0.0) -> netloop.Network:
    net = netloop.Network("afap", seed=seed, duration=seconds)
    a, r, b = net.add_host("a"), net.add_router("r"), net.add_host("b")
    net.add_link(a, r, rate="1Gbps", delay="1ms")
    net.add_link(r, b, rate=rate, delay="10ms", loss=loss)
    net.add_traffic("tcp-bulk", a, b, name="bulk")
    return net


def test_simulate_returns_results_objects() -> None:
    r = bulk("10Mbps").simulate()
    f = r.flow("bulk")
    # TCP over a 10 Mbit/s bottleneck (24 B overhead per 1514 B frame).
    assert 8.5e6 < f["throughput_bps"] <= 10e6
    assert r.conservation["unaccounted"] == 0
    assert r.sim_seconds == pytest.approx(5.0)
    assert r.realtime is None and r.kept_up is None
    assert r.link("r-b")["a_to_b"]["rate_bps"] == 10_000_000
    with pytest.raises(KeyError, match="links: a-r, r-b"):
        r.link("nope")


def test_results_are_typed_objects_that_are_still_the_json() -> None:
    r = bulk("10Mbps", loss=0.01).simulate()
    link = r.link("r-b")
    assert isinstance(link, netloop.LinkResult) and isinstance(link.a_to_b, netloop.Direction)
    raw = next(lk for lk in r.raw["links"] if lk["name"] == "r-b")
    d = link.a_to_b
    assert (d.rate_bps, d.sent_packets, d.received_bytes, d.drops) == (
        10_000_000, raw["a_to_b"]["sent_packets"], raw["a_to_b"]["received_bytes"], raw["a_to_b"]["drops"])
    assert d.dropped == sum(raw["a_to_b"]["drops"].values()) > 0  # 1 % random loss
    assert link["a_to_b"]["sent_packets"] == d.sent_packets and dict(link["a_to_b"]) == raw["a_to_b"]
    assert [lk.name for lk in r.links] == ["a-r", "r-b"] and link.a == "r:eth1"
    f = r.flow("bulk")
    assert isinstance(f, netloop.FlowResult) and f.kind == "tcp-bulk" and (f.from_, f.to) == ("a", "b")
    assert f.throughput_bps == f["throughput_bps"] and f.delay is None  # TCP bulk: no delay samples
    ping = netloop.Network("p", duration="2s")
    a, b = ping.add_host("a"), ping.add_host("b")
    ping.add_link(a, b, delay="5ms")
    ping.add_traffic("ping", a, b, name="echo", interval="100ms")
    delay = ping.simulate().flow("echo").delay
    assert isinstance(delay, netloop.Distribution) and delay.count > 10
    assert delay.min_ns >= 10_000_000 and delay.p50_ns >= delay.min_ns and delay["count"] == delay.count
    assert r.realtime is None


def test_static_neighbours_from_python_leave_the_first_ping_waiting_for_nothing() -> None:
    def first_and_fastest(**run: object) -> tuple[int | None, int | None]:
        net = netloop.Network("static", duration="2s", **run)
        a, r, b = net.add_host("a"), net.add_router("r"), net.add_host("b")
        net.add_link(a, r, delay="5ms")
        net.add_link(r, b, delay="5ms")
        net.add_traffic("ping", a, b, name="echo", interval="100ms")
        assert ("static_neighbours = true" in net.to_toml()) == bool(run)
        d = net.simulate().flow("echo").delay
        assert d is not None
        return d.max_ns, d.min_ns

    slowest, fastest = first_and_fastest()
    assert slowest is not None and fastest is not None and slowest > fastest  # ARP on each link
    slowest, fastest = first_and_fastest(static_neighbours=True)
    assert slowest == fastest


def test_add_host_makes_simulated_and_real_hosts_and_hosts_lists_them() -> None:
    net = netloop.Network("mixed")
    a = net.add_host("a")
    h = net.add_host("h", real=True, via="tap")
    r = net.add_router("r")
    b = net.add_real_host("b")
    for n in (a, h, b):
        net.add_link(n, r)
    assert (a.kind, h.kind, b.kind) == ("host", "namespace", "namespace") and isinstance(h, netloop.Host)
    assert [n.name for n in net.hosts] == ["a", "h", "b"]  # as Mininet's net.hosts: a list
    assert [n.name for n in net.real_hosts] == ["h", "b"] and net["h"] is h
    assert 'via = "tap"' in net.to_toml()
    with pytest.raises(netloop.TopologyError, match=r"add_host\('x', via='tap'\).*real=True"):
        net.add_host("x", via="tap")


def test_simulate_writes_the_time_series_as_netloop_run_does(tmp_path: Path) -> None:
    path = tmp_path / "bulk.series.jsonl"
    r = bulk("10Mbps", seconds="3s").simulate(stats_interval="500ms", stats=path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header, samples = lines[0], lines[1:]
    assert header["format"] == "netloop-series/1" and header["interval_ns"] == 500_000_000
    assert [s["t_ns"] for s in samples] == [k * 500_000_000 for k in range(7)]
    # The last sample is the results' counters.
    li, c = header["links"].index("r-b"), header["dir_columns"].index("sent_bytes")
    assert samples[-1]["links"][li][0][c] == r.link("r-b").a_to_b.sent_bytes > 0
    with pytest.raises(netloop.TopologyError, match=r"give the file too, stats=PATH"):
        bulk("10Mbps").simulate(stats_interval="1s")
    with pytest.raises(netloop.TopologyError, match='stats_interval "soon"'):
        bulk("10Mbps").simulate(stats_interval="soon", stats=tmp_path / "x.jsonl")


def test_links_follow_traces_from_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Mahimahi file (found from the working directory: a network built
    in Python has no topology file) and an inline rate series."""
    monkeypatch.chdir(tmp_path)
    # Two opportunities a millisecond: 24 Mbit/s of IP.
    Path("two.trace").write_text("1\n1\n")
    net = netloop.Network("afap", seed=1, duration="5s")
    a, r, b = net.add_host("a"), net.add_router("r"), net.add_host("b")
    net.add_link(a, r, rate="1Gbps", delay="1ms")
    net.add_link(r, b, delay="10ms", a_to_b={"trace": "two.trace"},
                 b_to_a={"trace": {"rates": [["0s", "2Mbps"], ["1s", "4Mbps"]]}})
    net.add_traffic("tcp-bulk", a, b, name="bulk")
    res = net.simulate()
    link = res.link("r-b")
    assert link["a_to_b"]["trace"] == {"kind": "mahimahi", "source": "two.trace", "mean_bps": 24_064_000}
    assert link["b_to_a"]["trace"]["kind"] == "rates" and link["a_to_b"]["rate_bps"] is None
    # TCP follows the trace: more than a 12 Mbit/s trace could carry, less
    # than 24 Mbit/s.
    assert 15e6 < res.flow("bulk")["throughput_bps"] < 24e6
    assert res.conservation["unaccounted"] == 0
    with pytest.raises(netloop.TopologyError, match="nope.trace"):
        bad = netloop.Network("afap")
        x, y = bad.add_host("x"), bad.add_host("y")
        bad.add_link(x, y, trace="nope.trace")
        bad.simulate()


def test_simulate_is_reproducible_by_seed() -> None:
    one = bulk("10Mbps", "3s", seed=5, loss=0.02).simulate()
    two = bulk("10Mbps", "3s", seed=5, loss=0.02).simulate()
    other = bulk("10Mbps", "3s", seed=5, loss=0.02).simulate(seed=6)
    assert one.drops == two.drops and one.drops["random_loss"] > 0
    assert one.flow("bulk")["received_bytes"] == two.flow("bulk")["received_bytes"]
    assert other.flow("bulk")["received_bytes"] != one.flow("bulk")["received_bytes"]


def test_progress_callback_is_called_and_can_stop_the_run() -> None:
    calls: list[tuple[float, float, float]] = []

    class Enough(Exception):
        pass

    def progress(sim: float, total: float, speed: float) -> None:
        calls.append((sim, total, speed))
        raise Enough

    # A minute of 1 Gbit/s TCP takes seconds of wall time: progress is due.
    with pytest.raises(Enough):
        bulk("1Gbps", "60s").simulate(progress=progress)
    assert len(calls) == 1
    sim, total, speed = calls[0]
    assert 0 < sim < total == 60.0 and speed > 0


def test_simulating_real_hosts_is_refused() -> None:
    net = netloop.Network("real")
    chain(net)
    with pytest.raises(netloop.TopologyError, match=r"real nodes \(h1, h2\) need real time"):
        net.simulate()


def test_simulate_a_file_with_pcap(tmp_path: Path) -> None:
    r = netloop.simulate(REPO / "examples" / "one-router.toml", "1s", pcap=["h1-r1"], pcap_dir=tmp_path)
    (cap,) = r.pcap
    assert cap["frames"] > 0 and cap["error"] is None
    data = Path(cap["path"]).read_bytes()
    assert data[:4] == bytes.fromhex("4d3cb2a1")  # nanosecond pcap, little-endian


def test_simulate_with_partitions_gives_the_results_of_one(tmp_path: Path) -> None:
    def run(parts: int, sync: str = "windowed") -> tuple[netloop.Results, bytes, bytes]:
        d = tmp_path / f"p{parts}-{sync}"
        series = tmp_path / f"p{parts}-{sync}.series.jsonl"
        r = bulk("10Mbps", "2s", loss=0.01).simulate(
            partitions=parts, pcap=["r-b"], pcap_dir=d, stats_interval="100ms", stats=series,
            sync=sync,
        )
        return r, (d / "r-b.pcap").read_bytes(), series.read_bytes()

    (one, cap1, series1), (two, cap2, series2) = run(1), run(2)
    assert two.raw["wall"]["partitions"]["count"] == 2
    assert two.raw["wall"]["partitions"]["sync"] == "windowed"
    # Null messages: the same results, captures and series.
    null, cap_null, series_null = run(2, "null")
    assert null.raw["wall"]["partitions"]["sync"] == "null"
    # (Apart from where each wrote its capture.)
    assert {k: v for k, v in null.raw.items() if k not in ("wall", "pcap")} == {
        k: v for k, v in one.raw.items() if k not in ("wall", "pcap")
    }
    assert cap_null == cap1 and series_null == series1
    with pytest.raises(ValueError, match=r'sync="nul".*"windowed"'):
        bulk("10Mbps").simulate(partitions=2, sync="nul")
    with pytest.raises(ValueError, match=r"give partitions=N"):
        bulk("10Mbps").simulate(sync="null")
    assert one.flow("bulk")["received_bytes"] == two.flow("bulk")["received_bytes"] > 0
    assert one.drops == two.drops and one.drops["random_loss"] > 0
    assert one.conservation == two.conservation
    assert cap1 == cap2 and len(cap1) > 1000
    # The time series too: 21 samples, the same bytes.
    assert series1 == series2 and len(series1.splitlines()) == 22
    with pytest.raises(ValueError, match="partitions=0"):
        bulk("10Mbps").simulate(partitions=0)


def test_ctrl_c_stops_a_simulation_cut_into_partitions() -> None:
    # An hour of 1 Gbit/s TCP takes over a minute of wall time; SIGINT
    # after half a second must end it at once (the partitions run on
    # threads that never see signals: the main thread looks for them).
    # Python's own SIGINT handler, whatever this process inherited: a shell
    # that starts a command in the background sets SIGINT to ignored, and
    # Python then installs none (the test then failed with "DID NOT RAISE").
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bulk("1Gbps", "3600s").simulate(partitions=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    assert time.monotonic() - start < 20


def test_live_calls_on_a_network_that_is_not_running() -> None:
    net = netloop.Network("idle")
    h1, h2 = chain(net)
    with pytest.raises(netloop.NetloopError, match="not running"):
        h1.cmd("true")
    with pytest.raises(netloop.NetloopError, match="not running"):
        net.link("h1-r1").down()
    with pytest.raises(netloop.NetloopError, match="never started"):
        net.stop()


# ----- real hosts in real time (root) --------------------------------------


@pytest.mark.netloop_real
def test_a_real_time_run_started_from_python_writes_its_time_series(
    netloop_real_network: netloop.Network, tmp_path: Path,
) -> None:
    net = netloop_real_network
    h1, h2 = chain(net, delay="5ms")
    path = tmp_path / "live.series.jsonl"
    net.start(stats_interval="200ms", stats=path)
    try:
        h1.run(["ping", "-n", "-c", "5", "-i", "0.2", h2.ip])
        # Written as the run goes: samples are there before it stops.
        during = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(during) >= 4 and during[-1]["realtime"]["events"] > 0, during[-1]
    finally:
        res = net.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    header, samples = lines[0], lines[1:]
    assert header["interval_ns"] == 200_000_000 and len(samples) > len(during) - 1
    assert all("kept_up" in s["realtime"] for s in samples)
    li, c = header["links"].index("r1-h2"), header["dir_columns"].index("sent_packets")
    assert samples[-1]["links"][li][0][c] == res.link("r1-h2").a_to_b.sent_packets >= 5


@pytest.mark.netloop_real
def test_real_hosts_ping_through_the_model_and_links_change_at_run_time(
    netloop_real_network: netloop.Network,
) -> None:
    net = netloop_real_network
    h1, h2 = chain(net, delay="5ms")
    with net:
        assert h1.namespace and h1.namespace in namespaces()
        # Four 5 ms hops: 20 ms plus the real hosts' own path.
        base = ping_avg_ms(h1, h2.ip)
        assert 20.0 <= base < 25.0, base
        net.link("r1-h2").set(delay="50ms")
        slow = ping_avg_ms(h1, h2.ip)
        assert 110.0 <= slow < 115.0, slow
        # One direction only: +45 ms once.
        net.link("r1-h2").set(delay="5ms", direction="b_to_a")
        half = ping_avg_ms(h1, h2.ip)
        assert 65.0 <= half < 70.0, half
        net.link("r1-h2").set(delay="5ms")
        net.link("r1-h2").down()
        assert h1.run(["ping", "-n", "-c", "2", "-W", "1", h2.ip]).returncode != 0
        snap = net.stats()
        assert snap.results.link("r1-h2")["a_to_b"]["drops"].get("link_down", 0) >= 1
        assert snap.realtime["end"] == "running"
        # Each snapshot's window holds exactly the events since the one before
        # (the pings in between make some).
        h1.run(["ping", "-n", "-c", "2", "-i", "0.2", "-W", "1", h2.ip])
        # Reading the clock or one link's counters does not cut the window.
        assert net.now() > 0 and net.link("h1-r1").stats()["a_to_b"]["sent_packets"] > 0
        later = net.stats()
        windows = (snap.window_lateness["count"], later.window_lateness["count"])
        assert later.realtime["events"] > snap.realtime["events"], windows
        assert windows[1] == later.realtime["events"] - snap.realtime["events"], windows
        assert windows[0] <= snap.realtime["events"], windows
        net.link("r1-h2").up()
        assert ping_avg_ms(h1, h2.ip, 3) < 25.0
    r = net.results
    assert r.end_reason == "control"
    assert r.conservation["unaccounted"] == 0
    assert r.drops.get("link_down", 0) >= 1
    assert r.realtime is not None and r.realtime["rx_frames"] > 0
    assert h1.namespace is None


@pytest.mark.netloop_real
def test_real_hosts_over_ipv6_from_python() -> None:
    net = netloop.Network("ipv6_from_python", ipv6=True)
    h1, h2 = chain(net, delay="5ms")
    with net:
        assert h2.ip6 == "2001:2:0:1::2"
        out = h1.cmd(["ping", "-6", "-n", "-c", "3", "-i", "0.05", h2.ip6], timeout=30)
        assert "3 received" in out, out
        # The fastest: the first also waits for neighbour discovery.
        m = re.search(r"= ([\d.]+)/[\d.]+/", out)
        assert m and 20.0 <= float(m.group(1)) < 25.0, out
    r = net.results
    assert r.conservation["unaccounted"] == 0
    assert r.drops.get("unsupported", 0) == 0, r.drops


@pytest.mark.netloop_real
def test_real_time_with_partitions_from_python(netloop_real_network: netloop.Network) -> None:
    # h1 - r1 - r2 - r3 - h2, with r2 alone in partition 1: every frame
    # crosses the cut twice each way, and r2 transmits r1-r2's b_to_a.
    net = netloop_real_network
    h1, h2 = net.add_real_host("h1", partition=0), net.add_real_host("h2", partition=0)
    r1, r2, r3 = (net.add_router(f"r{i}", partition=p) for i, p in ((1, 0), (2, 1), (3, 0)))
    for a, b in ((h1, r1), (r1, r2), (r2, r3), (r3, h2)):
        net.add_link(a, b, rate="100Mbps", delay="5ms")
    with net.start(partitions=2):
        # Address resolution on every hop first (a round trip of each link).
        h1.run(["ping", "-n", "-c", "1", "-W", "2", h2.ip])
        # Eight 5 ms hops there and back.
        base = ping_avg_ms(h1, h2.ip)
        assert 40.0 <= base < 45.0, base
        # A change that partition 1 must make: r2 sends r1-r2's b_to_a.
        net.link("r1-r2").set(delay="50ms", direction="b_to_a")
        slow = ping_avg_ms(h1, h2.ip)
        assert 85.0 <= slow < 90.0, slow
        # Each snapshot accounts for every frame, those between partitions
        # included, while pings cross the cut.
        flood = h1.popen(["ping", "-n", "-q", "-i", "0.002", h2.ip])
        for _ in range(5):
            assert net.stats().results.conservation["unaccounted"] == 0
        flood.terminate()
        flood.wait()
        # The cut's lookahead is 5 ms: a cut link may not get shorter.
        with pytest.raises(netloop.NetloopError, match="joins two partitions"):
            net.link("r2-r3").set(delay="1ms")
        snap = net.stats()
        assert [p["nodes"] for p in snap.partitions] == [4, 1]
        assert snap.partitions[1]["events"] > 0 and snap.partitions[1]["frames_in"] > 0
        # r2 -> r3 is partition 1's to count: its share is in the snapshot.
        assert snap.results.link("r2-r3")["a_to_b"]["sent_packets"] >= 10
        net.link("r1-r2").set(delay="5ms", direction="b_to_a")
        assert ping_avg_ms(h1, h2.ip, 3) < 45.0
    r = net.results
    assert r.conservation["unaccounted"] == 0
    assert r.link("r2-r3")["a_to_b"]["sent_packets"] >= snap.results.link("r2-r3")["a_to_b"]["sent_packets"]
    assert r.realtime is not None and len(r.realtime["partitions"]["per_partition"]) == 2


@pytest.mark.netloop_real
def test_errors_of_run_time_changes(netloop_real_network: netloop.Network) -> None:
    net = netloop_real_network
    h1, _ = chain(net)
    with net:
        with pytest.raises(netloop.TopologyError, match="did you mean 'delay'"):
            net.link("h1-r1").set(delya="5ms")
        with pytest.raises(netloop.TopologyError, match="'fast' is not a duration"):
            net.link("h1-r1").set(delay="fast")
        with pytest.raises(KeyError, match="links: h1-r1, r1-h2"):
            net.link("h1-h2")
        with pytest.raises(netloop.CommandError, match="exited with status 3"):
            h1.cmd("echo oops; exit 3")
        assert h1.run("exit 3").returncode == 3
    with pytest.raises(netloop.NetloopError, match="not running"):
        net.link("h1-r1").set(delay="1ms")


@pytest.mark.netloop_real
def test_tear_down_after_a_failing_test_and_background_programs() -> None:
    net = netloop.Network("teardown")
    h1, h2 = chain(net)
    with pytest.raises(RuntimeError, match="boom"):
        with net:
            ns = {h1.namespace, h2.namespace}
            assert ns <= namespaces()
            server = h2.popen(["sleep", "300"])
            raise RuntimeError("boom")
    assert not (ns & namespaces())
    assert server.poll() is not None


@pytest.mark.netloop_real
def test_pcap_and_programs_of_the_topology(tmp_path: Path) -> None:
    net = netloop.Network("pcap")
    h1 = net.add_real_host("h1", commands=[{"cmd": "ping -n -c 3 -i 0.1 198.18.1.2", "wait": True}])
    h2 = net.add_real_host("h2")
    r1 = net.add_router("r1")
    net.add_link(h1, r1, delay="1ms")
    net.add_link(r1, h2, delay="1ms")
    assert h2.ip == "198.18.1.2"
    net.start(pcap=["r1-h2"], pcap_dir=tmp_path, log_dir=tmp_path)
    assert net.wait(timeout=20), "the awaited ping did not end"
    r = net.stop()
    assert r.end_reason == "control"
    (cap,) = r.pcap
    assert cap["frames"] >= 6 and Path(cap["path"]).stat().st_size > 24
    log = (tmp_path / "h1.0.log").read_text()
    assert "3 received" in log, log


def _blocked_signals(task: Path) -> int:
    for line in (task / "status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigBlk in {task}/status")


@pytest.mark.netloop_real
def test_the_networks_threads_leave_signals_to_the_main_thread() -> None:
    # Python runs signal handlers in its main thread only: a SIGTERM the
    # kernel gives another thread leaves the main thread asleep (the test
    # below then hung now and then). Every thread of a running network
    # blocks SIGTERM and SIGINT; the main thread does not.
    term, intr = 1 << (signal.SIGTERM - 1), 1 << (signal.SIGINT - 1)
    net = netloop.Network("sigmask")
    h1, h2 = net.add_real_host("h1"), net.add_real_host("h2")
    net.add_link(h1, h2, delay="1ms")
    with net:
        me = Path("/proc/self/task")
        main = me / str(threading.get_native_id())
        assert _blocked_signals(main) & (term | intr) == 0
        theirs = {t: _blocked_signals(t) for t in me.iterdir()
                  if (t / "comm").read_text().startswith("netloop")}
        assert theirs, "the network runs in threads of its own"
        for t, mask in theirs.items():
            name = (t / "comm").read_text().strip()
            assert mask & term and mask & intr, f"thread {name} takes SIGTERM/SIGINT: {mask:x}"


@pytest.mark.netloop_real
def test_sigterm_tears_the_network_down(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys, time, netloop
        net = netloop.Network("sigterm")
        h1, h2 = net.add_real_host("h1"), net.add_real_host("h2")
        net.add_link(h1, h2, delay="1ms")
        with net:
            print(h1.namespace, h2.namespace, flush=True)
            time.sleep(60)
    """))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        ns = set(p.stdout.readline().split())
        assert len(ns) == 2 and ns <= namespaces()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    deadline = time.monotonic() + 5
    while ns & namespaces() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (ns & namespaces())


CHILD = """
import netloop.pytest_plugin as plugin

# The privilege check, forced to fail (in the child process only).
plugin.can_run_real_hosts = lambda: "not root (uid 1000)"

def test_real(netloop_real_network):
    raise AssertionError("should have been skipped")

def test_sim(netloop_network):
    assert netloop_network.name == "test_sim"
"""


def test_fixture_skips_with_a_reason_without_privileges(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A child pytest in its own process, so the forced failure can't leak
    # into this run's later tests.
    monkeypatch.delenv("NETLOOP_REQUIRE_REAL", raising=False)
    pytester.makepyfile(test_child=CHILD)
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*netloop real hosts unavailable: not root (uid 1000)*"])


def test_required_real_hosts_fail_instead_of_skipping(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETLOOP_REQUIRE_REAL", "1")
    pytester.makepyfile(test_child=CHILD)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*NETLOOP_REQUIRE_REAL=1: required here*"])


def test_a_mininet_style_loss_of_1_is_refused_with_the_percent_form() -> None:
    """Mininet's TCLink(loss=1) is 1 %; here a bare 1 would be every packet,
    so it is refused, and the error says how to write either."""
    net = netloop.Network("loss1")
    net.add_host("a")
    net.add_router("r")
    net.add_link("a", "r", loss=1)
    with pytest.raises(netloop.TopologyError) as e:
        net.check()
    assert "field 'loss'" in str(e.value) and "write '1%' (or 0.01)" in str(e.value)
    assert "add_link('a', 'r', loss=1) at " in str(e.value)
    ok = netloop.Network("loss1pct")
    ok.add_host("a")
    ok.add_router("r")
    ok.add_link("a", "r", loss="1%")
    ok.check()
