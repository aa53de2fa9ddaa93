"""Tests of the reference benchmark's own logic (no root, no network): the
topology files it generates load in netloop, and the report finds capacities
and marks targets from the measurements, not from anything fixed.

    NETLOOP=target/debug/netloop python3 -m unittest discover -s bench -p 'test_*.py'
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402
import report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETLOOP = os.environ.get("NETLOOP", os.path.join(ROOT, "target", "debug", "netloop"))


def check(toml):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml)
    try:
        return subprocess.run([NETLOOP, "check", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)


@unittest.skipUnless(os.access(NETLOOP, os.X_OK), f"{NETLOOP} is not built (cargo build)")
class Topologies(unittest.TestCase):
    def test_every_experiment_path_loads(self):
        paths = [reference.Path(1), reference.Path(1, rate="1Gbps"),
                 reference.Path(1, forwarding_rate="50000pps"),
                 reference.Path(2, rate="1Gbps", mid_delay="300ms"),
                 reference.Path(2, rate="1Gbps", mid_rate="2Mbps", mid_delay="50ms", bg_pairs=40)]
        for p in paths:
            t = reference.netloop_topology(p, [("sh clients.sh", "700ms", True)], [("sh servers.sh", "0s", False)])
            r = check(t)
            self.assertEqual(r.returncode, 0, f"{vars(p)}:\n{r.stdout}{r.stderr}")

    def test_background_pairs_are_in_the_model(self):
        t = reference.netloop_topology(reference.Path(2, bg_pairs=7), [("true", "0s", True)], [])
        self.assertEqual(t.count('kind = "udp-cbr"'), 7)
        self.assertEqual(check(t).returncode, 0)

    def test_only_background_pairs_know_their_neighbours_from_the_start(self):
        # Like ns-3's point-to-point pairs, the simulated pairs resolve no
        # addresses; the other experiments' paths keep ARP.
        with_pairs = reference.netloop_topology(reference.Path(2, bg_pairs=7), [("true", "0s", True)], [])
        run = with_pairs.split("[[node]]")[0]
        self.assertIn("static_neighbours = true", run)
        without = reference.netloop_topology(reference.Path(2), [("true", "0s", True)], [])
        self.assertNotIn("static_neighbours", without)

    def test_background_pairs_start_at_phases_spread_over_one_interval(self):
        # 150 pairs sending every 4.44 ms: starts 1/150 s apart fell into two
        # phases (bursts of 75 packets at once). Spread, no two pairs share a
        # phase and the phases cover the interval evenly.
        t = reference.netloop_topology(reference.Path(2, bg_pairs=150), [("true", "0s", True)], [])
        starts = [int(x) for x in re.findall(r'start = "(\d+)ns"', t)]
        self.assertEqual(len(starts), 150)
        interval = 1000 * 8 / 1.8e6 * 1e9
        phases = sorted(round(s % interval) for s in starts)
        self.assertEqual(len(set(phases)), 150)
        gaps = [b - a for a, b in zip(phases, phases[1:])]
        self.assertLess(max(gaps) - min(gaps), 2, gaps)
        self.assertEqual(check(t).returncode, 0)

    def test_h2_address_matches_the_chain(self):
        # The same client commands must reach h2 on every system.
        for routers in (1, 2):
            t = reference.netloop_topology(reference.Path(routers), [("true", "0s", True)], [])
            self.assertIn(f'"{reference.Path(routers).h2()}/24"', t)


def section(name, e):
    """Renders one report section without its plot: (targets by name, text)."""
    r = report.Report({}, tempfile.mkdtemp())
    setattr(r, f"plot_{name}", lambda *a: None)
    getattr(r, name)(e)
    return {n: (measured, status) for n, measured, status in r.targets}, "\n".join(r.md)


def udp_row(system, pps, lost, sent=1000):
    return {"size": 64, "offered_pps": pps, "system": system,
            "runs": [{"sent": sent, "lost": lost, "seconds": 1.0, "boundary_lost": 0}]}


def rt(kept, p99=10e3, top=None, lost=0):
    """A netloop self-report as `slim` keeps it."""
    return {"kept_up": kept, "boundary_lost": lost, "input_latency": {"p99_ns": 7e3},
            "event_lateness": {"p50_ns": 2e3, "p99_ns": p99, "max_ns": top or 2 * p99}}


def udp_point(pps, kept, size=64):
    """A netloop capture point: one repeat per verdict in `kept`."""
    return {"size": size, "offered_pps": pps, "system": "netloop",
            "runs": [{"sent": pps, "lost": 0, "seconds": 1.0, "boundary_lost": 0, "kept_up": k, "report": rt(k)}
                     for k in kept]}


def mixed_point(pairs, bps, kept, system="netloop", late=None):
    """A mixed-traffic point: one repeat per verdict in `kept`; `late`,
    per repeat, (late events, of them held off)."""
    runs = [{"bps": bps, "report": rt(k)} for k in kept]
    for run, (n, held) in zip(runs, late or []):
        run["report"].update(late_events=n, late_held_off=held)
    return {"system": system, "pairs": pairs, "runs": runs}


def mixed(rows):
    return section("mixed", {"link": "2 Mbit/s, 50 ms", "bg_rate": "b", "nse": {"links": 150, "nodes": 300},
                             "rows": rows})


def table_row(text, first):
    """The cells of the Markdown table row that starts with `first`."""
    row = next(line for line in text.splitlines() if line.startswith(first))
    return [c.strip() for c in row.strip("|").split("|")]


class Options(unittest.TestCase):
    def test_mixed_pairs_are_whole_numbers_sorted_once(self):
        self.assertEqual(reference.parse_pairs("300, 0,150,300"), [0, 150, 300])
        for bad in ("150,-1", "1.5", "", "0,,3"):
            with self.assertRaises(ValueError):
                reference.parse_pairs(bad)

    def test_a_bad_mixed_pairs_option_is_named_before_anything_runs(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "reference.py"), "--only", "mixed",
                            "--mixed-pairs", "0,x"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--mixed-pairs '0,x': 'x' is not a whole number of pairs", r.stderr)


def wan_row(flows, one_s, parts, ns3_s=None):
    """A `bench speed --scenario wan` row: one partition's wall time, then
    (partitions, transport, wall time) of each cut run."""
    run = lambda w: {"median_wall_s": w, "packets_per_s": 1000 / w}  # noqa: E731
    return {"flows": flows, "netloop": run(one_s), "ns3": run(ns3_s) if ns3_s else None,
            "partitioned": [{"partitions": n, "transport": t, "netloop": run(w), "speedup_vs_one": one_s / w,
                             "efficiency": one_s / w / n} for n, t, w in parts]}


class Partitions(unittest.TestCase):
    def wan(self, rows, **extra):
        return section("partitions", {"sites": 64, "load_mbps": 2000, "duration_s": 2, "repeats": 3,
                                      "rows": rows, **extra})

    def test_targets_take_the_worst_flow_count_of_two_partitions(self):
        t, text = self.wan([wan_row(1000, 4.0, [(2, "threads", 2.0), (2, "mpi", 2.0), (4, "threads", 1.5)], 80.0),
                            wan_row(10000, 6.0, [(2, "threads", 3.75), (2, "mpi", 4.0)])])
        threads = t["Partitions: 2 threads ≥ 1.7× one partition on the larger network"]
        self.assertEqual(threads, ("1,000 flows 2.00×, 10,000 flows 1.60×", "**not met**"))
        ranks = t["Partitions: 2 MPI ranks ≥ 1.6× one partition on the larger network"]
        self.assertEqual(ranks, ("1,000 flows 2.00×, 10,000 flows 1.50×", "**not met**"))
        # Efficiency, the ratio to ns-3, and the anchors are in the text.
        self.assertIn("| 1,000 | 4 threads | 1.500 | 667 | 2.67× | 67 % | 53.33× |", text)
        self.assertIn("| 1,000 | ns-3 3.37 | 80.000 |", text)
        self.assertIn("Unison", text)
        self.assertIn("Shadow 2", text)

    def test_without_ranks_the_mpi_target_is_not_claimed(self):
        t, text = self.wan([wan_row(1000, 4.0, [(2, "threads", 2.0)])], mpi_note="no MPI ranks: no mpirun")
        self.assertEqual(t["Partitions: 2 threads ≥ 1.7× one partition on the larger network"][1], "**met**")
        self.assertEqual(t["Partitions: 2 MPI ranks ≥ 1.6× one partition on the larger network"],
                         ("not run", "n/a"))
        self.assertIn("no MPI ranks: no mpirun.", text)

    def test_a_failed_run_says_why(self):
        t, text = section("partitions", {"error": "boom"})
        self.assertIn("failed: boom", text)
        self.assertEqual(t, {})


def speed_row(flows, wall, ns3=None, base=None):
    """A `bench speed` row: netloop's median wall time, ns-3's and the
    baseline's (seconds, None when not run); 1000 packets each."""
    run = lambda w: {"median_wall_s": w, "packets_per_s": 1000 / w, "events_per_s": 4000 / w}  # noqa: E731
    return {"flows": flows, "netloop": run(wall), "ns3": run(ns3) if ns3 else None,
            "speedup": ns3 / wall if ns3 else None, "baseline": run(base) if base else None,
            "vs_baseline": base / wall if base else None}


class Speed(unittest.TestCase):
    def speed(self, rows, **extra):
        return section("speed", {"load_mbps": 500, "duration_s": 10, "repeats": 3, "rows": rows, **extra})

    def test_issue_17s_targets_take_the_worst_flow_count(self):
        t, text = self.speed([speed_row(1, 1.0, ns3=30.0, base=5.5), speed_row(10000, 2.0, ns3=250.0, base=9.0)])
        self.assertEqual(t["Simulation speed: ≥ 2× ns-3 on the dumbbell, every flow count"],
                         ("1 flows 30.0×, 10,000 flows 125.0×", "**met**"))
        self.assertEqual(t["Simulation speed: ≥ 100× ns-3 on the dumbbell, every flow count (issue 17)"],
                         ("1 flows 30.0×, 10,000 flows 125.0×", "**not met**"))
        self.assertEqual(t["Simulation speed: ≥ 5× the baseline's engine, same run, every flow count (issue 17)"],
                         ("1 flows 5.5×, 10,000 flows 4.5×", "**not met**"))
        self.assertEqual(table_row(text, "| 10,000 |")[6:], ["125.00×", "111", "4.50×"])

    def test_without_a_baseline_the_report_says_why_and_claims_nothing(self):
        why = "bench/baseline/build.sh failed: no commit 'efdea06' in /x (a shallow clone? git fetch --unshallow)"
        t, text = self.speed([speed_row(1, 1.0, ns3=300.0)], baseline_note=why)
        self.assertEqual(t["Simulation speed: ≥ 5× the baseline's engine, same run, every flow count (issue 17)"],
                         (why, "n/a"))
        self.assertEqual(t["Simulation speed: ≥ 100× ns-3 on the dumbbell, every flow count (issue 17)"][1],
                         "**met**")
        self.assertIn(f"No baseline: {why}.", text)
        self.assertEqual(table_row(text, "| 1 |")[7:], ["n/a", "n/a"])

    def test_a_baseline_that_fails_leaves_the_run_without_it(self):
        # A stand-in netloop: fails when asked for a baseline, else writes
        # an empty result where --json says.
        d = tempfile.mkdtemp()
        fake = os.path.join(d, "netloop")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\ncase "$*" in *--baseline*) echo "boom: the baseline broke" >&2; exit 1;; esac\n'
                    'while [ $# -gt 0 ]; do [ "$1" = --json ] && echo \'{"rows": []}\' > "$2"; shift; done\n')
        os.chmod(fake, 0o755)
        saved = reference.NETLOOP, reference.baseline_build
        reference.NETLOOP, reference.baseline_build = fake, lambda: ("/x/netloop-base", None)
        try:
            res = reference.exp_speed(reference.PROFILES["quick"], 1, d)
        finally:
            reference.NETLOOP, reference.baseline_build = saved
        self.assertEqual(res["rows"], [])
        self.assertEqual(res["baseline_note"], "the run with the baseline failed: boom: the baseline broke")

    def test_a_baseline_missing_at_one_flow_count_claims_nothing(self):
        t, _ = self.speed([speed_row(1, 1.0, base=6.0), speed_row(100, 1.0)])
        self.assertEqual(t["Simulation speed: ≥ 5× the baseline's engine, same run, every flow count (issue 17)"],
                         ("1 flows 6.0×; no ratio for [100]", "n/a"))


class Rti(unittest.TestCase):
    @staticmethod
    def rtt(system, ms, hz=None, **extra):
        return {"system": system, "test": "round-trip", "payload": 8, "endpoints": 1, "rtt_p50_ms": ms,
                "rtt_p99_ms": 2 * ms, "rate_hz": 1000 / ms, "rate_limit_hz": hz, "lost": 0, "bad": 0, "sent": 100, "returned": 100,
                **extra}

    @staticmethod
    def tput(system, rate, payload=64):
        return {"system": system, "test": "throughput", "payload": payload, "endpoints": 1, "sent": 100,
                "received": 100, "sender_rate": 10 * rate, "receiver_rate": rate, "lost": 0, "bad": 0}

    def test_targets_come_from_the_measurements(self):
        import rti
        e = {"systems": [self.rtt("helics tcp", 1.0), self.rtt("netloop ideal tcp", 1.1, netloop={"unaccounted": 0}),
                         self.rtt("helics inproc", 0.2), self.rtt("netloop ideal inproc", 0.5),
                         self.rtt("netloop wan tcp", 4.0, lost=3)],
             "payload": [], "endpoints": [],
             "throughput": [self.tput("helics tcp", 1000), self.tput("netloop ideal tcp", 900),
                            self.tput("helics tcp", 1000, 512), self.tput("netloop ideal tcp", 700, 512)]}
        t = rti.targets(e)
        self.assertTrue(t["rtt_ratio_tcp"]["met"])
        self.assertFalse(t["rtt_ratio_inproc"]["met"])
        self.assertAlmostEqual(t["rtt_ratio_inproc"]["value"], 2.5)
        self.assertEqual(t["rtt_best_ms"]["system"], "netloop ideal inproc")
        self.assertFalse(t["rtt_best_ms"]["met"])
        self.assertAlmostEqual(t["throughput_ratio_tcp_min"]["value"], 0.7)
        self.assertFalse(t["throughput_ratio_tcp_min"]["met"])
        # The WAN's losses are the model's; nothing else lost.
        self.assertEqual(t["outside_model"], 0)
        e["systems"].append(self.rtt("netloop lan tcp", 2.0, lost=1))
        self.assertEqual(rti.targets(e)["outside_model"], 1)
        targets, text = section("rti", e)
        self.assertEqual(targets["RTI: round trip through netloop's ideal network ≤ 1.2× HELICS alone (tcp)"],
                         ("1.10×", "**met**"))
        self.assertEqual(targets["RTI: no message lost or duplicated outside the model"][1], "**not met**")
        self.assertIn("| helics tcp | 1.000 | 1000 | failed |", text)

    def test_the_models_delay_counts_every_fragment(self):
        import rti
        # 8 bytes: one minimum frame (60 + 24 bytes) at 1 Gbit/s, and 50 us.
        self.assertEqual(rti.one_way_ns("lan", 8), 50_000 + 672)
        # 3 008 bytes of UDP: 1 480 + 1 480 + 48 bytes of IP payload.
        self.assertEqual(rti.one_way_ns("lan", 3000), 50_000 + 2 * 12_256 + 944)
        self.assertEqual(rti.one_way_ns("ideal", 65000), 0)

    def test_over_tcp_every_loss_is_outside_the_model(self):
        import rti
        e = {"systems": [self.rtt("netloop wan tcp", 4.0, lost=3, net="wan", protocol="udp")],
             "payload": [], "endpoints": [], "throughput": [],
             "reliable": [self.rtt("netloop wan tcp reliable", 40.0, lost=2, net="wan", protocol="tcp"),
                          self.rtt("netloop lan tcp reliable", 1.0, net="lan", protocol="tcp",
                                   sim_rtt_at_least_model=False)]}
        t = rti.targets(e)
        # The WAN's datagrams may be lost; a message over TCP may not.
        self.assertEqual(t["outside_model"], 2)
        # A simulated round trip over TCP shorter than the model's is wrong.
        self.assertFalse(t["sim_exact"])
        (title, header, rows), = [x for x in rti.tables(e) if x[0].startswith("Reliable")]
        self.assertIn("netloop wan tcp reliable", header)

    def test_the_models_delay_over_tcp_is_one_segment_behind_headers(self):
        import rti
        # 8 bytes and the 4-byte length behind 20 + 20 + 14 bytes of
        # headers: a 66-byte frame, 90 with framing, at 1 Gbit/s.
        self.assertEqual(rti.one_way_tcp_ns("lan", 8), 50_000 + 720)
        self.assertIsNone(rti.one_way_tcp_ns("lan", 1457), "past one segment: no single figure")
        self.assertEqual(rti.name(rti.S("tcp", "wan", proto="tcp")), "netloop wan tcp reliable")
        t = rti.topology("lan", 2, "tcp", None, "10s", proto="tcp")
        self.assertEqual(t.count('protocol = "tcp"'), 4)
        self.assertEqual(check(t).returncode, 0)

    def test_types_and_values_shape_the_messages_and_the_rates(self):
        import rti
        # 8 values of 256 bytes, each with its length, behind the sequence
        # number: past one Ethernet frame, as the seed meant it to be.
        self.assertEqual(rti.message_bytes(256, 8), 8 + 8 * 260)
        self.assertEqual(rti.message_bytes(256, None), 256)
        # 25 types of 4 instances: 100 pairs, 10 rounds in 0.5 s.
        n = 25 * 4 * 10
        d = {"sender": {"sent": n, "returned": n, "lost": 0, "late": 0, "bad": 0, "rtt_ns": [1_000_000] * n,
                        "sim_rtt_ns": [2 * rti.one_way_ns("lan", rti.message_bytes(256, 8)) + 2] * n,
                        "elapsed_ns": 500_000_000, "start_epoch_ns": 0},
             "returnee": {"received": n, "malformed": 3, "first_epoch_ns": 0, "last_epoch_ns": 1, "bytes": 0}}
        p = rti.finish(d, rti.S("tcp", "lan"), "round-trip", 256, 4, 10, types=25, values=8)
        self.assertEqual((p["pairs"], p["endpoints"], p["types"], p["values"]), (100, 4, 25, 8))
        self.assertAlmostEqual(p["rate_hz"], 20.0)
        # The model's delay is that of the whole message of values (two
        # fragments), and the returnee's malformed messages count as bad.
        self.assertEqual(p["sim_rtt_model_ns"], 2 * rti.one_way_ns("lan", 2088))
        self.assertTrue(p["sim_rtt_within_queue"])
        self.assertEqual(p["bad"], 3)
        e = {"systems": [], "payload": [], "endpoints": [], "throughput": [], "stress": [p]}
        self.assertEqual(rti.targets(e)["outside_model"], 3)
        # 100 pairs' messages queue for the LAN: the last waits behind 99,
        # each two frames (1 480 + 616 bytes of IP payload: 12 304 and
        # 5 392 ns at 1 Gbit/s with headers and framing).
        d["sender"]["sim_rtt_ns"][-1] += 99 * 17_696
        q = rti.finish(d, rti.S("tcp", "lan"), "round-trip", 256, 4, 10, types=25, values=8)
        self.assertEqual(q["sim_rtt_queue_max_ns"], 99 * (12_304 + 5_392))
        self.assertTrue(q["sim_rtt_within_queue"])
        d["sender"]["sim_rtt_ns"][-1] += 10 ** 6
        q = rti.finish(d, rti.S("tcp", "lan"), "round-trip", 256, 4, 10, types=25, values=8)
        self.assertFalse(q["sim_rtt_within_queue"])
        e2 = {"systems": [], "payload": [], "endpoints": [], "throughput": [], "stress": [q]}
        self.assertFalse(rti.targets(e2)["sim_exact"])
        (title, header, rows), = [x for x in rti.tables(e) if "stress" in x[0]]
        # Columns: HELICS alone, the LAN best-effort, reliable; 20 rounds/s
        # of 100 pairs returned 2 000 messages a second.
        self.assertEqual(rows, [["4", "failed", "1.000 (2000/s)", "failed"]])

    def test_the_topology_names_every_endpoint_pair(self):
        import rti
        t = rti.topology("wan", 3, "tcp", 4242, "10s", " --maxsize=262144")
        self.assertEqual(t.count("[[endpoint]]"), 6)
        self.assertIn('to = "nb2"', t)
        self.assertIn('federate = "ret2"', t)
        self.assertIn("loss = 0.01", t)
        self.assertIn('init = "--brokerport=4242 --maxsize=262144"', t)
        r = check(t)
        self.assertEqual(r.returncode, 0, r.stderr)


class Capacity(unittest.TestCase):
    def test_capacity_stops_at_the_first_lossy_rate(self):
        # 3 lost in 1000 at the third rate breaks the ladder; a clean
        # point above it is noise and must not count.
        rows = [udp_row("kernel", p, 0, sent=p) for p in (100, 200, 400, 800)]
        rows += [udp_row("netloop", 100, 0, 100), udp_row("netloop", 200, 0, 200),
                 udp_row("netloop", 400, 3, 1000), udp_row("netloop", 800, 0, 800)]
        t, text = section("capture", {"rows": rows})
        # The kernel never lost: its capacity is only known to be above 800.
        self.assertIn("kernel ≥ 800 pps, netloop 200 pps", text)
        measured, status = t["64-byte UDP: highest rate with < 0.1 % loss ≥ 0.9× the kernel's"]
        self.assertIn("0.25×", measured)
        self.assertEqual(status, "**not met**")

    def test_boundary_loss_below_the_kernels_rate_fails_the_target(self):
        rows = [udp_row("kernel", 100, 0, 100), udp_row("netloop", 100, 0, 100)]
        rows[1]["runs"][0]["boundary_lost"] = 2
        t, _ = section("capture", {"rows": rows})
        self.assertEqual(t["64-byte UDP: zero frames lost inside netloop below the kernel's rate"][1], "**not met**")


def sitl(rows):
    return section("sitl", {"rows": rows, "theoretical_1g_bps": reference.GIGABIT_TCP,
                            "opnet_default_mbps": 79.5, "opnet_tuned_mbps": 94.4})


class Targets(unittest.TestCase):
    def test_sitl_ratios_come_from_the_measurements(self):
        def row(system, bps, scen="unlimited"):
            return {"scenario": scen, "streams": 1, "system": system, "runs": [{"bps": bps}]}
        t, _ = sitl([row("kernel", 4e9), row("netloop", 2.1e9), row("netloop-steer", 1.9e9), row("ns-3", 0.2e9),
                     row("netloop", 0.935e9, "1 Gbit/s links"), row("netloop-steer", 0.94e9, "1 Gbit/s links")])
        t = {name: status for name, (_, status) in t.items()}
        self.assertEqual(t["TCP, one router, unlimited: ≥ 0.5× the kernel (netloop)"], "**met**")
        self.assertEqual(t["TCP, one router, unlimited: ≥ 0.5× the kernel (netloop --steer)"], "**not met**")
        self.assertEqual(t["TCP, one router, unlimited: ≥ 10× ns-3 (netloop)"], "**met**")
        self.assertEqual(t["TCP, one router, unlimited: ≥ 10× ns-3 (netloop --steer)"], "**not met**")
        self.assertEqual(t["iperf3 over modelled 1 Gbit/s: ≥ 99 % of 941.48 Mbit/s (netloop)"], "**met**")

    def test_a_missing_system_is_na_not_met(self):
        t, text = sitl([{"scenario": "unlimited", "streams": 1, "system": "netloop", "runs": [{"bps": 1e9}]},
                        {"scenario": "unlimited", "streams": 1, "system": "ns-3", "runs": [{"na": "no emu"}]}])
        self.assertEqual(t["TCP, one router, unlimited: ≥ 10× ns-3 (netloop)"][1], "n/a")
        self.assertIn("n/a: no emu", text)


def delay_result(netloop_remote):
    return {"expected_model_ns": 20e6, "runs": {
        "kernel": [{"local_ns": [20e3, 30e3, 25e3], "remote_ns": [25e3, 26e3, 27e3]}],
        "netloop": [{"local_ns": [40e3, 50e3, 45e3], "remote_ns": netloop_remote}]}}


class Delay(unittest.TestCase):
    def targets(self, e):
        return {name: status for name, (_, status) in section("delay", e)[0].items()}

    def test_early_is_as_wrong_as_late(self):
        # 20 ms − 100 µs: the model's delay was not kept, even though
        # the round trip is shorter than expected.
        t = self.targets(delay_result([19.9e6, 19.9e6, 19.9e6]))
        self.assertEqual(t["Round trip over 10 ms: median within 30 µs of 20 ms + the kernel's RTT"],
                         "**not met**")

    def test_a_failed_probe_is_na(self):
        t = self.targets(delay_result([]))
        self.assertEqual(t["Round trip over 10 ms: standard deviation < 20 µs"], "n/a")


class Opcua(unittest.TestCase):
    def test_share_of_the_wire_limit_comes_from_netloops_byte_count(self):
        # 1 250 wire bytes a request at 1 Mbit/s: 100 requests/s at most.
        e = {"concurrency": 8, "value_bytes": 1000, "overhead": 24, "rows": [
            {"rate": "1Mbps", "rate_bps": 1e6, "system": "netloop", "runs": [{"rps": 90.0, "wire_bytes_per_request": 1250.0}]},
            {"rate": "1Mbps", "rate_bps": 1e6, "system": "kernel", "runs": [{"rps": 50.0}]},
            {"rate": "1Mbps", "rate_bps": 1e6, "system": "ns-3", "runs": [{"error": "ns-3 fell behind"}]},
        ]}
        _, text = section("opcua", e)
        row = next(line for line in text.splitlines() if line.startswith("| 1 Mbit/s"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[1:7], ["1,250", "100.0", "50.0", "50 %", "90.0", "90 %"])
        self.assertIn("fell behind", cells[7])

    def test_kept_up_capacity_and_marks(self):
        def row(rate, bps, kept):
            return {"rate": rate, "rate_bps": bps, "system": "netloop",
                    "runs": [{"rps": 90.0, "wire_bytes_per_request": 1250.0, "report": rt(kept)}]}
        e = {"concurrency": 8, "value_bytes": 1000, "overhead": 24,
             "rows": [row("1Mbps", 1e6, True), row("10Mbps", 1e7, False), row("100Mbps", 1e8, True)]}
        _, text = section("opcua", e)
        self.assertEqual(table_row(text, "| 1 Mbit/s")[5], "90.0")
        self.assertEqual(table_row(text, "| 10 Mbit/s")[5], "90.0†")
        self.assertIn("kept up at the highest rate tried): 1.0 Mbit/s.", text)


class KeptUpCapacity(unittest.TestCase):
    def test_ladder_ends_at_the_first_point_that_fails(self):
        self.assertEqual(report.ladder([(400, True), (100, True), (200, True)]), (400, True))
        # A point that held above one that failed does not count.
        self.assertEqual(report.ladder([(100, True), (200, True), (400, False), (800, True)]), (200, False))
        self.assertEqual(report.ladder([(100, False), (200, True)]), (None, False))

    def test_capture_needs_every_repeat_at_every_rate(self):
        # 2 of 3 repeats kept up at 400: a majority is not enough, and the
        # clean 800 above it does not count either.
        rows = [udp_point(100, [True] * 3), udp_point(200, [True] * 3), udp_point(400, [True, False, True]),
                udp_point(800, [True] * 3)]
        _, text = section("capture", {"rows": rows})
        self.assertIn("kept up; ≥: it never fell behind within the ladder): 200 pps.", text)
        rows[2] = udp_point(400, [True] * 3)
        _, text = section("capture", {"rows": rows})
        self.assertIn("kept up; ≥: it never fell behind within the ladder): ≥ 800 pps.", text)
        rows[0] = udp_point(100, [False, True, True])
        _, text = section("capture", {"rows": rows})
        self.assertIn("): none (it fell behind at the lowest rate).", text)

    def test_capture_capacity_is_per_frame_size(self):
        rows = [udp_point(100, [True]), udp_point(200, [False]),
                udp_point(100, [True], 1400), udp_point(200, [True], 1400)]
        r = report.Report({}, tempfile.mkdtemp())
        r.plot_capture = lambda *a: None
        r.capture({"rows": rows})
        self.assertEqual(dict(r.capacity), {"Capture, 64-byte frames: the highest offered rate": "100 pps",
                                            "Capture, 1400-byte frames: the highest offered rate": "≥ 200 pps"})

    def test_a_failed_repeat_counts_as_fallen_behind(self):
        rows = [udp_point(100, [True]), udp_point(200, [True])]
        rows[1]["runs"].append({"error": "netloop run did not finish (it fell behind real time)"})
        _, text = section("capture", {"rows": rows})
        self.assertIn("the ladder): 100 pps.", text)

    def test_mixed_needs_the_live_flow_and_keeping_up(self):
        base = [mixed_point(0, 1.9e6, [True, True]), mixed_point(100, 1.85e6, [True, True])]
        # 200 pairs: the flow is whole but one repeat fell behind.
        t, text = mixed(base + [mixed_point(200, 1.9e6, [True, False]), mixed_point(300, 1.9e6, [True, True])])
        self.assertIn("*and* every repeat kept up; ≥: it held to the ladder's top): 100 pairs.", text)
        # 200 pairs: on time, but the flow is at 89 %.
        _, text = mixed(base + [mixed_point(200, 1.7e6, [True, True]), mixed_point(300, 1.9e6, [True, True])])
        self.assertIn("ladder's top): 100 pairs.", text)
        # The flow-only knee is unchanged by keeping up.
        self.assertIn("up to its first drop below: netloop 100,", text)
        self.assertEqual(t["Mixed: the live flow ≥ 95 % and kept up with ≥ 2 000 simulated pairs (netloop)"],
                         ("kept-up capacity 100 pairs", "**not met**"))
        t, text = mixed([mixed_point(n, 1.9e6, [True]) for n in (0, 1000, 2000)])
        self.assertIn("ladder's top): ≥ 2,000 pairs.", text)
        self.assertEqual(t["Mixed: the live flow ≥ 95 % and kept up with ≥ 2 000 simulated pairs (netloop)"][1],
                         "**met**")
        t, text = mixed([mixed_point(0, 1.9e6, [False]), mixed_point(50, 1.9e6, [True])])
        self.assertIn("ladder's top): none (not even with the fewest pairs).", text)

    def test_mixed_has_a_capacity_but_for_the_machine_beside_the_target(self):
        # 0 pairs: one repeat late, all of it held off; 500: late for work
        # in one repeat (3 of 40 events not held off); 1000 clean.
        rows = [mixed_point(0, 1.9e6, [True, False], late=[(0, 0), (12, 12)]),
                mixed_point(500, 1.9e6, [False, False], late=[(40, 40), (40, 37)]),
                mixed_point(1000, 1.9e6, [True])]
        t, text = mixed(rows)
        self.assertIn("ladder's top): none (not even with the fewest pairs).", text)
        self.assertIn("none while busy with the model): 0 pairs.", text)
        self.assertEqual(t["Mixed: the live flow ≥ 95 % and kept up with ≥ 2 000 simulated pairs (netloop)"],
                         ("kept-up capacity none (not even with the fewest pairs)", "**not met**"))
        # Every late event held off at 500 too: the ladder holds to its top.
        rows[1] = mixed_point(500, 1.9e6, [False, False], late=[(40, 40), (3, 3)])
        _, text = mixed(rows)
        self.assertIn("none while busy with the model): ≥ 1,000 pairs.", text)
        # A repeat without the counts (an older build's) does not count.
        rows[1] = mixed_point(500, 1.9e6, [False])
        _, text = mixed(rows)
        self.assertIn("none while busy with the model): 0 pairs.", text)
        # Nor does a live flow under 95 %.
        rows[1] = mixed_point(500, 1.7e6, [True])
        _, text = mixed(rows)
        self.assertIn("none while busy with the model): 0 pairs.", text)
        # Nor frames that crossed between partitions late, which no hold
        # explains.
        rows[1] = mixed_point(500, 1.9e6, [False], late=[(3, 3)])
        rows[1]["runs"][0]["report"]["partitions"] = {"per_partition": [{"late_frames_in": 0},
                                                                          {"late_frames_in": 2}]}
        _, text = mixed(rows)
        self.assertIn("none while busy with the model): 0 pairs.", text)
        rows[1]["runs"][0]["report"]["partitions"]["per_partition"][1]["late_frames_in"] = 0
        _, text = mixed(rows)
        self.assertIn("none while busy with the model): ≥ 1,000 pairs.", text)

    def test_mixed_with_partitions_has_its_own_capacity_and_the_target_takes_the_best(self):
        rows = [mixed_point(0, 1.9e6, [True]), mixed_point(1000, 1.9e6, [False])]
        rows += [mixed_point(n, 1.9e6, [True], "netloop-p2") for n in (0, 1000, 2000)]
        t, text = mixed(rows)
        self.assertIn("Kept-up capacity of netloop (the most", text)
        self.assertIn("ladder's top): 0 pairs.", text)
        self.assertIn("Kept-up capacity of netloop, 2 partitions (the most", text)
        self.assertIn("ladder's top): ≥ 2,000 pairs.", text)
        self.assertIn("`netloop run --partitions 2`", text)
        self.assertEqual(t["Mixed: the live flow ≥ 95 % and kept up with ≥ 2 000 simulated pairs (netloop)"],
                         ("kept-up capacity ≥ 2,000 pairs (netloop, 2 partitions)", "**met**"))
        # Timer lateness of a partitioned run is its worst partition's.
        run = rows[-1]["runs"][0]
        run["report"]["partitions"] = {"per_partition": [
            {"event_lateness": {"p50_ns": 1000, "p99_ns": 5000, "max_ns": 90000}},
            {"event_lateness": {"p50_ns": 3000, "p99_ns": 70000, "max_ns": 20000}}]}
        _, text = mixed(rows)
        self.assertEqual(table_row(text, "| 2000 |")[4], "3.0 µs / 70.0 µs / 90.0 µs")
        # The partitioned rows fell behind: the one partition's figure stands.
        rows = [mixed_point(0, 1.9e6, [True]), mixed_point(150, 1.9e6, [True])]
        rows += [mixed_point(n, 1.9e6, [False], "netloop-p2") for n in (0, 150)]
        t, _ = mixed(rows)
        self.assertEqual(t["Mixed: the live flow ≥ 95 % and kept up with ≥ 2 000 simulated pairs (netloop)"],
                         ("kept-up capacity ≥ 150 pairs", "**not met**"))

    def test_sitl_says_per_scenario_whether_every_repeat_kept_up(self):
        _, text = sitl([{"scenario": "unlimited", "streams": 1, "system": "netloop",
                         "runs": [{"bps": 1e9, "report": rt(True)}, {"bps": 1e9, "report": rt(False)}]},
                        {"scenario": "1 Gbit/s links", "streams": 1, "system": "netloop",
                         "runs": [{"bps": 9.4e8, "report": rt(True)}, {"bps": 9.4e8, "report": rt(True)}]}])
        self.assertIn("Kept up in every repeat, per scenario (1 stream): netloop: unlimited no, 1 Gbit/s links yes.",
                      text)


class FellBehind(unittest.TestCase):
    def test_a_throughput_from_a_run_that_fell_behind_is_marked(self):
        def row(system, verdicts):
            return {"scenario": "unlimited", "streams": 1, "system": system,
                    "runs": [{"bps": 1e9, "report": rt(k)} for k in verdicts]}
        t, text = sitl([row("kernel", []), row("netloop", [True, False, True]), row("netloop-steer", [True, True])])
        self.assertTrue(table_row(text, "| unlimited | 1 | netloop |")[3].endswith("†"))
        self.assertNotIn("†", table_row(text, "| unlimited | 1 | netloop --steer |")[3])
        self.assertIn(report.BEHIND_NOTE, text)
        self.assertIn("1.00 Gbit/s†", t["TCP, one router, unlimited: ≥ 10× ns-3 (netloop)"][0])
        self.assertNotIn("†", t["TCP, one router, unlimited: ≥ 10× ns-3 (netloop --steer)"][0])

    def test_no_mark_without_a_run_that_fell_behind(self):
        # A failed repeat gave no figure, and a report of an older build or
        # of another system says nothing: neither marks the figure.
        _, text = sitl([{"scenario": "unlimited", "streams": 1, "system": "netloop",
                         "runs": [{"bps": 1e9, "report": rt(True)}, {"error": "x"}, {"bps": 1e9, "report": None}]},
                        {"scenario": "unlimited", "streams": 1, "system": "ns-3",
                         "runs": [{"bps": 1e8, "report": {"lag_us": {"p99": 300}}}]}])
        self.assertNotIn("†", text)

    def test_capture_and_mixed_mark_their_figures(self):
        rows = [udp_point(100, [True]), udp_point(200, [True, False])]
        _, text = section("capture", {"rows": rows})
        self.assertEqual(table_row(text, "| 100 |")[0:2], ["100", "100"])
        self.assertEqual(table_row(text, "| 200 |")[1], "200†")
        # The loss capacity came from the point that fell behind.
        self.assertIn("netloop ≥ 200 pps†", text)
        _, text = mixed([mixed_point(0, 1.9e6, [True]), mixed_point(50, 1.9e6, [False])])
        self.assertEqual(table_row(text, "| 0 / 0 |")[2], "1.9 Mbit/s")
        self.assertEqual(table_row(text, "| 50 / 100 |")[2], "1.9 Mbit/s†")


class KeepingUpColumns(unittest.TestCase):
    def test_columns_from_the_self_reports(self):
        runs = [{"bps": 1, "report": rt(True, 10e3, 300e3, lost=0)}, {"bps": 1, "report": rt(False, 30e3, 2e6, 5)},
                {"bps": 1, "report": rt(True, 20e3, 100e3)}]
        # Medians of p50 and p99, the largest max, per-repeat verdicts and losses.
        self.assertEqual(report.rt_cells(runs), ["yes/no/yes", "2.0 µs / 20.0 µs / 2.000 ms", "7.0 µs", "0/5/0"])

    def test_older_results_show_dashes(self):
        # Capture points kept only kept_up and boundary_lost; failed runs
        # keep nothing.
        old = [{"sent": 1, "lost": 0, "seconds": 1.0, "boundary_lost": 3, "kept_up": True}, {"error": "x"}]
        self.assertEqual(report.rt_cells(old), ["yes/—", "—", "—", "3/—"])
        self.assertEqual(report.rt_cells([{"bps": 1, "report": {"kept_up": False}}]), ["no", "—", "—", "—"])
        # Late events put down to the CPU being taken are said so.
        held = {"kept_up": False, "late_events": 85, "late_held_off": 80}
        self.assertEqual(report.rt_cells([{"bps": 1, "report": held}])[0], "no (80 of 85 held off)")
        held["late_held_off"] = 0
        self.assertEqual(report.rt_cells([{"bps": 1, "report": held}])[0], "no")
        self.assertEqual(report.rt_cells([{"na": "not run"}]), ["—"] * 4)

    def test_keep_up_targets(self):
        ok = {"bps": 1, "report": rt(True, 20e3)}
        self.assertEqual(report.keep_verdict([ok, ok])[1], True)
        self.assertEqual(report.keep_verdict([ok, {"bps": 1, "report": rt(True, 60e3)}])[1], False)
        self.assertEqual(report.keep_verdict([ok, {"bps": 1, "report": rt(False, 20e3)}])[1], False)
        self.assertEqual(report.keep_verdict([ok, {"error": "did not finish"}])[1], False)
        # Late by verdict, but only the p99 counts for a saturated run.
        self.assertEqual(report.keep_verdict([{"bps": 1, "report": rt(False, 90e3)}], 100e3, kept=False)[1], True)
        # An older build's report has no lateness, or there is no report:
        # nothing says either way.
        self.assertIsNone(report.keep_verdict([{"sent": 1, "kept_up": True}])[1])
        self.assertIsNone(report.keep_verdict([ok, {"bps": 1}])[1])
        self.assertIsNone(report.keep_verdict([])[1])

    def test_the_committed_results_still_render(self):
        # Written before the keeping-up columns: every field they lack shows
        # as a dash.
        with open(os.path.join(ROOT, "bench", "results", "results.json")) as f:
            res = json.load(f)
        for name, e in res["experiments"].items():
            _, text = section(name, e)
            if name == "speed":
                self.assertIn("| 1 | ", text)
            elif name != "delay" or "netloop" in e["runs"]:
                self.assertIn("netloop kept up", text, name)


class Sources(unittest.TestCase):
    def test_each_experiment_keeps_the_run_it_came_from(self):
        old = {"started": "t1", "machine": {"netloop_commit": "b"}, "command": "cmd1",
               "merged_from": {"started": "t0", "kept": ["speed"], "machine": {"netloop_commit": "a"}}}
        # Results from before there were sources: merged_from says where a
        # kept experiment came from; the others are the run's own.
        self.assertEqual(reference.source_of(old, "speed"), {"started": "t0", "commit": "a", "command": None})
        self.assertEqual(reference.source_of(old, "capture"), {"started": "t1", "commit": "b", "command": "cmd1"})
        # Recorded sources win (a merge of a merge keeps the first run's).
        old["sources"] = {"speed": {"started": "tx", "commit": "x", "command": "c"}}
        self.assertEqual(reference.source_of(old, "speed")["started"], "tx")


class WholeReport(unittest.TestCase):
    def test_report_and_plots_from_a_results_file(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("matplotlib is not installed (pip install matplotlib)")
        res = {"profile": "quick", "repeats": 1, "started": "t", "wall_s": 60,
               "machine": {"cpus": 2, "cpu": "x", "mem_mib": 1024, "kernel": "k", "netloop_commit": "c",
                           "ns3": "3.37", "iperf3": "iperf 3"},
               "experiments": {
                   "delay": {"expected_model_ns": 20e6, "runs": {
                       "kernel": [{"local_ns": [20e3, 30e3, 25e3], "remote_ns": [25e3, 26e3, 27e3]}],
                       "netloop": [{"local_ns": [40e3, 50e3, 45e3],
                                    "remote_ns": [20.05e6, 20.055e6, 20.06e6]}]},
                             "wakeup": {"gap_ns": 10e6, "cases": [
                                 {"case": "far rt", "waker_cpu": 0, "sleeper_cpu": 1, "sleeper_class": "fifo",
                                  "p50_ns": 50e3, "p99_ns": 90e3},
                                 {"case": "far normal", "waker_cpu": 0, "sleeper_cpu": 1,
                                  "sleeper_class": "normal", "p50_ns": 60e3, "p99_ns": 95e3},
                                 {"case": "near rt", "waker_cpu": 0, "sleeper_cpu": 0, "sleeper_class": "fifo",
                                  "p50_ns": 20e3, "p99_ns": 30e3}]}},
                   "mixed": {"link": "2 Mbit/s, 50 ms", "bg_rate": "b", "nse": {"links": 150, "nodes": 300},
                             "rows": [{"system": "netloop", "pairs": 0, "runs": [{"bps": 1.9e6}]},
                                      {"system": "netloop", "pairs": 100, "runs": [{"bps": 1.85e6}]},
                                      {"system": "netloop", "pairs": 200, "runs": [{"bps": 1.0e6}]}]}}}
        d = tempfile.mkdtemp()
        report.write(res, d)
        with open(os.path.join(d, "RESULTS.md")) as f:
            text = f.read()
        # 20.055 ms median − 20 ms − the kernel's 26 µs = 29 µs: within 30.
        self.assertIn("| Round trip over 10 ms: median within 30 µs of 20 ms + the kernel's RTT | 29.0 µs", text)
        # The kernel's 25 µs local ping plus two wake-ups: 2 × 20 µs on a
        # busy CPU, 50 + 60 µs across CPUs.
        self.assertIn("plus two wake-ups (medians): 65.0 µs (2.60× the kernel's) if both found their CPU busy, "
                      "135.0 µs (5.40×) if both cross to an idle CPU", text)
        self.assertIn("netloop measured 45.0 µs (1.80×)", text)
        # 97 % at 100 pairs, 53 % at 200: the knee is 100.
        self.assertIn("Most pairs with the live flow at ≥ 95 %, up to its first drop below: netloop 100,", text)
        # The synthetic runs carry no self-report: no verdict, no capacity.
        self.assertIn("| Mixed: the most simulated pairs with the live flow ≥ 95 % and kept up | none", text)
        for png in ("rtt_boxplots.png", "mixed_traffic.png"):
            self.assertGreater(os.path.getsize(os.path.join(d, png)), 1000)
        # Without the command it ran with (older results), the profile's.
        self.assertIn("Command: `sudo bench/run --profile quick`", text)
        # Merged with an earlier run of another build: both builds are named.
        res["merged_from"] = {"started": "t0", "kept": ["delay"], "machine": dict(res["machine"], netloop_commit="b")}
        report.write(res, d)
        with open(os.path.join(d, "RESULTS.md")) as f:
            text = f.read()
        self.assertIn("merges two runs of the same profile (netloop b and c): delay from the run started t0 at b, "
                      "and mixed rerun", text)
        # With it: exactly what ran.
        res["command"] = "sudo bench/run --only mixed --mixed-pairs 0,50 --merge"
        report.write(res, d)
        with open(os.path.join(d, "RESULTS.md")) as f:
            self.assertIn("Command of this part: `sudo bench/run --only mixed --mixed-pairs 0,50 --merge`", f.read())
        # Each part's own run, where the results record it (merges of
        # merges keep them apart).
        res["sources"] = {"delay": {"started": "t0", "commit": "a", "command": None},
                          "mixed": {"started": "t", "commit": "c", "command": "sudo bench/run --only mixed"}}
        report.write(res, d)
        with open(os.path.join(d, "RESULTS.md")) as f:
            text = f.read()
        self.assertIn("- delay: the run started t0 at netloop a\n", text)
        self.assertIn("- mixed: the run started t at netloop c, `sudo bench/run --only mixed`", text)
        del res["sources"]
        res["merged_from"]["machine"]["netloop_commit"] = "c"
        report.write(res, d)
        with open(os.path.join(d, "RESULTS.md")) as f:
            self.assertIn("(the same netloop build): delay from the run started t0, and", f.read())


if __name__ == "__main__":
    unittest.main()
