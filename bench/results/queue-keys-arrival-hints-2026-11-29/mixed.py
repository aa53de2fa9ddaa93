"""The mixed experiment's netloop-p2 row alone (a live iperf3 TCP flow
through two simulated routers beside N simulated pairs, real time, 10 s,
two partitions), with bench/reference.py's own functions: run from the
repository's root, as root, with the build to measure at
target/release/netloop: `python3 bench/results/queue-keys-arrival-hints-2026-11-29/mixed.py PAIRS[,PAIRS...] RUNS OUT.json`."""
import sys, json
sys.path.insert(0, 'bench')
import reference as r
out = []
for n in [int(x) for x in sys.argv[1].split(',')]:
    path = r.Path(2, rate="1Gbps", mid_rate="2Mbps", mid_delay="50ms", bg_pairs=n)
    runs = [r.attempt(r.iperf_tcp, "netloop-p2", path, 1, 10, 20) for _ in range(int(sys.argv[2]))]
    out.append({"system": "netloop-p2", "pairs": n, "runs": runs})
    print(f"mixed netloop-p2 {n:>5} pairs: live TCP {r.med([x.get('bps') for x in runs])}{r.kept('netloop-p2', runs)}", flush=True)
json.dump({"rows": out}, open(sys.argv[3], "w"), indent=1)
