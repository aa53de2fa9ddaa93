#!/usr/bin/env python3
"""Writes a synthetic cellular-like link trace in Mahimahi's format.

Each line of a Mahimahi trace is a millisecond at which the link may
deliver one packet of up to 1 500 bytes (an "opportunity"); a millisecond
with k opportunities appears k times, and the trace repeats from its last
line. Real cellular traces (Mahimahi's own, from Verizon, T-Mobile, AT&T
LTE) show a capacity that wanders over a wide range within seconds, comes
in bursts (several packets in one millisecond, then none for a few), and
drops to nothing for a moment in a handover or a fade.

This script makes such a trace from a small model, so that the example
has one that anyone can regenerate and change:

- the capacity follows a Markov chain over four states (good, fair, poor,
  outage), each held for an exponentially distributed time (mean
  ``--hold`` ms; outages are short, a tenth of it);
- within a state, each millisecond gets a Poisson number of opportunities
  whose mean is the state's rate (its Mbit/s divided by 12, as one
  opportunity a millisecond is 12 Mbit/s);
- a seed fixes it all.

    python examples/trace/make_trace.py --seconds 10 --seed 4 --out examples/trace/cellular.down

prints the trace's mean rate and its time in each state.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

# State: (name, Mbit/s, share of the time it is entered from another).
STATES = [
    ("good", 24.0, 0.35),
    ("fair", 10.0, 0.35),
    ("poor", 3.0, 0.22),
    ("outage", 0.0, 0.08),
]

# Mbit/s of one opportunity a millisecond (1 500 bytes of IP).
OPPORTUNITY_MBPS = 12.0


def poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method: the means here are small (a few per ms)."""
    if mean <= 0:
        return 0
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def make(seconds: float, seed: int, hold_ms: float) -> tuple[list[int], dict[str, int]]:
    """The trace's lines (milliseconds) and the milliseconds spent in each state."""
    rng = random.Random(seed)
    total = int(seconds * 1000)
    lines: list[int] = []
    spent = {name: 0 for name, _, _ in STATES}
    state = 0
    ms = 0
    while ms < total:
        name, mbps, _ = STATES[state]
        mean_hold = hold_ms / 10 if name == "outage" else hold_ms
        hold = max(1, int(rng.expovariate(1 / mean_hold)))
        for t in range(ms, min(total, ms + hold)):
            lines.extend([t + 1] * poisson(rng, mbps / OPPORTUNITY_MBPS))
            spent[name] += 1
        ms += hold
        # The next state: any other, by the shares.
        others = [i for i in range(len(STATES)) if i != state]
        state = rng.choices(others, weights=[STATES[i][2] for i in others])[0]
    # Mahimahi takes the last line as the period: end on the last millisecond.
    if not lines or lines[-1] != total:
        lines.append(total)
    return lines, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of one period of the trace")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hold", type=float, default=500.0, help="mean time in a state, ms")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if a.seconds <= 0 or a.hold <= 0:
        ap.error("--seconds and --hold must be positive")
    lines, spent = make(a.seconds, a.seed, a.hold)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("".join(f"{ms}\n" for ms in lines))
    mean = len(lines) * 1504 * 8 / (a.seconds * 1000) / 1000
    shares = ", ".join(f"{k} {v / (a.seconds * 1000):.0%}" for k, v in spent.items())
    print(f"{a.out}: {len(lines)} opportunities in {a.seconds:g} s, mean {mean:.2f} Mbit/s ({shares})")


if __name__ == "__main__":
    main()
