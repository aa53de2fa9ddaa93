#!/usr/bin/env python3
"""Queue delay over time behind four queue disciplines: drop-tail, RED,
CoDel and FQ-CoDel, each in front of the same 10 Mbit/s bottleneck with a
40 ms round trip, a bulk TCP flow through it and a ping every 100 ms beside
it (simulated time; a few seconds of wall clock).

    python examples/aqm/queue_delay.py [--seconds 30] [--out out/aqm]

Every 50 ms of simulated time it reads the bottleneck's counters and
takes the mean time the frames sent in that window spent in the queue
(`queue_delay_sum_ns` over `sent_packets`); prints the median of those
windows past the first 5 s (slow start), the bulk flow's goodput, the
ping's median round trip and the drops by reason, and draws the windows
over time in queue_delay.png (with matplotlib) and writes them to
queue_delay.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import netloop

DISCIPLINES = {
    "drop-tail": {"discipline": "drop-tail", "packets": 100},
    "red": {"discipline": "red", "packets": 100, "min_threshold": 10, "max_threshold": 30},
    "codel": {"discipline": "codel", "packets": 100},
    "fq-codel": {"discipline": "fq-codel", "packets": 100},
}
WINDOW = 0.05
WARM = 5.0


def run(queue: dict, seconds: float) -> dict:
    """One run behind `queue`; the windows' queue delays (ms) and the
    run's figures."""
    net = netloop.Network("aqm", duration=f"{seconds}s", seed=3)
    a, b = net.add_host("a"), net.add_host("b")
    net.add_link(a, b, rate="10Mbps", delay="20ms", a_to_b={"queue": queue})
    net.add_traffic("tcp-bulk", a, b, name="bulk")
    net.add_traffic("ping", a, b, name="ping", interval="100ms")
    sim = net.stepped()
    t, last, windows = 0.0, (0, 0), []
    while t < seconds - 1e-9:
        t = round(t + WINDOW, 6)
        sim.run_until(t)
        d = sim.results().raw["links"][0]["a_to_b"]
        now = (d["queue_delay_sum_ns"], d["sent_packets"])
        sent = now[1] - last[1]
        windows.append((t, (now[0] - last[0]) / sent / 1e6 if sent else 0.0))
        last = now
    r = sim.results().raw
    flows = {f["name"]: f for f in r["flows"]}
    d = r["links"][0]["a_to_b"]
    steady = [q for at, q in windows if at > WARM]
    return {"windows": windows, "median_queue_ms": statistics.median(steady),
            "goodput_mbps": flows["bulk"]["tcp"]["goodput_bps"] / 1e6,
            "ping_p50_ms": flows["ping"]["delay_ns"]["p50"] / 1e6,
            "drops": d["drops"], "ecn_marked": d["ecn_marked"],
            "unaccounted": r["conservation"]["unaccounted"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0, help="simulated seconds per run (default 30)")
    ap.add_argument("--out", default="out/aqm", help="where to write queue_delay.json and .png")
    a = ap.parse_args(argv)
    if a.seconds <= WARM + WINDOW:
        ap.error(f"--seconds must be more than {WARM:g} (the first {WARM:g} s are slow start)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {name: run(q, a.seconds) for name, q in DISCIPLINES.items()}
    print(f"{'discipline':10} {'queue delay':>12} {'goodput':>10} {'ping RTT':>9}  drops")
    for name, r in res.items():
        drops = ", ".join(f"{k} {v}" for k, v in sorted(r["drops"].items())) or "none"
        print(f"{name:10} {r['median_queue_ms']:9.2f} ms {r['goodput_mbps']:6.2f} Mb/s "
              f"{r['ping_p50_ms']:6.2f} ms  {drops}")
    (out / "queue_delay.json").write_text(json.dumps(res, indent=1))
    try:
        import matplotlib
    except ImportError:
        print("no matplotlib: no plot (pip install matplotlib)", file=sys.stderr)
        return 0
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for name, r in res.items():
        ax.plot([t for t, _ in r["windows"]], [q for _, q in r["windows"]], label=name, lw=1)
    ax.axhline(5, color="grey", ls="--", lw=0.8, label="CoDel's target (5 ms)")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("queueing delay, mean per 50 ms (ms)")
    ax.set_title("10 Mbit/s, 40 ms RTT, one bulk TCP flow: queue delay by discipline")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "queue_delay.png", dpi=110)
    print(f"wrote {out / 'queue_delay.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
