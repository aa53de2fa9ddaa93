"""netloop as a HELICS federate (issue 18): a grid federate and a controller
federate exchange messages through netloop's endpoints, across a simulated
WAN, with a real HELICS broker (the `helics` wheel's).

Checked: each message reaches the other federate at the simulated time the
network gives, to the nanosecond (two hops of 10 and 15 ms at 10 Mbit/s);
an outage of the WAN loses the messages sent during it and nothing else,
every frame accounted for; two runs give the same messages at the same
times and the same results; a topology whose [helics] has no endpoints, and
a HELICS library that cannot be loaded, are clear errors.

Each test starts its own broker on a free port, so that the tests can run
beside other federations and other netloop runs on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import helics
except ImportError:  # pragma: no cover - CI installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("the `helics` package is not installed (pip install 'helics>=3.6,<4')", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cosim"
sys.path.insert(0, str(EXAMPLE))
from run import OUTAGE, over_tcp, run_federation  # noqa: E402  (examples/cosim/run.py)

NETLOOP = os.environ.get("NETLOOP", "netloop")
TIMEOUT = 90
WAN = (EXAMPLE / "wan.toml").read_text()

# One hop: 60-byte frame + 24 bytes of framing at 10 Mbit/s, plus the delay.
HOPS_NS = 2 * 67_200 + 10_000_000 + 15_000_000


def test_messages_cross_the_network_at_the_times_it_gives(tmp_path):
    r = run_federation(WAN, tmp_path, NETLOOP)
    ctrl, grid = r["got"]["controller"], r["got"]["grid"]
    assert [m for m, _ in ctrl] == [f"m{k}" for k in range(10)]
    assert [m for m, _ in grid] == [f"re:m{k}" for k in range(10)]
    for k in range(1, 10):
        # Sent at k x 100 ms; two hops later at the controller.
        assert round(ctrl[k][1] * 1e9) == k * 100_000_000 + HOPS_NS, ctrl[k]
        # The answer enters 1 ns later (HELICS's smallest step between a
        # message received and one sent) and takes the same two hops.
        assert round(grid[k][1] * 1e9) == k * 100_000_000 + 2 * HOPS_NS + 1, grid[k]
    # The first also waited for ARP on three hops.
    assert ctrl[0][1] > HOPS_NS / 1e9
    res = r["results"]
    assert res["meta"]["mode"] == "cosim"
    assert res["conservation"]["unaccounted"] == 0
    eps = {e["name"]: e for e in res["endpoints"]}
    assert (eps["pmu"]["sent"], eps["ctrl"]["received"], eps["ctrl"]["read"]) == (10, 10, 10)
    assert (eps["ctrl"]["sent"], eps["pmu"]["received"]) == (10, 10)
    c = res["cosim"]
    assert (c["from_federation"], c["to_federation"], c["refused"]) == (20, 20, 0)
    assert c["end"] == "duration" and c["grants"] > 20


def test_an_outage_loses_what_was_sent_during_it(tmp_path):
    r = run_federation(WAN + OUTAGE, tmp_path, NETLOOP)
    lost = {"m5", "m6"}
    assert [m for m, _ in r["got"]["controller"]] == [f"m{k}" for k in range(10) if f"m{k}" not in lost]
    assert [m for m, _ in r["got"]["grid"]] == [f"re:m{k}" for k in range(10) if f"m{k}" not in lost]
    res = r["results"]
    assert res["conservation"]["unaccounted"] == 0
    assert res["conservation"]["dropped"].get("link_down", 0) >= 2
    eps = {e["name"]: e for e in res["endpoints"]}
    assert (eps["pmu"]["sent"], eps["ctrl"]["received"]) == (10, 8)


def test_two_runs_give_the_same_messages_and_results(tmp_path):
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        runs.append(run_federation(WAN, tmp_path / name, NETLOOP))
    a, b = runs
    assert a["got"] == b["got"]
    for r in (a, b):
        r["results"].pop("wall")
        r["results"]["meta"].pop("topology")
        for k in ("wait_wall_ns", "departure_checks", "departure_check_wall_ns", "helics"):
            r["results"]["cosim"].pop(k)
    assert a["results"] == b["results"]


def test_helics_settings_without_endpoints_are_an_error(tmp_path):
    topo = tmp_path / "bare.toml"
    topo.write_text(WAN[: WAN.index("[[endpoint]]")] + '[helics]\ncore = "zmq"\n')
    r = subprocess.run([NETLOOP, "run", str(topo), "-q"], capture_output=True, text=True, timeout=TIMEOUT,
                       env=dict(os.environ, VIRTUAL_ENV=str(Path(sys.executable).parent.parent)))
    assert r.returncode != 0
    assert "[helics] needs at least one [[endpoint]]" in r.stderr, r.stderr


def test_a_helics_library_that_cannot_load_is_named(tmp_path):
    r = subprocess.run([NETLOOP, "run", str(EXAMPLE / "wan.toml"), "-q"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, NETLOOP_HELICS_LIB=str(tmp_path / "libnothing.so")))
    assert r.returncode != 0
    assert "NETLOOP_HELICS_LIB" in r.stderr and "libnothing.so" in r.stderr, r.stderr


REAL = (EXAMPLE / "realtime.toml").read_text()


def need_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("NETLOOP_REQUIRE_REAL") == "1":
            pytest.fail("real-time co-simulation needs root (it makes a network namespace)")
        pytest.skip("real-time co-simulation needs root (it makes a network namespace)")


def test_in_real_time_a_real_program_answers_a_federate_through_the_network(tmp_path):
    """The grid federate's measurements reach a real UDP program in a
    namespace across the simulated WAN, and its answers come back as HELICS
    messages; netloop keeps the wall clock and the federation follows."""
    need_root()
    r = run_federation(REAL, tmp_path, NETLOOP, roles=("grid",), start=1.0, end=3.0)
    grid = r["got"]["grid"]
    assert [m for m, _ in grid] == [f"re:m{k}" for k in range(10)]
    rtts = sorted(t - (1.0 + k * 0.1) for k, (_, t) in enumerate(grid))
    # Never faster than the network: two hops each way, 50.27 ms.
    assert rtts[0] >= 2 * HOPS_NS / 1e9 - 1e-6, rtts
    # Late by HELICS's and the engine's wake-ups only (a loose bound: the
    # machine may be busy with other runs).
    assert rtts[len(rtts) // 2] < 0.150, rtts
    res = r["results"]
    assert res["meta"]["mode"] == "realtime"
    assert res["conservation"]["unaccounted"] == 0
    c = res["cosim"]
    assert (c["from_federation"], c["to_federation"], c["refused"]) == (10, 10, 0)
    assert c["offset_ns"] is not None and c["handoff_wait_max_ns"] < 200_000_000
    (pmu,) = res["endpoints"]
    assert (pmu["sent"], pmu["received"]) == (10, 10)


def test_in_real_time_the_clocks_start_together_when_a_federate_joins_late(tmp_path):
    """netloop's clock starts when the federation starts executing, not
    when its own real hosts are up: with the grid federate joining 1.5 s
    after netloop, the engine's time and HELICS's still agree (a scheduled
    link event and a federate's message at 1.5 s happen together), and
    every answer comes back."""
    need_root()
    r = run_federation(REAL, tmp_path, NETLOOP, roles=("grid",), args=["10", "1.0", "3.0", "1.5"])
    assert [m for m, _ in r["got"]["grid"]] == [f"re:m{k}" for k in range(10)]
    c = r["results"]["cosim"]
    # Without the meeting the engine's clock ran 1.5 s ahead of HELICS's;
    # now the offset is the engine's start after the federation's (a few
    # ms; loose for a loaded machine).
    assert abs(c["offset_ns"]) < 100_000_000, c
    assert r["results"]["conservation"]["unaccounted"] == 0


def test_a_broker_that_is_not_there_is_an_error_before_anything_runs(tmp_path):
    """In real time netloop joins the federation before it creates the
    real hosts: with no broker, the run fails with HELICS's words and the
    real host's program never ran."""
    need_root()
    from run import free_port

    marker = tmp_path / "ran"
    topo = tmp_path / "rt.toml"
    topo.write_text(REAL.replace("python3 -u examples/cosim/controller.py 5000", f"touch {marker}")
                    .replace('timeout = "20s"', f'timeout = "3s"\ninit = "--brokerport={free_port()}"', 1))
    r = subprocess.run([NETLOOP, "run", str(topo), "-q"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, VIRTUAL_ENV=sys.prefix))
    assert r.returncode != 0
    assert "could not join the HELICS federation" in r.stderr, r.stderr
    assert not marker.exists(), "the real host's program ran although the federation was never joined"


def test_in_real_time_an_outage_loses_what_crossed_it(tmp_path):
    need_root()
    # The measurements due at 1.5 to 1.9 s fall in the outage even when
    # they enter the network late: HELICS lets a busy federation lag the
    # wall clock by up to 100 ms. (Two CI runs saw none of those due at
    # 1.5 and 1.6 s enter before 1.65 s; the cause was the engine's clock
    # running ahead of HELICS's, started before a slow federate joined,
    # which the clocks_start_together test now covers.)
    outage = OUTAGE.replace("450ms", "1450ms").replace("650ms", "2450ms")
    r = run_federation(REAL + outage, tmp_path, NETLOOP, roles=("grid",), start=1.0, end=3.0)
    got = {m for m, _ in r["got"]["grid"]}
    res = r["results"]
    lost = res["conservation"]["dropped"].get("link_down", 0)
    # What the outage took is what did not come back: every frame counted
    # (at most the five measurements and the answer to the one before).
    assert 1 <= lost <= 6 and len(got) == 10 - lost, (got, res["conservation"], res["cosim"])
    assert res["conservation"]["unaccounted"] == 0


@contextlib.contextmanager
def federation_without_its_other_federate(tmp_path, timeout: str, text: str = WAN):
    """netloop's wan.toml, or `text` (its `[helics] timeout` set to
    `timeout`), and a broker that waits for two federates, of which only
    netloop will come; yields (topology path, broker process) and ends the
    broker if it is still there."""
    from run import broker_path, free_port

    port = free_port()
    topo = tmp_path / "wan.toml"
    topo.write_text(text.replace('timeout = "20s"', f'timeout = "{timeout}"\ninit = "--brokerport={port}"', 1))
    broker = subprocess.Popen(
        [str(broker_path()), "--federates=2", "--coretype=zmq", f"--port={port}", "--loglevel=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield topo, broker
    finally:
        if broker.poll() is None:  # only what the test started, by its handle
            broker.kill()
            broker.wait()


def test_a_federation_that_never_forms_is_an_error_after_the_timeout(tmp_path):
    """A broker that waits for a federate that never comes (one that died
    starting, as a sender did in CI): HELICS would wait for ever; netloop
    gives up after its `timeout`, says why, and the broker is told."""
    with federation_without_its_other_federate(tmp_path, "2s") as (topo, broker):
        t0 = time.monotonic()
        r = subprocess.run([NETLOOP, "run", str(topo), "-q"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, VIRTUAL_ENV=sys.prefix))
        took = time.monotonic() - t0
        assert r.returncode == 1, r.stderr
        assert "the federation did not start: not every federate joined within 2 s" in r.stderr, r.stderr
        assert str(topo) in r.stderr, r.stderr
        assert 2 <= took < 30, took
        # The abort reaches the broker, which ends too.
        broker.wait(timeout=20)


def test_ctrl_c_while_the_federation_never_forms_ends_the_run(tmp_path):
    """A broker that waits for a federate that never comes: netloop blocks
    in HELICS; Ctrl-C ends it (HELICS's wait is aborted) with 130."""
    with federation_without_its_other_federate(tmp_path, "20s") as (topo, _):
        nl = subprocess.Popen(
            [NETLOOP, "run", str(topo), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, VIRTUAL_ENV=sys.prefix),
        )
        try:
            time.sleep(3)
            assert nl.poll() is None, nl.communicate()
            nl.send_signal(signal.SIGINT)
            _, err = nl.communicate(timeout=20)
            assert nl.returncode == 130, err
        finally:
            if nl.poll() is None:
                nl.kill()
                nl.wait()


def test_in_real_time_ctrl_c_while_the_federation_never_forms_keeps_the_results(tmp_path):
    """In real time netloop sets up its real hosts and then waits for the
    federation before its clock starts; Ctrl-C there ends the run with 130
    within seconds, its results written (without a federate's report),
    where it used to wait 5 s for HELICS and end as an error."""
    need_root()
    out = tmp_path / "r.json"
    with federation_without_its_other_federate(tmp_path, "20s", REAL) as (topo, _):
        nl = subprocess.Popen(
            [NETLOOP, "run", str(topo), "-q", "--json", str(out)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, VIRTUAL_ENV=sys.prefix),
        )
        try:
            time.sleep(4)
            assert nl.poll() is None, nl.communicate()
            nl.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            _, err = nl.communicate(timeout=20)
            assert nl.returncode == 130, err
            assert time.monotonic() - t0 < 4.0, err
        finally:
            if nl.poll() is None:
                nl.kill()
                nl.wait()
    r = json.loads(out.read_text())
    assert r["meta"]["mode"] == "realtime" and r.get("cosim") is None, r.get("cosim")
    assert r["conservation"]["unaccounted"] == 0


def test_the_grid_study_shows_what_the_wan_does_to_frequency_control():
    """examples/cosim/grid_study.py: a grid's AGC across a WAN shared with
    40 simulated flows; more delay, loss and an outage each make the
    frequency dip deeper or stay off longer, and the outage and the loss
    take the setpoints that crossed them."""
    from grid_study import study

    s = study(NETLOOP)
    base, delay, loss, outage = (s[k] for k in ("as is", "+250 ms delay", "30 % loss", "outage 1-4 s"))
    for name, g in s.items():
        assert g["unaccounted"] == 0, name
    # Every measurement answered when nothing is wrong (the last may still
    # be on its way at the end).
    assert base["setpoints"] >= 99, base["setpoints"]
    assert -0.8 < base["nadir_hz"] < -0.5, base["nadir_hz"]
    assert delay["nadir_hz"] < base["nadir_hz"] and delay["iae_hz_s"] > base["iae_hz_s"]
    assert loss["setpoints"] < 90 and loss["iae_hz_s"] > base["iae_hz_s"]
    assert loss["dropped"].get("random_loss", 0) > 0
    # 30 measurements or setpoints meet the dead link.
    assert outage["setpoints"] <= base["setpoints"] - 29, outage["setpoints"]
    assert outage["nadir_hz"] < base["nadir_hz"] - 0.3, outage["nadir_hz"]
    assert outage["dropped"].get("link_down", 0) >= 29


def test_in_real_time_the_grid_study_runs_with_its_agc_as_a_real_program():
    """grid_rt.toml: the AGC is agc.py in a namespace (plain UDP), the grid
    a federate, netloop on the wall clock with the shared WAN between them.
    Nearly every measurement is answered (the first may come before agc.py
    listens, the last after the grid stopped: 95 to 97 of 100 here), and an
    outage of the WAN takes its 30 and deepens the dip, as in simulated
    time. Whether the run kept up is not asserted: the machine may be busy
    with other runs."""
    need_root()
    from grid_study import study

    s = study(NETLOOP, realtime=True, scenarios=("as is", "outage 1-4 s"))
    base, outage = s["as is"], s["outage 1-4 s"]
    for name, g in s.items():
        assert g["unaccounted"] == 0, name
    assert base["setpoints"] >= 90, base["setpoints"]
    assert -0.8 < base["nadir_hz"] < -0.5, base["nadir_hz"]
    assert outage["setpoints"] <= base["setpoints"] - 25, outage["setpoints"]
    assert outage["nadir_hz"] < base["nadir_hz"] - 0.3, outage["nadir_hz"]
    assert outage["dropped"].get("link_down", 0) >= 25



def test_over_tcp_an_outage_delays_messages_and_loses_none(tmp_path):
    """TCP endpoints: what the outage took is sent again once the WAN is
    back (a fast retransmit on the later messages' duplicate ACKs, or the
    retransmission timeout), so every message and every answer arrives, in
    order; the two sent into the outage arrive after it."""
    r = run_federation(over_tcp(WAN + OUTAGE).replace('duration = "2s"', 'duration = "4s"'), tmp_path, NETLOOP,
                       end=4.0)
    ctrl, grid = r["got"]["controller"], r["got"]["grid"]
    assert [m for m, _ in ctrl] == [f"m{k}" for k in range(10)]
    assert [m for m, _ in grid] == [f"re:m{k}" for k in range(10)]
    assert [t for _, t in ctrl] == sorted(t for _, t in ctrl), "in order"
    assert ctrl[5][1] > 0.65 and ctrl[6][1] > 0.65, ctrl
    res = r["results"]
    assert res["conservation"]["unaccounted"] == 0
    assert res["conservation"]["dropped"].get("link_down", 0) >= 2, "the outage dropped frames"
    eps = {e["name"]: e for e in res["endpoints"]}
    assert eps["pmu"]["protocol"] == "tcp"
    assert (eps["pmu"]["sent"], eps["ctrl"]["received"], eps["pmu"]["received"]) == (10, 10, 10)
    assert (eps["pmu"]["connections_opened"], eps["ctrl"]["connections_accepted"]) == (1, 1)
    assert eps["pmu"]["lost_connection"] == eps["ctrl"]["lost_connection"] == 0


def test_in_real_time_a_real_tcp_program_answers_every_message_across_an_outage(tmp_path):
    """A real TCP server in a namespace speaking the endpoints' framing
    (controller.py --tcp): across an outage of the WAN, every answer comes
    back, in order; TCP on both sides sent again what the outage took."""
    need_root()
    # The measurements due at 1.5 to 1.9 s fall in the outage even when
    # they enter the network late: HELICS lets a busy federation lag the
    # wall clock by up to 100 ms. (Two CI runs saw none of those due at
    # 1.5 and 1.6 s enter before 1.65 s; the cause was the engine's clock
    # running ahead of HELICS's, started before a slow federate joined,
    # which the clocks_start_together test now covers.)
    outage = OUTAGE.replace("450ms", "1450ms").replace("650ms", "2450ms")
    text = over_tcp(REAL + outage, realtime=True).replace('duration = "4s"', 'duration = "6s"')
    r = run_federation(text, tmp_path, NETLOOP, roles=("grid",), start=1.0, end=5.0)
    grid = r["got"]["grid"]
    assert [m for m, _ in grid] == [f"re:m{k}" for k in range(10)]
    res = r["results"]
    assert res["conservation"]["unaccounted"] == 0
    assert res["conservation"]["dropped"].get("link_down", 0) >= 1, res["conservation"]
    (pmu,) = res["endpoints"]
    assert (pmu["sent"], pmu["received"], pmu["lost_connection"]) == (10, 10, 0)
