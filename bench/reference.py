#!/usr/bin/env python3
"""The reference benchmark: the seeds' experiments on netloop, the Linux kernel
and ns-3 3.37, side by side in one run.

Experiments (each can be run alone with --only):

  sitl     OPNET SITL (seed 000): iperf3 TCP, 1 and 4 streams, h1 - router - h2:
           unlimited links, modelled 1 Gbit/s links (theory 941.48 Mbit/s),
           and the router's forwarding rate at OPNET's default 50 000 packets/s.
  capture  INET and nse capture loss and capacity (seeds 001, 004), also the
           SITL UDP figures: iperf3 UDP with 64- and 1400-byte frames at rising
           offered rates; end-to-end loss and loss at the boundary; the highest
           rate with < 0.1 % loss.
  delay    OMNeT++/INET delay precision (seed 001): "ping local" (ping to the
           first router's own address) and "ping remote" (across two routers
           joined by 1 Gbit/s, 10 ms; UDP probe with kernel stamps). Box plots
           like the paper's Figures 2 and 3.
  table    nse delay accuracy (seed 004): link delays 0, 5, 10, 50, 300 ms
           x frames of 64 and 1518 bytes: RTT, sd, % error, adjusted RTT and
           its % error, with the seed's numbers beside ours.
  mixed    nse live traffic among simulated traffic (seed 004): a live TCP
           flow over a 2 Mbit/s, 50 ms link while N simulated pairs, each on
           its own 2 Mbit/s, 50 ms link, carry 1.8 Mbit/s of UDP; the live
           flow's rate against N (the curve and the knee at 95 %).
  speed    simulation speed without real hosts: `netloop bench speed`
           (dumbbell, 1 to 10 000 flows) against ns-3 on the same scenario and
           against the engine of the committed baseline (bench/baseline/build.sh
           builds it from this repository's history).
  rti      HLA RTI benchmarks (seed 003): HELICS sender and returnee federates
           alone, with a relay, and through netloop (ideal, LAN, WAN; simulated
           and real time): round trip, rate and one-way throughput against
           payload and endpoints (bench/rti.py).
  partitions  scale out: `netloop bench speed --scenario wan` (64 sites in a
           ring with chords) on one partition, on 2 (and 4) threads and MPI
           ranks, and on ns-3; speed-up and efficiency against one partition,
           beside the published anchors (Unison, Shadow).

Systems: `kernel` (Linux forwarding between namespaces; rates with tbf, no
delay: this kernel has no netem), `netloop` (and `netloop --steer` for TCP),
`ns-3` (bench/ns3/emu.cc: RealtimeSimulatorImpl with FdNetDevices on raw
sockets). Where a system cannot run a scenario the report says n/a and why.

Every test host is a network namespace with addresses in 198.18.0.0/15 and no
route out of the machine; everything created is removed at the end (also on
Ctrl-C and SIGTERM). Run it through `bench/run` (installs and builds what is
needed); as root:

    bench/run [--profile quick|full] [--only sitl,capture,...] [--out DIR]
    bench/reference.py --from-json DIR/results.json --out DIR   # report only
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from report import fmt_rate, med, rt_cells, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETLOOP = os.path.join(ROOT, "target", "release", "netloop")
NS3_EMU = os.path.join(ROOT, "bench", "ns3", "build", "emu")
NS3_DUMBBELL = os.path.join(ROOT, "bench", "ns3", "build", "dumbbell")
GIGABIT_TCP = 1e9 * 1448 / 1538  # TCP payload per wire byte with timestamps
TAG = f"nlr{os.getpid() % 100000}"
EXPERIMENTS = ["sitl", "capture", "delay", "table", "mixed", "opcua", "speed", "partitions", "rti"]

# The profiles: `quick` finishes in about 15 minutes on a 2-core machine.
PROFILES = {
    "quick": {"repeats": 1, "opcua_s": 4, "tcp_s": 4, "udp_s": 3, "probes": 300, "pings": 100,
              "table_probes": 60, "mixed_s": 8,
              "udp_rates": [125, 1000, 10_000, 30_000, 60_000, 100_000, 200_000],
              "mixed_pairs": [0, 150, 1000, 3000], "mixed_partitions": [2],
              "speed_flows": "1,100,10000", "speed_duration": 2,
              "part_flows": "1000", "part_duration": 1, "part_counts": "2", "rti": "quick"},
    "full": {"repeats": 3, "opcua_s": 8, "tcp_s": 6, "udp_s": 4, "probes": 1000, "pings": 300,
             "table_probes": 150, "mixed_s": 10,
             "udp_rates": [125, 1000, 10_000, 20_000, 30_000, 45_000, 60_000, 80_000,
                           100_000, 150_000, 200_000],
             "mixed_pairs": [0, 50, 150, 300, 600, 1000, 1500, 2000, 3000], "mixed_partitions": [2],
             "speed_flows": "1,10,100,1000,10000", "speed_duration": 10,
             "part_flows": "1000,10000", "part_duration": 2, "part_counts": "2,4", "rti": "full"},
}

# nse's delay accuracy table (seed 004): delay ms -> size -> (RTT, sd, %err, adj RTT, adj %err).
NSE_TABLE = {
    0: {64: (0.238, 0.004, None, None, None), 1518: (1.544, 0.025, None, None, None)},
    5: {64: (10.251, 0.295, 2.51, 10.013, 0.13), 1518: (11.586, 0.067, 15.86, 10.032, 0.32)},
    10: {64: (20.255, 0.014, 1.28, 20.017, 0.09), 1518: (21.675, 0.093, 8.38, 20.121, 0.61)},
    50: {64: (100.474, 0.029, 0.47, 100.236, 0.24), 1518: (102.394, 3.440, 2.39, 100.840, 0.84)},
    300: {64: (601.690, 0.546, 0.28, 601.452, 0.24), 1518: (602.999, 0.093, 0.49, 601.445, 0.24)},
}

# Resolves addresses along the whole path before anything is measured.
WARM = "ping -c 1 -W 10 {H2}"

created_ns = []
created_links = []
children = []


class Unsupported(Exception):
    """The system cannot run this scenario; the report says n/a and why."""


# --------------------------------------------------------------------------
# Plumbing


def sh(*args, check=True, timeout=120):
    r = subprocess.run(args, check=False, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def ns_sh(ns, script, check=True):
    return sh("ip", "netns", "exec", ns, "sh", "-c", script, check=check)


def cleanup():
    for p in list(children):
        stop(p)
    for ns in reversed(created_ns):
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        sh("ip", "netns", "del", ns, check=False)
    created_ns.clear()
    for link in created_links:
        sh("ip", "link", "del", link, check=False)
    created_links.clear()


def spawn(args, **kw):
    p = subprocess.Popen(args, start_new_session=True, **kw)
    children.append(p)
    return p


def stop(p, sig=signal.SIGTERM, wait=10):
    """Ends a process group we started: `sig`, then SIGKILL after `wait` s."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass
        try:
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            if p.args[0] == NETLOOP:
                # Killed before its tear-down: its record lets clean do it.
                sh(NETLOOP, "clean", check=False)
    if p in children:
        children.remove(p)


def finish(p, timeout, wait=60):
    """Waits up to `timeout` s for `p`, then stops it; True if it ended in time."""
    try:
        p.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False
    finally:
        stop(p, signal.SIGTERM, wait=wait)


def tail(f, n=2000):
    f.seek(0)
    return f.read()[-n:]


def new_ns(name):
    ns = f"{TAG}-{name}"
    # Listed first: a signal during `ip netns add` must not leave it behind.
    created_ns.append(ns)
    sh("ip", "netns", "add", ns)
    ns_sh(ns, "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6;"
              "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; ip link set lo up")
    return ns


def offloads(ns, dev, on):
    s = "on" if on else "off"
    cmd = ["ethtool", "-K", dev, "tso", s, "gso", s, "gro", s, "tx", s, "rx", s]
    sh(*(["ip", "netns", "exec", ns] if ns else []), *cmd, check=False)


def iperf_json(text):
    i = text.find("{")
    if i < 0:
        return None
    try:
        return json.loads(text[i:])
    except json.JSONDecodeError:
        return None


def ping_times_ns(text):
    out = []
    for line in text.splitlines():
        # The first reply waited for address resolution at every hop.
        if "time=" in line and "icmp_seq=1 " not in line:
            out.append(float(line.split("time=")[1].split()[0]) * 1e6)
    return out


# --------------------------------------------------------------------------
# A path h1 - r1 [- r2] - h2 on each system. Link k (0-based along the chain)
# is 198.18.(k+1).0/24, left end .1, right end .2, on every system, so the
# same commands work everywhere: {H2} is h2's address, {R1} r1's address on
# h1's side, {NETLOOP} the netloop binary, {OUT} the run's scratch directory.


class Path:
    def __init__(self, routers=1, rate=None, mid_rate=None, mid_delay=None, forwarding_rate=None,
                 bg_pairs=0, bg_link_rate="2Mbps", bg_delay="50ms", bg_rate="1.8Mbps", bg_size=1000):
        self.routers = routers
        self.rate = rate
        self.mid_rate = mid_rate
        self.mid_delay = mid_delay
        self.forwarding_rate = forwarding_rate
        self.bg_pairs = bg_pairs
        self.bg_link_rate, self.bg_delay, self.bg_rate, self.bg_size = bg_link_rate, bg_delay, bg_rate, bg_size

    def h2(self):
        return f"198.18.{self.routers + 1}.2"

    def link_rate(self, k):
        """Rate of link k of the chain (None: unlimited); the middle link of
        two routers may have its own."""
        return self.mid_rate if (self.routers == 2 and k == 1 and self.mid_rate) else self.rate

    def link_delay(self, k):
        return self.mid_delay if (self.routers == 2 and k == 1) else None


def rate_bps(rate):
    """"10Mbps" -> 10e6."""
    units = {"Gbps": 1e9, "Mbps": 1e6, "kbps": 1e3}
    for u, m in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * m
    raise ValueError(f"rate {rate!r} has no unit (Gbps, Mbps, kbps)")


def tbf_rate(rate):
    units = {"Gbps": "gbit", "Mbps": "mbit", "kbps": "kbit"}
    for u, t in units.items():
        if rate.endswith(u):
            return rate[: -len(u)] + t
    raise ValueError(f"rate {rate!r} has no unit tbf knows")


def tbf_burst(rate):
    """tbf's bucket: 256 KiB at 1 Gbit/s and more (as the SITL runs had it),
    else 2 ms of the rate and at least 4 KiB — a fixed 256 KiB is two seconds
    at 1 Mbit/s, and a short test then runs at 1.5 times the rate."""
    bps = rate_bps(rate)
    if bps >= 1e9:
        return "256kb"
    return f"{max(4096, int(bps / 8 * 0.002))}b"


def kernel_path(path, offload):
    """h1 - r1 [- r2] - h2 as namespaces with the kernel forwarding."""
    if path.mid_delay and path.mid_delay not in ("0ms", "0s"):
        raise Unsupported("no delay emulation: this kernel has no netem qdisc")
    if path.forwarding_rate:
        raise Unsupported("the kernel has no forwarding-rate model")
    if path.bg_pairs:
        raise Unsupported("the kernel simulates no background traffic")
    names = ["h1"] + [f"r{i + 1}" for i in range(path.routers)] + ["h2"]
    ns = {n: new_ns(n) for n in names}
    for k in range(len(names) - 1):
        a, b = names[k], names[k + 1]
        sh("ip", "link", "add", "x", "netns", ns[a], "type", "veth", "peer", "name", "y", "netns", ns[b])
        ia, ib = f"e{k}a", f"e{k}b"
        sh("ip", "-n", ns[a], "link", "set", "x", "name", ia)
        sh("ip", "-n", ns[b], "link", "set", "y", "name", ib)
        sh("ip", "-n", ns[a], "addr", "add", f"198.18.{k + 1}.1/24", "dev", ia)
        sh("ip", "-n", ns[b], "addr", "add", f"198.18.{k + 1}.2/24", "dev", ib)
        rate = path.link_rate(k)
        for n, d in ((a, ia), (b, ib)):
            sh("ip", "-n", ns[n], "link", "set", d, "up")
            # tbf meters a GSO super-frame as one frame with one header, so
            # a modelled rate needs offloads off to count the wire exactly.
            offloads(ns[n], d, offload and not rate)
            if rate:
                # Rate on the wire: 24 bytes of preamble, FCS and gap per
                # frame, as netloop's links count them.
                sh("ip", "netns", "exec", ns[n], "tc", "qdisc", "add", "dev", d, "root", "stab",
                   "overhead", "24", "tbf", "rate", tbf_rate(rate), "burst", tbf_burst(rate), "latency", "20ms")
    for n in names[1:-1]:
        ns_sh(ns[n], "echo 1 > /proc/sys/net/ipv4/ip_forward")
    last = len(names) - 1
    sh("ip", "-n", ns["h1"], "route", "add", "default", "via", "198.18.1.2")
    sh("ip", "-n", ns["h2"], "route", "add", "default", "via", f"198.18.{last}.1")
    for k, r in enumerate(names[1:-1], start=1):
        # Router k sits between link k-1 (its left) and link k (its right).
        for j in range(1, last + 1):
            if j not in (k, k + 1):
                via = f"198.18.{k}.1" if j < k else f"198.18.{k + 1}.2"
                sh("ip", "-n", ns[r], "route", "add", f"198.18.{j}.0/24", "via", via)
    return ns["h1"], ns["h2"]


def ns3_path(path, duration):
    """h1 and h2 as namespaces whose veth peers are ns-3's FdNetDevices."""
    if path.forwarding_rate:
        raise Unsupported("ns-3 has no router forwarding-rate model")
    if path.routers == 1 and path.rate:
        raise Unsupported("an FdNetDevice has no link rate and one router has no simulated link")
    if not os.access(NS3_EMU, os.X_OK):
        raise Unsupported(f"{NS3_EMU} is missing (bench/ns3/build.sh builds it)")
    h1, h2 = new_ns("h1"), new_ns("h2")
    a, b = f"{TAG}a", f"{TAG}b"
    for ns, dev, addr, gw in ((h1, a, "198.18.1.1/24", "198.18.1.2"),
                              (h2, b, f"{path.h2()}/24", f"198.18.{path.routers + 1}.1")):
        sh("ip", "link", "add", dev, "type", "veth", "peer", "name", "p", "netns", ns)
        created_links.append(dev)
        sh("ip", "-n", ns, "link", "set", "p", "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", addr, "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", gw)
        offloads(ns, "eth0", False)
        offloads(None, dev, False)
        sh("sysctl", "-q", "-w", f"net.ipv6.conf.{dev}.disable_ipv6=1")
        sh("ip", "link", "set", dev, "up", "promisc", "on")
    args = [NS3_EMU, "--dev-a", a, "--dev-b", b, "--routers", str(path.routers),
            "--duration", str(duration)]
    if path.routers == 2:
        args += ["--mid-rate", path.link_rate(1) or "100Gbps", "--mid-delay", path.link_delay(1) or "0ms"]
    if path.bg_pairs:
        args += ["--bg-pairs", str(path.bg_pairs), "--bg-link-rate", path.bg_link_rate,
                 "--bg-delay", path.bg_delay, "--bg-rate", path.bg_rate, "--bg-size", str(path.bg_size)]
    errf = tempfile.TemporaryFile("w+")
    emu = spawn(args, stdout=subprocess.PIPE, stderr=errf, text=True)
    emu.errf = errf
    # Ready when both hosts reach their routers (this also resolves ARP).
    deadline = time.monotonic() + 20
    for ns, gw in ((h1, "198.18.1.2"), (h2, f"198.18.{path.routers + 1}.1")):
        while ns_sh(ns, f"ping -c 1 -W 1 {gw}", check=False).returncode != 0:
            if emu.poll() is not None or time.monotonic() > deadline:
                stop(emu)
                raise RuntimeError(f"ns-3 emu did not come up: {tail(emu.errf)}")
    return h1, h2, emu


def netloop_topology(path, h1_cmds, h2_cmds, duration="900s"):
    # With simulated pairs (the mixed experiment) the simulated nodes know
    # their neighbours from the start, as ns-3's pairs (point-to-point
    # links, no ARP) and ns-2's do: otherwise every pair's source waits a
    # round trip of its 50 ms link for ARP, all within the same few
    # milliseconds, then sends the ~22 datagrams that waited at once and
    # keeps its 2 Mbit/s link backlogged for 2.3 s (a transmitter wake-up
    # per packet on top): a start-up storm of netloop's making, not the
    # steady load the experiment asks about. The real hosts resolve as usual.
    static = "static_neighbours = true\n" if path.bg_pairs else ""
    lines = [f'[run]\nduration = "{duration}"\naddress_pool = "198.19.0.0/16"\n{static}']

    def host(name, cmds):
        out = [f'[[node]]\nname = "{name}"\nkind = "namespace"']
        for c, start, wait in cmds:
            out.append(f"[[node.command]]\ncmd = {json.dumps(c)}\nstart = \"{start}\"\nwait = {str(wait).lower()}")
        return "\n".join(out) + "\n"

    lines.append(host("h1", h1_cmds))
    for i in range(path.routers):
        fr = f'\nforwarding_rate = "{path.forwarding_rate}"' if path.forwarding_rate else ""
        lines.append(f'[[node]]\nname = "r{i + 1}"\nkind = "router"{fr}\n')
    lines.append(host("h2", h2_cmds))
    names = ["h1"] + [f"r{i + 1}" for i in range(path.routers)] + ["h2"]
    for k in range(len(names) - 1):
        extra = ""
        if path.link_rate(k):
            extra += f'\nrate = "{path.link_rate(k)}"'
        if path.link_delay(k):
            extra += f'\ndelay = "{path.link_delay(k)}"'
        lines.append(f'[[link]]\nendpoints = ["{names[k]}", "{names[k + 1]}"]\n'
                     f'addresses = ["198.18.{k + 1}.1/24", "198.18.{k + 1}.2/24"]{extra}\n')
    n = path.bg_pairs
    # Each pair starts at its own phase of one sending interval, evenly
    # spread (as bench/ns3/emu.cc does). Starts 1/n s apart, as before, put
    # all pairs in a few phases whenever 1/n s was a simple multiple of the
    # interval (150 pairs: 6.67 ms = 1.5 intervals of 4.44 ms, two phases,
    # bursts of 75 packets at once): the bursts, not the load, made events
    # late.
    interval_ns = path.bg_size * 8 / rate_bps(path.bg_rate) * 1e9
    for i in range(n):
        lines.append(f'[[node]]\nname = "b{i}a"\nkind = "host"\n[[node]]\nname = "b{i}b"\nkind = "host"\n'
                     f'[[link]]\nendpoints = ["b{i}a", "b{i}b"]\nrate = "{path.bg_link_rate}"\n'
                     f'delay = "{path.bg_delay}"\n'
                     f'[[traffic]]\nkind = "udp-cbr"\nfrom = "b{i}a"\nto = "b{i}b"\nrate = "{path.bg_rate}"\n'
                     f'size = "{path.bg_size}B"\nstart = "{round(i * interval_ns / max(n, 1))}ns"\n')
    return "\n".join(lines)


def write_scripts(d, path, servers, clients):
    subst = {"H2": path.h2(), "R1": "198.18.1.2", "NETLOOP": NETLOOP, "OUT": d}
    with open(os.path.join(d, "servers.sh"), "w") as f:
        for s in servers:
            f.write("( " + s.format(**subst) + " ) &\n")
        f.write("wait\n")
    with open(os.path.join(d, "clients.sh"), "w") as f:
        for k, c in enumerate(clients):
            f.write(f"{c.format(**subst)} > {d}/client{k}.out 2>&1\n")


def read_outputs(d, n):
    out = []
    for k in range(n):
        p = os.path.join(d, f"client{k}.out")
        out.append(open(p).read() if os.path.exists(p) else "")
    return out


def run_on(system, path, servers, clients, client_timeout=300):
    """Runs the servers in h2 and the clients one after another in h1 on
    `system`; returns (client outputs, the system's self-report or None)."""
    d = tempfile.mkdtemp(prefix=f"{TAG}-")
    os.chmod(d, 0o755)
    write_scripts(d, path, servers, clients)
    try:
        if system.startswith("netloop"):
            toml = netloop_topology(path, [(f"sh {d}/clients.sh", "700ms", True)],
                                    [(f"sh {d}/servers.sh", "0s", False)])
            tp = os.path.join(d, "topology.toml")
            with open(tp, "w") as f:
                f.write(toml)
            res = os.path.join(d, "results.json")
            extra = ["--steer"] if system == "netloop-steer" else []
            if system.startswith("netloop-p"):
                # Real time cut into partitions, one thread each (the live
                # path's real hosts in the first).
                extra = ["--partitions", system[len("netloop-p"):]]
            errf = tempfile.TemporaryFile("w+")
            run = spawn([NETLOOP, "run", tp, "--log-dir", os.path.join(d, "logs"), "--json", res, "-q", *extra],
                        stdout=subprocess.DEVNULL, stderr=errf, text=True)
            # A run that fell far behind real time stretches the clients'
            # time; SIGTERM ends it with its tear-down.
            if not finish(run, client_timeout + 30):
                raise RuntimeError(f"netloop run did not finish within {client_timeout + 30} s "
                                   f"(it fell behind real time): {tail(errf, 500)}")
            if run.returncode != 0:
                raise RuntimeError(f"netloop run failed ({run.returncode}): {tail(errf)}")
            with open(res) as f:
                full = json.load(f)
            rep = full["realtime"]
            # Drops inside the model, by reason: with the boundary's counts
            # they say where a lost packet went.
            rep["model_dropped"] = full["conservation"]["dropped"]
            # Each link's counters: what the experiment put on the wire.
            rep["links"] = full["links"]
            return read_outputs(d, len(clients)), rep
        if system.startswith("kernel"):
            h1, h2 = kernel_path(path, offload=(system == "kernel"))
            emu = None
        else:
            h1, h2, emu = ns3_path(path, client_timeout + 60)
        srv = spawn(["ip", "netns", "exec", h2, "sh", f"{d}/servers.sh"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.7)
        try:
            sh("ip", "netns", "exec", h1, "sh", f"{d}/clients.sh", check=False, timeout=client_timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the clients did not finish within {client_timeout} s"
                               + (" (ns-3 fell behind real time)" if emu else "")) from None
        stop(srv)
        rep = None
        if emu is not None:
            stop(emu, signal.SIGTERM, wait=20)
            text = emu.stdout.read()
            rep = iperf_json(text)
            if rep is None:
                # emu checks for the signal in simulated time, so one far
                # behind real time is killed before it can report; the
                # clients' results still stand.
                rep = {"no_report": f"ns-3 emu printed no JSON (far behind real time?): {tail(emu.errf, 300)}"}
        return read_outputs(d, len(clients)), rep
    finally:
        cleanup()
        subprocess.run(["rm", "-rf", d])


def attempt(fn, *args):
    """Runs one measurement; an unsupported scenario or a failure becomes a
    record the report shows instead of ending the whole benchmark."""
    try:
        return fn(*args)
    except Unsupported as e:
        return {"na": str(e)}
    except (RuntimeError, subprocess.TimeoutExpired, OSError, KeyError, TypeError, ValueError, IndexError) as e:
        print(f"  ! {fn.__name__}{args[:1]}: {e}", file=sys.stderr, flush=True)
        return {"error": str(e)[-500:]}


# --------------------------------------------------------------------------
# Experiments


def iperf_tcp(system, path, streams, secs, timeout=60):
    outs, rep = run_on(system, path, ["iperf3 -s -1"],
                       [f"iperf3 -c {{H2}} -t {secs} -P {streams} -J"], client_timeout=secs + timeout)
    j = iperf_json(outs[0])
    if not j or "end" not in j or "sum_received" not in j["end"]:
        raise RuntimeError(f"iperf3 failed: {outs[0][-300:]}")
    return {"bps": j["end"]["sum_received"]["bits_per_second"], "report": slim(rep)}


def kept(system, runs):
    """netloop's verdict per repeat, for the progress lines."""
    return f" kept up {rt_cells(runs)[0]}" if system.startswith("netloop") else ""


def slim(rep):
    """The parts of a self-report the benchmark keeps."""
    if not rep:
        return None
    if "event_lateness" in rep:
        # The report's keeping-up columns need kept_up, event_lateness,
        # input_latency and boundary_lost.
        return {k: rep.get(k) for k in ("kept_up", "late_threshold_ns", "late_events", "first_late_s",
                                        "last_late_s", "boundary_lost", "rx_frames", "tx_frames",
                                        "cpu_share", "event_cpu_share", "io_cpu_share", "event_lateness",
                                        "input_latency", "output_latency", "demotions", "io_demotions",
                                        "model_dropped", "event_page_faults", "steal_ns", "late_held_off",
                                        "held_off_ns", "held_off_queued_ns", "held_off_max_ns", "partitions",
                                        "sleeps", "sleep_cost_ns", "spin_share")}
    return rep


def exp_sitl(p, reps):
    scenarios = [("unlimited", Path(1)), ("1 Gbit/s links", Path(1, rate="1Gbps")),
                 ("forwarding 50 000 pps", Path(1, forwarding_rate="50000pps"))]
    systems = ["kernel", "kernel-nooffload", "netloop", "netloop-steer", "ns-3"]
    rows = []
    for name, path in scenarios:
        for streams in (1, 4):
            for system in systems:
                if system == "kernel-nooffload" and name != "unlimited":
                    continue
                ns3_path_ = path
                if system == "ns-3" and path.rate:
                    # ns-3's FdNetDevice has no rate: carry the 1 Gbit/s over
                    # a simulated router-to-router link instead.
                    ns3_path_ = Path(2, mid_rate=path.rate)
                runs = [attempt(iperf_tcp, system, ns3_path_, streams, p["tcp_s"]) for _ in range(reps)]
                row = {"scenario": name, "streams": streams, "system": system, "runs": runs}
                if system == "ns-3" and ns3_path_ is not path:
                    row["note"] = "two routers, 1 Gbit/s between them; access links unlimited"
                rows.append(row)
                bps = med([r.get("bps") for r in runs])
                print(f"sitl {name:<22} P{streams} {system:<16} "
                      f"{fmt_rate(bps) if bps else runs[0].get('na', runs[0].get('error', '?'))[:60]}"
                      f"{kept(system, runs)}", flush=True)
    return {"rows": rows, "theoretical_1g_bps": GIGABIT_TCP, "opnet_default_mbps": 79.5, "opnet_tuned_mbps": 94.4}


def udp_point(system, size, pps, secs):
    payload = size - 46  # frame with FCS - Ethernet, IPv4 and UDP headers
    bps = pps * payload * 8
    # After the server's one test, h2's UDP counters say how many datagrams
    # its socket dropped (RcvbufErrors): loss in the receiving host, not in
    # the network. The client waits a second so that they are read in time.
    outs, rep = run_on(system, Path(1), ["iperf3 -s -1; grep '^Udp:' /proc/net/snmp > {OUT}/h2snmp"],
                       [f"iperf3 -c {{H2}} -u -l {payload} -b {bps} -t {secs} -J", "sleep 1",
                        "cat {OUT}/h2snmp"], client_timeout=secs + 60)
    j = iperf_json(outs[0])
    if not j or "end" not in j or "sum" not in j["end"]:
        raise RuntimeError(f"iperf3 failed: {outs[0][-300:]}")
    s = j["end"]["sum"]
    r = {"sent": s["packets"], "lost": s["lost_packets"], "seconds": s["seconds"]}
    snmp = [line.split() for line in outs[2].splitlines() if line.startswith("Udp:")]
    if len(snmp) == 2:
        r["receiver_rcvbuf_errors"] = int(dict(zip(snmp[0], snmp[1]))["RcvbufErrors"])
    if rep and "boundary_lost" in rep:
        r["boundary_lost"] = rep["boundary_lost"]
        r["kept_up"] = rep["kept_up"]
        r["model_dropped"] = rep["model_dropped"]
        # Lateness and input latency: whether netloop kept time at this rate.
        r["report"] = slim(rep)
    elif rep and "socket_drops" in rep:
        # The raw socket's drops, the FdNetDevice's receive-queue drops and
        # failed writes: ns-3's counterparts of netloop's boundary counters.
        r["boundary_lost"] = rep["socket_drops"] + rep.get("rx_not_processed", 0) + rep.get("tx_write_errors", 0)
    return r


def exp_capture(p, reps):
    rows = []
    for size in (64, 1400):
        for pps in p["udp_rates"]:
            for system in ("kernel", "netloop", "ns-3"):
                runs = [attempt(udp_point, system, size, pps, p["udp_s"]) for _ in range(reps)]
                rows.append({"size": size, "offered_pps": pps, "system": system, "runs": runs})
                ok = [r for r in runs if "sent" in r]
                loss = med([r["lost"] / max(r["sent"], 1) for r in ok])
                bl = med([r.get("boundary_lost") for r in ok])
                print(f"capture {size}B {pps:>7} pps {system:<8} loss "
                      f"{'n/a' if loss is None else f'{loss * 100:.3f} %'} boundary {bl}{kept(system, runs)}",
                      flush=True)
    return {"rows": rows}


def source_of(res, exp):
    """Where experiment `exp` of results `res` was run: its own record, or
    for results written before there was one, the run that `merged_from`
    says kept it, else the run itself."""
    src = (res.get("sources") or {}).get(exp)
    if src:
        return src
    mf = res.get("merged_from")
    if mf and exp in mf.get("kept", []):
        return {"started": mf["started"], "commit": mf.get("machine", {}).get("netloop_commit"), "command": None}
    return {"started": res["started"], "commit": res["machine"].get("netloop_commit"),
            "command": res.get("command")}


def machine_wakeup():
    """This machine's thread wake-up latencies (`netloop bench wakeup`): the
    floor under a ping through any user-space emulator. None if it failed."""
    out = os.path.join(tempfile.mkdtemp(prefix=f"{TAG}-"), "wakeup.json")
    try:
        sh(NETLOOP, "bench", "wakeup", "--json", out, timeout=120)
        with open(out) as f:
            return json.load(f)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"delay: netloop bench wakeup failed: {e}", flush=True)
        return None
    finally:
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)


def exp_delay(p, reps):
    out = {"expected_model_ns": 20e6 + 6 * (98 + 24) * 8, "runs": {}, "wakeup": machine_wakeup()}
    path = Path(2, rate="1Gbps", mid_delay="10ms")
    clients = [WARM, f"ping -c {p['pings']} -i 0.02 {{R1}}",
               f"{{NETLOOP}} probe rtt {{H2}} --count {p['probes']} --interval 10ms --json {{OUT}}/probe.json",
               "cat {OUT}/probe.json"]
    for system in ("kernel", "netloop", "ns-3"):
        runs = []
        for _ in range(reps):
            def one():
                outs, rep = run_on(system, path if system != "kernel" else Path(2),
                                   [f"{NETLOOP} probe echo --idle 60s"], clients)
                remote = json.loads(outs[3])["rtt_ns"]
                return {"local_ns": ping_times_ns(outs[1]), "remote_ns": remote, "report": slim(rep)}
            runs.append(attempt(one))
        out["runs"][system] = runs
        ok = [r for r in runs if "remote_ns" in r]
        print(f"delay {system:<8} local p50 {med([summarize(r['local_ns'])['p50'] for r in ok if r['local_ns']])} "
              f"remote p50 {med([summarize(r['remote_ns'])['p50'] for r in ok if r['remote_ns']])}", flush=True)
    return out


def exp_table(p, reps):
    rows = []
    for delay in (0, 5, 10, 50, 300):
        for system in ("kernel", "netloop", "ns-3"):
            if system == "kernel" and delay:
                rows.append({"delay_ms": delay, "system": system,
                             "na": "no delay emulation: this kernel has no netem qdisc"})
                continue
            # One run per delay carries both sizes, one after the other.
            # A first ping waits out address resolution on every hop (a
            # round trip of each link: 1.2 s at 300 ms). The probe's own
            # warm-up now waits for replies too; WARM stays so that every
            # system's path is warmed the same way before it.
            clients = [WARM] + [f"{{NETLOOP}} probe rtt {{H2}} --count {p['table_probes']} --interval 10ms "
                       f"--size {size - 46} --json {{OUT}}/p{size}.json; cat {{OUT}}/p{size}.json"
                       for size in (64, 1518)]
            path = Path(2, rate="1Gbps", mid_delay=f"{delay}ms") if system != "kernel" else Path(2)
            runs = []
            for _ in range(reps):
                def one():
                    outs, rep = run_on(system, path, [f"{NETLOOP} probe echo --idle 60s"], clients)
                    res = {}
                    for size, o in zip((64, 1518), outs[1:]):
                        j = json.loads(o[o.find("{"):])
                        res[str(size)] = summarize(j["rtt_ns"])
                    return {"sizes": res, "report": slim(rep)}
                runs.append(attempt(one))
            rows.append({"delay_ms": delay, "system": system, "runs": runs})
            ok = [r for r in runs if "sizes" in r]
            print(f"table {delay:>3} ms {system:<8} " + " ".join(
                f"{s}B {med([r['sizes'][s]['p50'] for r in ok if r['sizes'][s]]) or 0:.0f}ns"
                for s in ("64", "1518")), flush=True)
    return {"rows": rows, "nse": {str(d): {str(s): v for s, v in t.items()} for d, t in NSE_TABLE.items()}}


def exp_mixed(p, reps):
    rows = []
    # netloop on one partition, then cut into each count of
    # `mixed_partitions` (real time on that many threads), then ns-3.
    parted = [f"netloop-p{k}" for k in p.get("mixed_partitions", []) if k > 1]
    for system in ("netloop", *parted, "ns-3"):
        base = None
        gave_out = None
        for n in p["mixed_pairs"]:
            if gave_out is not None:
                # Past a point where the live flow kept under half its rate
                # or the run never finished, more pairs only cost time.
                rows.append({"system": system, "pairs": n,
                             "runs": [{"na": f"not run: the live flow gave out at {gave_out} pairs"}]})
                continue
            path = Path(2, rate="1Gbps", mid_rate="2Mbps", mid_delay="50ms", bg_pairs=n)
            runs = [attempt(iperf_tcp, system, path, 1, p["mixed_s"], 20) for _ in range(reps)]
            rows.append({"system": system, "pairs": n, "runs": runs})
            bps = med([r.get("bps") for r in runs])
            base = base if n else bps
            if not bps or not base or bps < 0.5 * base:
                gave_out = n
            print(f"mixed {system:<8} {n:>5} pairs: live TCP {fmt_rate(bps) if bps else runs[0]}{kept(system, runs)}",
                  flush=True)
    return {"rows": rows, "link": "2 Mbit/s, 50 ms", "bg_rate": "1.8 Mbit/s of 1000-byte UDP payloads per pair",
            "nse": {"links": 150, "nodes": 300}}


OPCUA = os.path.join(ROOT, "examples", "opcua")
OPCUA_RATES = ["1Mbps", "10Mbps", "100Mbps"]
ETH_OVERHEAD = 24  # preamble and start delimiter 8, FCS 4, inter-frame gap 12


def opcua_point(system, rate, secs, concurrency):
    """OPC-UA Read requests/s from h1 to a server on h2 over `rate` links."""
    path = Path(1, rate=rate)
    if system == "ns-3":
        # FdNetDevice has no rate: the rate is a simulated router-to-router link.
        path = Path(2, mid_rate=rate)
    py = sys.executable
    url = "opc.tcp://{H2}:4840/netloop/"
    server = f"{py} {OPCUA}/server.py --host {{H2}} --port 4840 --ready-file {{OUT}}/ready"
    # The server takes a second or three to come up; the client waits for it.
    client = (f"for i in $(seq 300); do [ -f {{OUT}}/ready ] && break; sleep 0.1; done; "
              f"{py} {OPCUA}/client.py throughput --url {url} --seconds {secs} --node Blob "
              f"--concurrency {concurrency} --timeout 10 --connect-timeout 30")
    outs, rep = run_on(system, path, [server], [client], client_timeout=secs + 90)
    lines = [x for x in outs[0].splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"the OPC-UA client printed no result: {outs[0][-300:]}")
    out = json.loads(lines[-1])
    if not out.get("requests"):
        raise RuntimeError(f"no OPC-UA request succeeded: {out.get('error') or outs[0][-300:]}")
    row = {"rps": out["rps"], "requests": out["requests"], "failed": out["failed"],
           "value_bytes": out.get("value_bytes"), "report": slim(rep)}
    if rep and "links" in rep:
        # Bytes each request put on the bottleneck's busier direction (the
        # responses), Ethernet overhead included: the wire's limit follows.
        link = next(x for x in rep["links"] if x["name"] == f"r{path.routers}-h2")
        d = link["b_to_a"]
        row["wire_bytes_per_request"] = (d["sent_bytes"] + ETH_OVERHEAD * d["sent_packets"]) / out["requests"]
    return row


def exp_opcua(p, reps):
    systems = ["kernel", "netloop", "ns-3"]
    rows = []
    for rate in OPCUA_RATES:
        for system in systems:
            runs = [attempt(opcua_point, system, rate, p["opcua_s"], 8) for _ in range(reps)]
            rows.append({"rate": rate, "rate_bps": rate_bps(rate), "system": system, "runs": runs})
            rps = med([r.get("rps") for r in runs])
            print(f"opcua {rate:<8} {system:<8} "
                  f"{f'{rps:.1f} requests/s' if rps else runs[0].get('na', runs[0].get('error', '?'))[:60]}"
                  f"{kept(system, runs)}", flush=True)
    return {"rows": rows, "concurrency": 8, "value_bytes": 1000, "overhead": ETH_OVERHEAD}


def baseline_build():
    """The engine of the committed speed baseline (bench/baseline/build.sh,
    minutes the first time): (its path, None), or (None, why not). The
    script runs in a process group of its own, stopped by SIGTERM if it
    overruns, so that its trap removes the worktree it made."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    run = spawn(["bash", os.path.join(ROOT, "bench", "baseline", "build.sh")], stdout=out, stderr=err,
                text=True, cwd=ROOT)
    if not finish(run, 3600, wait=30):
        return None, "bench/baseline/build.sh did not finish within an hour"
    if run.returncode != 0:
        last = (tail(err, 1000).strip().splitlines() or ["no output"])[-1]
        return None, f"bench/baseline/build.sh failed: {last}"
    return tail(out, 1000).strip().splitlines()[-1], None


def exp_speed(p, reps, outdir):
    """The dumbbell against ns-3, and against the baseline's engine built
    from this repository's history (issue 17's 5x), in the same run. If
    the baseline fails, the run is made again without it (and says why)."""
    js = os.path.join(outdir, "speed.json")
    args = [NETLOOP, "bench", "speed", "--flows", p["speed_flows"], "--duration", str(p["speed_duration"]),
            "--repeats", str(reps), "--json", js, "--ns3", NS3_DUMBBELL]
    base, why = baseline_build()

    def attempt(extra):
        errf = tempfile.TemporaryFile("w+")
        run = spawn(args + extra, stderr=errf, text=True, cwd=ROOT)
        if not finish(run, 3600, wait=10):
            return "netloop bench speed did not finish within an hour"
        return tail(errf, 1000) if run.returncode != 0 else None

    error = attempt(["--baseline", base] if base else [])
    if error and base:
        why = f"the run with the baseline failed: {error.strip().splitlines()[-1] if error.strip() else '?'}"
        error = attempt([])
    if error:
        return {"error": error}
    with open(js) as f:
        res = json.load(f)
    if why:
        res["baseline_note"] = why
    return res


def netloop_has_mpi():
    """Whether NETLOOP was built with MPI and mpirun is here: a build
    without it says so at once when asked for --mpi."""
    if not shutil.which("mpirun"):
        return False
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([NETLOOP, "run", os.path.join(ROOT, "examples", "given-cut.toml"), "--mpi", "--quiet"],
                       capture_output=True, text=True, env=env, timeout=120)
    return "built without MPI" not in r.stderr


def exp_partitions(p, reps, outdir):
    """The 64-site WAN on one partition, on threads and on MPI ranks (when
    netloop has MPI), and on ns-3 (bench/ns3/wan.cc)."""
    js = os.path.join(outdir, "partitions.json")
    args = [NETLOOP, "bench", "speed", "--scenario", "wan", "--sites", "64", "--load", "2000",
            "--flows", p["part_flows"], "--duration", str(p["part_duration"]), "--repeats", str(reps),
            "--partitions", p["part_counts"], "--json", js, "--ns3", NS3_DUMBBELL]
    mpi = netloop_has_mpi()
    if mpi:
        args += ["--mpi-ranks", p["part_counts"]]
    errf = tempfile.TemporaryFile("w+")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    run = spawn(args, stderr=errf, text=True, cwd=ROOT, env=env)
    if not finish(run, 3 * 3600, wait=10):
        return {"error": "netloop bench speed --scenario wan did not finish within three hours"}
    if run.returncode != 0:
        return {"error": tail(errf, 1000)}
    with open(js) as f:
        out = json.load(f)
    if not mpi:
        out["mpi_note"] = ("no MPI ranks: netloop was built without --features mpi, or mpirun is missing "
                           "(bench/run builds with MPI when mpicc is installed)")
    return out


def exp_rti(p, outdir):
    """The RTI benchmark (bench/rti.py): HELICS federates alone, with a relay
    and through netloop; its plots go beside the report."""
    from pathlib import Path

    import rti
    try:
        rti.helics_dir()
    except SystemExit as e:
        return {"error": str(e)}
    os.environ.setdefault("NETLOOP", NETLOOP)
    return rti.run_all(rti.PROFILES[p["rti"]], Path(outdir))


# --------------------------------------------------------------------------
# Report


def parse_pairs(text):
    """"0,150,300" -> [0, 150, 300] (sorted, each once); ValueError says
    what is wrong."""
    out = set()
    for x in text.split(","):
        x = x.strip()
        if not x.isdigit():
            raise ValueError(f"{x!r} is not a whole number of pairs (expected e.g. 0,150,300)")
        out.add(int(x))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=PROFILES, default="quick")
    ap.add_argument("--repeats", type=int, help="override the profile's repeats")
    ap.add_argument("--only", default=",".join(EXPERIMENTS), help="comma-separated: " + ",".join(EXPERIMENTS))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "reference"),
                    help="directory for results.json, RESULTS.md and the plots")
    ap.add_argument("--from-json", help="only write the report and plots of an earlier results.json")
    ap.add_argument("--mixed-pairs", help="override the profile's simulated pairs of the mixed experiment "
                    "(comma-separated, e.g. 0,150,300,600: to find its kept-up capacity)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other experiments of the results.json already in --out (rerun some only)")
    a = ap.parse_args()
    pairs = None
    if a.mixed_pairs is not None:
        try:
            pairs = parse_pairs(a.mixed_pairs)
        except ValueError as e:
            ap.error(f"--mixed-pairs {a.mixed_pairs!r}: {e}")
    os.makedirs(a.out, exist_ok=True)
    if a.from_json:
        with open(a.from_json) as f:
            res = json.load(f)
        import report
        report.write(res, a.out)
        return
    only = a.only.split(",")
    bad = [x for x in only if x not in EXPERIMENTS]
    if bad:
        sys.exit(f"--only: unknown experiment {bad[0]!r} (known: {', '.join(EXPERIMENTS)})")
    if os.geteuid() != 0:
        sys.exit("bench/reference.py needs root (it creates network namespaces): sudo bench/run")
    # The tools of the experiments with real hosts (speed, partitions and
    # rti have none).
    tools = (("iperf3", "iperf3"), ("ping", "iputils-ping"), ("ethtool", "ethtool"), ("ip", "iproute2"),
             ("tc", "iproute2")) if set(only) - {"speed", "partitions", "rti"} else ()
    missing = [f"{tool} (apt-get install {pkg})" for tool, pkg in tools
               if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode]
    if not os.access(NETLOOP, os.X_OK):
        missing.append(f"{NETLOOP} (cargo build --release)")
    if missing:
        sys.exit("missing: " + "; ".join(missing) + " — bench/run installs all of it")
    p = dict(PROFILES[a.profile])
    if pairs is not None:
        p["mixed_pairs"] = pairs
    reps = a.repeats or p["repeats"]
    res = {"profile": a.profile, "repeats": reps, "params": p, "machine": machine(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "experiments": {},
           # As bench/run was given it (it passes its arguments on), so that
           # the report says exactly what ran (--only, --mixed-pairs, ...).
           "command": " ".join(["sudo bench/run"] + sys.argv[1:])}
    if a.merge and os.path.exists(os.path.join(a.out, "results.json")):
        with open(os.path.join(a.out, "results.json")) as f:
            old = json.load(f)
        if old.get("profile") != a.profile:
            sys.exit(f"--merge: {a.out}/results.json is of the {old.get('profile')} profile, not {a.profile}")
        res["experiments"] = {k: v for k, v in old["experiments"].items() if k not in only}
        res["merged_from"] = {"started": old["started"], "kept": sorted(res["experiments"]),
                              "machine": old["machine"]}
        res["sources"] = {k: source_of(old, k) for k in res["experiments"]}
    # Where each experiment of this run comes from (a later --merge keeps it).
    res.setdefault("sources", {}).update(
        {e: {"started": res["started"], "commit": res["machine"].get("netloop_commit"),
             "command": res["command"]} for e in only})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    try:
        for e in only:
            t = time.monotonic()
            print(f"== {e}", flush=True)
            if e == "speed":
                res["experiments"][e] = exp_speed(p, reps, a.out)
            elif e == "partitions":
                res["experiments"][e] = exp_partitions(p, reps, a.out)
            elif e == "rti":
                res["experiments"][e] = exp_rti(p, a.out)
            else:
                res["experiments"][e] = globals()[f"exp_{e}"](p, reps)
            res["experiments"][e]["wall_s"] = time.monotonic() - t
            save(res, a.out)
    finally:
        cleanup()
    res["wall_s"] = time.monotonic() - t0
    save(res, a.out)
    import report
    report.write(res, a.out)


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(open("/proc/meminfo").readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    ns3 = "3.37 (Debian)" if os.access(NS3_EMU, os.X_OK) else "missing"
    return {"cpus": os.cpu_count(), "cpu": cpu, "mem_mib": mem, "kernel": os.uname().release,
            "netloop_commit": commit, "ns3": ns3,
            "iperf3": (subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
                       if shutil.which("iperf3") else "missing")}


def save(res, outdir):
    path = os.path.join(outdir, "results.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        cleanup()
        sys.exit(130)
