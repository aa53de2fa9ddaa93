#!/usr/bin/env python3
"""Real-time benchmark: netloop against the Linux kernel on the same namespaces.

Runs the real-systems-in-the-loop targets side by side in one invocation:

  tcp         iperf3 TCP through one router, unlimited link rate
              (kernel forwarding with offloads on and off; netloop)
  tcp-1g      iperf3 through one router over modelled 1 Gbit/s links
              (netloop only; against the theoretical 941.48 Mbit/s)
  rtt         round trips with nanosecond kernel stamps (`netloop probe`):
              across two routers (kernel: no delay, its own RTT on the path;
              netloop: 1 Gbit/s, 10 ms between the routers, the INET
              experiment), and ping to the first router's own address
  udp64       64-byte frames (18-byte UDP payload) with iperf3 at rising
              packet rates: loss at each, and the highest rate under 0.1 %

Every test host is a network namespace with addresses in 198.18.0.0/15 and no
route out of the machine; everything created is removed at the end (also on
Ctrl-C). Prints a table and writes JSON (default bench/out/realtime.json).

Usage (as root, after `cargo build --release`):
    bench/realtime.py [--quick] [--repeats N] [--only tcp,rtt,...] [--json PATH]

ns-3 3.37 as a real-time peer in the same run is the reference benchmark's job
(issue 4); its figures measured on these machines are in shared/notes.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETLOOP = os.path.join(ROOT, "target", "release", "netloop")
GIGABIT_TCP = 1e9 * 1448 / 1538
TAG = f"nlb{os.getpid() % 100000}"
EXTRA = []
created_ns = []
created_links = []


def sh(*args, check=True, capture=False, timeout=120):
    r = subprocess.run(args, check=False, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed: {r.stderr.strip()}")
    return r.stdout if capture else r


def ns_exec(ns, *args, **kw):
    return sh("ip", "netns", "exec", ns, *args, **kw)


def cleanup():
    for ns in reversed(created_ns):
        pids = sh("ip", "netns", "pids", ns, check=False, capture=True).split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        sh("ip", "netns", "del", ns, check=False)
    created_ns.clear()
    for l in created_links:
        sh("ip", "link", "del", l, check=False)
    created_links.clear()


def offloads(ns, dev, on):
    state = "on" if on else "off"
    ns_exec(ns, "ethtool", "-K", dev, "tso", state, "gso", state, "gro", state,
            "tx", state, "rx", state, check=False)


def kernel_path(routers, offload):
    """h1 - r1 [- r2] - h2 as namespaces with kernel forwarding."""
    names = ["h1"] + [f"r{i + 1}" for i in range(routers)] + ["h2"]
    ns = {n: f"{TAG}-{n}" for n in names}
    for n in names:
        sh("ip", "netns", "add", ns[n])
        created_ns.append(ns[n])
        ns_exec(ns[n], "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6;"
                "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
        sh("ip", "-n", ns[n], "link", "set", "lo", "up")
    addrs = {}
    for i in range(len(names) - 1):
        a, b = names[i], names[i + 1]
        sh("ip", "link", "add", "x", "netns", ns[a], "type", "veth", "peer", "name", "y", "netns", ns[b])
        ia, ib = f"e{i}a", f"e{i}b"
        sh("ip", "-n", ns[a], "link", "set", "x", "name", ia)
        sh("ip", "-n", ns[b], "link", "set", "y", "name", ib)
        sa, sb = f"198.18.{i + 1}.1/24", f"198.18.{i + 1}.2/24"
        sh("ip", "-n", ns[a], "addr", "add", sa, "dev", ia)
        sh("ip", "-n", ns[b], "addr", "add", sb, "dev", ib)
        for n, d in ((a, ia), (b, ib)):
            sh("ip", "-n", ns[n], "link", "set", d, "up")
            offloads(ns[n], d, offload)
        addrs[(a, b)] = (sa.split("/")[0], sb.split("/")[0])
    for n in names[1:-1]:
        ns_exec(ns[n], "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
    # Routes: h1 default via its router; h2 default via its router; routers
    # route the far subnets through each other.
    sh("ip", "-n", ns["h1"], "route", "add", "default", "via", addrs[("h1", names[1])][1])
    sh("ip", "-n", ns["h2"], "route", "add", "default", "via", addrs[(names[-2], "h2")][0])
    if routers == 2:
        sh("ip", "-n", ns["r1"], "route", "add", "198.18.3.0/24", "via", "198.18.2.2")
        sh("ip", "-n", ns["r2"], "route", "add", "198.18.1.0/24", "via", "198.18.2.1")
    h2 = addrs[(names[-2], "h2")][1]
    r1 = addrs[("h1", names[1])][1]
    return ns, h2, r1


def iperf_json(text):
    i = text.find("{")
    return json.loads(text[i:]) if i >= 0 else None


def tcp_kernel(offload, seconds):
    ns, h2, _ = kernel_path(1, offload)
    srv = subprocess.Popen(["ip", "netns", "exec", ns["h2"], "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    out = ns_exec(ns["h1"], "iperf3", "-c", h2, "-t", str(seconds), "-J", capture=True)
    srv.wait(timeout=10)
    cleanup()
    return iperf_json(out)["end"]["sum_received"]["bits_per_second"]


def netloop_run(toml_text, logs, extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml_text)
        path = f.name
    res = os.path.join(logs, "results.json")
    r = subprocess.run([NETLOOP, "run", path, "--log-dir", logs, "--json", res, "-q", *EXTRA, *extra],
                       capture_output=True, text=True, timeout=300)
    os.unlink(path)
    if r.returncode not in (0,):
        raise RuntimeError(f"netloop run failed ({r.returncode}): {r.stderr.strip()}")
    with open(res) as f:
        return json.load(f)


def topology(routers, rate, mid_delay, h1_cmds, h2_cmds, duration="60s"):
    lines = [f'[run]\nduration = "{duration}"\n']
    if rate:
        lines.append(f'[defaults.link]\nrate = "{rate}"\n')

    def host(name, cmds):
        out = [f'[[node]]\nname = "{name}"\nkind = "namespace"']
        for c, start, wait in cmds:
            out.append(f'[[node.command]]\ncmd = "{c}"\nstart = "{start}"\nwait = {str(wait).lower()}')
        return "\n".join(out) + "\n"

    lines.append(host("h1", h1_cmds))
    for i in range(routers):
        lines.append(f'[[node]]\nname = "r{i + 1}"\nkind = "router"\n')
    lines.append(host("h2", h2_cmds))
    names = ["h1"] + [f"r{i + 1}" for i in range(routers)] + ["h2"]
    for i in range(len(names) - 1):
        d = f'\ndelay = "{mid_delay}"' if (routers == 2 and i == 1 and mid_delay) else ""
        lines.append(f'[[link]]\nendpoints = ["{names[i]}", "{names[i + 1]}"]\n'
                     f'addresses = ["198.18.{i + 1}.1/24", "198.18.{i + 1}.2/24"]{d}\n')
    return "\n".join(lines)


def h2_addr(routers):
    return f"198.18.{routers + 1}.2"


def tcp_netloop(rate, seconds, steer=False):
    with tempfile.TemporaryDirectory() as logs:
        t = topology(1, rate, None,
                     [(f"iperf3 -c {h2_addr(1)} -t {seconds} -J", "500ms", True)],
                     [("iperf3 -s -1", "0s", False)])
        r = netloop_run(t, logs, ["--steer"] if steer else [])
        with open(os.path.join(logs, "h1.0.log")) as f:
            j = iperf_json(f.read())
    return j["end"]["sum_received"]["bits_per_second"], r["realtime"]


def probe_stats(path):
    with open(path) as f:
        v = json.load(f)["rtt_ns"]
    return summarize(v)


def summarize(v):
    if not v:
        return None
    s = sorted(v)
    q = lambda f: s[round((len(s) - 1) * f)]
    return {"n": len(s), "min": s[0], "p50": q(0.5), "p99": q(0.99), "max": s[-1],
            "mean": statistics.fmean(s), "sd": statistics.pstdev(s)}


def ping_times(text):
    out = []
    for line in text.splitlines():
        # The first reply waited for address resolution at every hop.
        if "time=" in line and "icmp_seq=1 " not in line:
            out.append(float(line.split("time=")[1].split()[0]) * 1e6)
    return out


def rtt_kernel(count):
    ns, h2, r1 = kernel_path(2, True)
    echo = subprocess.Popen(["ip", "netns", "exec", ns["h2"], NETLOOP, "probe", "echo", "--idle", "30s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "p.json")
        ns_exec(ns["h1"], NETLOOP, "probe", "rtt", h2, "--count", str(count), "--interval", "10ms", "--json", p)
        remote = probe_stats(p)
    local = summarize(ping_times(ns_exec(ns["h1"], "ping", "-c", "50", "-i", "0.02", r1, capture=True)))
    echo.kill()
    echo.wait()
    cleanup()
    return remote, local


def rtt_netloop(count):
    with tempfile.TemporaryDirectory() as logs:
        p = os.path.join(logs, "p.json")
        t = topology(2, "1Gbps", "10ms",
                     [("ping -c 50 -i 0.02 198.18.1.2", "300ms", True),
                      (f"{NETLOOP} probe rtt {h2_addr(2)} --count {count} --interval 10ms --json {p}", "1.5s", True)],
                     [(f"{NETLOOP} probe echo --idle 60s", "0s", False)])
        r = netloop_run(t, logs)
        remote = probe_stats(p)
        with open(os.path.join(logs, "h1.0.log")) as f:
            local = summarize(ping_times(f.read()))
    return remote, local, r["realtime"]


def udp_kernel(pps, seconds):
    ns, h2, _ = kernel_path(1, True)
    srv = subprocess.Popen(["ip", "netns", "exec", ns["h2"], "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    bps = pps * 18 * 8
    out = ns_exec(ns["h1"], "iperf3", "-c", h2, "-u", "-l", "18", "-b", str(bps), "-t", str(seconds), "-J",
                  capture=True, check=False)
    srv.wait(timeout=10)
    cleanup()
    s = iperf_json(out.stdout if hasattr(out, "stdout") else out)["end"]["sum"]
    return s["packets"], s["lost_packets"]


def udp_netloop(pps, seconds):
    bps = pps * 18 * 8
    with tempfile.TemporaryDirectory() as logs:
        t = topology(1, None, None,
                     [(f"iperf3 -c {h2_addr(1)} -u -l 18 -b {bps} -t {seconds} -J", "500ms", True)],
                     [("iperf3 -s -1", "0s", False)])
        r = netloop_run(t, logs)
        with open(os.path.join(logs, "h1.0.log")) as f:
            s = iperf_json(f.read())["end"]["sum"]
    return s["packets"], s["lost_packets"], r["realtime"]


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_rate(b):
    return f"{b / 1e9:.2f} Gbit/s" if b >= 1e9 else f"{b / 1e6:.1f} Mbit/s"


def fmt_us(ns):
    return f"{ns / 1e3:.1f} µs" if ns < 1e6 else f"{ns / 1e6:.3f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="shorter runs, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="tcp,tcp-1g,rtt,udp64")
    ap.add_argument("--json", default=os.path.join(ROOT, "bench", "out", "realtime.json"))
    ap.add_argument("--md", help="also write the report as Markdown here")
    ap.add_argument("--netloop-args", default="", help="extra arguments for every `netloop run`, e.g. --steer")
    ap.add_argument("--from-json", help="only print (and --md) the report of an earlier run")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            o = json.load(f)
        text = report(o)
        if a.md:
            write_md(a.md, o, text)
        return
    if os.geteuid() != 0:
        sys.exit("bench/realtime.py needs root (it creates network namespaces)")
    for tool, pkg in (("iperf3", "iperf3"), ("ping", "iputils-ping"), ("ethtool", "ethtool"), ("ip", "iproute2")):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            sys.exit(f"{tool} is missing: apt-get install {pkg}")
    if not os.access(NETLOOP, os.X_OK):
        sys.exit(f"{NETLOOP} is missing: cargo build --release")
    only = set(a.only.split(","))
    EXTRA.extend(a.netloop_args.split())
    out_args = a.netloop_args
    reps = 1 if a.quick else a.repeats
    secs = 3 if a.quick else 5
    count = 300 if a.quick else 1000
    out = {"netloop_args": out_args, "quick": a.quick, "machine": os.uname().nodename, "cpus": os.cpu_count(), "kernel": os.uname().release,
           "repeats": reps, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        if "tcp" in only:
            k_on, k_off, nl, nls, rts = [], [], [], [], []
            for _ in range(reps):
                k_on.append(tcp_kernel(True, secs))
                k_off.append(tcp_kernel(False, secs))
                b, rt = tcp_netloop(None, secs)
                nl.append(b)
                rts.append(rt)
                nls.append(tcp_netloop(None, secs, steer=True)[0])
            out["tcp"] = {"kernel_offloads_bps": k_on, "kernel_no_offloads_bps": k_off, "netloop_bps": nl,
                          "netloop_steer_bps": nls,
                          "netloop_kept_up": [r["kept_up"] for r in rts],
                          "netloop_boundary_lost": [r["boundary_lost"] for r in rts]}
        if "tcp-1g" in only:
            nl, nls = [], []
            for _ in range(reps):
                nl.append(tcp_netloop("1Gbps", secs)[0])
                nls.append(tcp_netloop("1Gbps", secs, steer=True)[0])
            out["tcp_1g"] = {"netloop_bps": nl, "netloop_steer_bps": nls, "theoretical_bps": GIGABIT_TCP}
        if "rtt" in only:
            ks, kl, ns_, nlc, rts = [], [], [], [], []
            for _ in range(reps):
                r, l = rtt_kernel(count)
                ks.append(r)
                kl.append(l)
                r, l, rt = rtt_netloop(count)
                ns_.append(r)
                nlc.append(l)
                rts.append(rt)
            out["rtt"] = {"kernel_remote": ks, "kernel_local_ping": kl, "netloop_remote": ns_,
                          "netloop_local_ping": nlc, "expected_model_ns": 20e6 + 6 * (98 + 24) * 8,
                          "netloop_lateness": [r["event_lateness"] for r in rts]}
        if "udp64" in only:
            ladder = [10_000, 30_000, 60_000, 100_000, 150_000, 200_000, 300_000]
            rows = []
            for pps in ladder:
                kp, kl = udp_kernel(pps, secs)
                np_, nl_, rt = udp_netloop(pps, secs)
                rows.append({"offered_pps": pps, "kernel_sent": kp, "kernel_lost": kl,
                             "netloop_sent": np_, "netloop_lost": nl_,
                             "netloop_boundary_lost": rt["boundary_lost"], "netloop_kept_up": rt["kept_up"]})
                print(f"udp64 {pps} pps: kernel loss {kl}/{kp}, netloop loss {nl_}/{np_} "
                      f"(boundary {rt['boundary_lost']})", flush=True)
            out["udp64"] = rows
    finally:
        cleanup()
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    tmp = a.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=2)
    os.replace(tmp, a.json)
    text = report(out)
    if a.md:
        write_md(a.md, out, text)
    print(f"\nJSON: {a.json}")


def write_md(path, o, text):
    with open(path, "w") as f:
        f.write("# Real-time benchmark: netloop against kernel forwarding\n\n")
        f.write(f"Machine: {o['cpus']} CPUs, Linux {o['kernel']}; run {o['time']}; "
                f"medians of {o['repeats']} repeat(s). Produced by `sudo bench/realtime.py"
                f"{' --quick' if o.get('quick') else ''} --md bench/results/realtime.md`; "
                "every figure is in the JSON beside this file.\n\n")
        f.write("```\n" + text + "\n```\n")


def report(o):
    lines = []
    print = lambda *args, **kw: lines.append(" ".join(str(x) for x in args))  # noqa: E731
    print(f"\nnetloop real-time benchmark — {o['cpus']} CPUs, Linux {o['kernel']}, medians of {o['repeats']}")
    if "tcp" in o:
        t = o["tcp"]
        kon, koff, nl = med(t["kernel_offloads_bps"]), med(t["kernel_no_offloads_bps"]), med(t["netloop_bps"])
        print("\nTCP (iperf3, 1 stream) through one router, unlimited rate")
        print(f"  kernel, offloads on   {fmt_rate(kon):>14}")
        print(f"  kernel, offloads off  {fmt_rate(koff):>14}")
        for name, v in (("netloop", nl), ("netloop --steer", med(t.get("netloop_steer_bps", [])))):
            if v is None:
                continue
            print(f"  {name:<21} {fmt_rate(v):>14}   {v / kon:.2f}× kernel (offloads), "
                  f"{v / koff:.2f}× kernel (no offloads), {v / 0.51e9:.1f}× ns-3's 0.51 Gbit/s "
                  f"[target ≥ 0.5× kernel and ≥ 10× ns-3]")
    if "tcp_1g" in o:
        for name, key in (("", "netloop_bps"), (" (--steer)", "netloop_steer_bps")):
            if key not in o["tcp_1g"]:
                continue
            nl = med(o["tcp_1g"][key])
            print(f"\nTCP over modelled 1 Gbit/s links{name}: {fmt_rate(nl)} = {nl / GIGABIT_TCP * 100:.1f} % "
                  f"of 941.48 Mbit/s [target ≥ 99 %]")
    if "rtt" in o:
        r = o["rtt"]
        k = med([x["p50"] for x in r["kernel_remote"]])
        n = med([x["p50"] for x in r["netloop_remote"]])
        n99 = med([x["p99"] for x in r["netloop_remote"]])
        k99 = med([x["p99"] for x in r["kernel_remote"]])
        nsd = med([x["sd"] for x in r["netloop_remote"]])
        exp = r["expected_model_ns"]
        kl = med([x["p50"] for x in r["kernel_local_ping"]])
        nl = med([x["p50"] for x in r["netloop_local_ping"]])
        print("\nRound trips (UDP probe with kernel stamps), two routers")
        print(f"  kernel, no delay: median {fmt_us(k)}, p99 {fmt_us(k99)}")
        print(f"  netloop, 1 Gbit/s 10 ms: median {fmt_us(n)}, p99 {fmt_us(n99)}, sd {fmt_us(nsd)}")
        print(f"  netloop median − (model's {fmt_us(exp)} + kernel's median) = {fmt_us(n - exp - k)} "
              f"[target ≤ 30 µs]; p99 − (model + kernel p99) = {fmt_us(n99 - exp - k99)} [target ≤ 100 µs]; "
              f"sd {fmt_us(nsd)} [target < 20 µs]")
        print(f"  ping to the first router's own address: kernel {fmt_us(kl)}, netloop {fmt_us(nl)} "
              f"= {nl / kl:.2f}× [target ≤ 2×]")
    if "udp64" in o:
        print("\n64-byte UDP frames (iperf3 -l 18), loss by offered rate")
        best_k = best_n = 0
        for row in o["udp64"]:
            kl = row["kernel_lost"] / max(row["kernel_sent"], 1)
            nl = row["netloop_lost"] / max(row["netloop_sent"], 1)
            if kl < 0.001:
                best_k = row["offered_pps"]
            if nl < 0.001:
                best_n = row["offered_pps"]
            print(f"  {row['offered_pps']:>8} pps: kernel {kl * 100:6.2f} %   netloop {nl * 100:6.2f} % "
                  f"(lost at netloop's boundary: {row['netloop_boundary_lost']})")
        print(f"  highest rate with < 0.1 % loss: kernel ≥ {best_k} pps, netloop ≥ {best_n} pps "
              f"= {best_n / max(best_k, 1):.2f}× [target ≥ 0.9×]")
    text = "\n".join(lines)
    sys.stdout.write(text + "\n")
    return text


if __name__ == "__main__":
    main()
