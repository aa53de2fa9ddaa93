"""Tests of the reference benchmark's own logic (no root, no network): the
topology files it generates load in netloop, and the report finds capacities
and marks targets from the measurements, not from anything fixed.

    NETLOOP=target/debug/netloop python3 -m unittest discover -s bench -p 'test_*.py'
"""

import importlib.util
import os
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
                                    "remote_ns": [20.05e6, 20.055e6, 20.06e6]}]}},
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
        # 97 % at 100 pairs, 53 % at 200: the knee is 100.
        self.assertIn("Most pairs with the live flow at ≥ 95 %, up to its first drop below: netloop 100,", text)
        for png in ("rtt_boxplots.png", "mixed_traffic.png"):
            self.assertGreater(os.path.getsize(os.path.join(d, png)), 1000)


if __name__ == "__main__":
    unittest.main()
