"""A network stepped from Python (issue 18): the script is the time master,
advancing simulated time and sending and receiving messages at the
network's endpoints in between — how a Python co-simulation drives netloop
without HELICS. Simulated only: no root needed.
"""

from __future__ import annotations

import pytest

import netloop

# One hop: a 60-byte frame with 24 bytes of framing at 10 Mbit/s, and 5 ms.
HOP_NS = 67_200 + 5_000_000


def wan(seed: int | None = None, protocol: str | None = None, **second_hop) -> netloop.Network:
    """h1 - r1 - h2 at 10 Mbit/s and 5 ms per hop (the second with
    `second_hop`'s parameters too); endpoint `a` on h1 sends to `b` on h2
    (over `protocol`)."""
    net = netloop.Network("stepped", duration="10s", seed=seed)
    h1, r1, h2 = net.add_host("h1"), net.add_router("r1"), net.add_host("h2")
    net.add_link(h1, r1, rate="10Mbps", delay="5ms")
    net.add_link(r1, h2, rate="10Mbps", delay="5ms", **second_hop)
    net.add_endpoint("a", h1, 4000, to="b", protocol=protocol)
    net.add_endpoint("b", h2, 5000, protocol=protocol)
    return net


def test_messages_arrive_when_the_network_says_and_answers_come_back():
    sim = wan().stepped()
    assert sim.now == 0 and set(sim.endpoints) == {"a", "b"}
    sim.send("a", b"warm up")  # resolves ARP on both hops
    sim.run_until(1.0)
    assert [m.data for m in sim.receive("b")] == [b"warm up"]

    sim.send("a", b"measurement")
    assert sim.next_event() == pytest.approx(1.0 + HOP_NS / 1e9)
    sim.run_until("1.5s")
    (m,) = sim.receive("b")
    assert m.data == b"measurement"
    assert m.at_ns == 1_000_000_000 + 2 * HOP_NS
    assert m.source == sim.endpoints["a"]
    assert sim.receive("b") == []  # taken once

    sim.send("b", b"setpoint", to=m.source)  # answer whoever wrote
    sim.run_for("100ms")
    assert sim.now_ns == 1_600_000_000
    (back,) = sim.receive("a")
    assert (back.data, back.at_ns) == (b"setpoint", 1_500_000_000 + 2 * HOP_NS)

    r = sim.results()
    assert r.raw["meta"]["mode"] == "stepped"
    eps = {e["name"]: e for e in r.raw["endpoints"]}
    assert (eps["a"]["sent"], eps["b"]["received"], eps["b"]["read"]) == (2, 2, 2)
    assert r.raw["conservation"]["unaccounted"] == 0


def test_messages_go_over_ipv6_to_an_ipv6_address():
    net = netloop.Network("stepped6", duration="10s", ipv6=True)
    h1, r1, h2 = net.add_host("h1"), net.add_router("r1"), net.add_host("h2")
    net.add_link(h1, r1, rate="10Mbps", delay="5ms")
    net.add_link(r1, h2, rate="10Mbps", delay="5ms")
    net.add_endpoint("a", h1, 4000)
    net.add_endpoint("b", h2, 5000)
    sim = net.stepped()
    sim.send("a", b"over six", to=f"[{h2.ip6}]:5000")
    sim.run_until(1.0)
    (m,) = sim.receive("b")
    assert (m.data, m.source) == (b"over six", f"[{h1.ip6}]:4000")
    sim.send("b", b"back", to=m.source)
    sim.run_until(2.0)
    (back,) = sim.receive("a")
    assert (back.data, back.source) == (b"back", f"[{h2.ip6}]:5000")
    # Two hops of 5 ms (the exact time is the model's tests' business).
    assert 1_010_000_000 < back.at_ns < 1_011_000_000


def test_an_ipv6_only_network_has_ipv6_endpoints():
    net = netloop.Network("only6", duration="10s", ipv6=True, ipv4=False)
    h1, r1, h2 = net.add_host("h1"), net.add_router("r1"), net.add_host("h2")
    net.add_link(h1, r1, rate="10Mbps", delay="5ms")
    net.add_link(r1, h2, rate="10Mbps", delay="5ms")
    net.add_endpoint("a", h1, 4000, to="b")
    net.add_endpoint("b", h2, 5000)
    assert h1.ip is None and h1.ip6 is not None
    sim = net.stepped()
    assert sim.endpoints == {"a": f"[{h1.ip6}]:4000", "b": f"[{h2.ip6}]:5000"}
    sim.send("a", b"only six")
    sim.run_until(1.0)
    (m,) = sim.receive("b")
    assert (m.data, m.source) == (b"only six", sim.endpoints["a"])


def test_a_message_larger_than_the_mtu_arrives_whole():
    sim = wan().stepped()
    data = bytes(range(256)) * 200  # 51 200 bytes: 36 fragments
    sim.send("a", data)
    sim.run_until(2)
    (m,) = sim.receive("b")
    assert m.data == data


def test_a_link_outage_loses_what_was_sent_during_it():
    net = wan()
    net.add_event("300ms", "r1-h2", "down")
    net.add_event("500ms", "r1-h2", "up")
    sim = net.stepped()
    for k in range(10):
        sim.run_until(k * 0.1)
        sim.send("a", f"m{k}".encode())
    sim.run_until(2)
    got = [m.data.decode() for m in sim.receive("b")]
    # m3 and m4 reach r1 while r1-h2 is down; m2 is across by 0.21 s.
    assert got == ["m0", "m1", "m2", "m5", "m6", "m7", "m8", "m9"]
    assert sim.results().raw["conservation"]["dropped"]["link_down"] == 2


def test_over_tcp_an_outage_delays_what_it_would_have_lost():
    """The same outage with TCP endpoints: nothing is lost, everything in
    order; m3 and m4 come once TCP sent them again, after the link is back
    (here a fast retransmit: the later messages' duplicate ACKs)."""
    net = wan(protocol="tcp")
    net.add_event("300ms", "r1-h2", "down")
    net.add_event("500ms", "r1-h2", "up")
    sim = net.stepped()
    for k in range(10):
        sim.run_until(k * 0.1)
        sim.send("a", f"m{k}".encode())
    sim.run_until(4)
    got = sim.receive("b")
    assert [m.data.decode() for m in got] == [f"m{k}" for k in range(10)]
    assert all(m.at_ns > 500_000_000 for m in got[3:]), [m.at_ns for m in got]
    assert [m.at_ns for m in got] == sorted(m.at_ns for m in got)
    r = sim.results().raw
    assert r["conservation"]["dropped"]["link_down"] >= 2
    eps = {e["name"]: e for e in r["endpoints"]}
    assert eps["a"]["protocol"] == "tcp"
    assert (eps["a"]["sent"], eps["b"]["received"], eps["a"]["lost_connection"]) == (10, 10, 0)


def test_the_same_steps_give_the_same_results():
    def once():
        sim = wan(seed=3, loss=0.3, jitter="3ms").stepped()
        times = []
        for k in range(50):
            sim.send("a", f"{k}".encode())
            sim.run_for("7ms")
            times += [(m.at_ns, m.data) for m in sim.receive("b")]
        # ARP on the lossy hop may need its retry, a second later.
        sim.run_for("2s")
        times += [(m.at_ns, m.data) for m in sim.receive("b")]
        r = sim.results().raw
        r.pop("wall")
        return times, r

    a, b = once(), once()
    assert a == b
    assert 20 < len(a[0]) < 45  # the loss took some: the comparison means something


def test_bad_calls_name_the_problem():
    sim = wan().stepped()
    with pytest.raises(ValueError, match=r"send\(\"nope\"\): \"nope\" is not an endpoint of stepped \(endpoints: a, b\)"):
        sim.send("nope", b"x")
    with pytest.raises(netloop.NetloopError, match=r"refused: no destination"):
        sim.send("b", b"x")
    with pytest.raises(netloop.NetloopError, match=r"refused: 65508 bytes is more than a UDP datagram"):
        sim.send("a", bytes(65_508))
    sim.run_until(1)
    with pytest.raises(ValueError, match=r"it never goes back"):
        sim.run_until(0.5)
    with pytest.raises(ValueError, match=r"run_until: -1 is not a time"):
        sim.run_until(-1.0)
    with pytest.raises(ValueError, match=r"run_until: \"soon\""):
        sim.run_until("soon")


def test_stepping_needs_a_network_without_real_hosts():
    net = netloop.Network("real")
    h1, r1 = net.add_real_host("h1"), net.add_router("r1")
    net.add_link(h1, r1)
    with pytest.raises(netloop.TopologyError, match="real nodes \\(h1\\) need real time"):
        net.stepped()


def test_the_example_in_the_docs_runs(capsys):
    """docs/python.md's stepping example, run as written."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "python.md").read_text()
    section = text[text.index("## Step by step"):]
    code = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python"))]
    exec(compile(code, "docs/python.md", "exec"), {"netloop": netloop})
    out = capsys.readouterr().out
    assert "'name': 'pmu'" in out and "'sent': 100" in out, out
