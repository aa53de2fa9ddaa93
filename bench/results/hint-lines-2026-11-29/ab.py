"""Two builds of netloop on one topology file, alternating run by run:
`python3 ab.py TOPOLOGY ROUNDS OUT.json LABEL=BINARY ...`. Each round runs
every build once (`netloop run -q --no-progress TOPOLOGY --json ...`, a
plain simulation) and records the run's own wall time (`wall.seconds`:
the run, not the building of the network); the JSON holds every time and
the medians, and the table printed gives median, min and max per build."""
import json, os, statistics, subprocess, sys, tempfile

topo, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
builds = [a.split("=", 1) for a in sys.argv[4:]]
times = {label: [] for label, _ in builds}
with tempfile.TemporaryDirectory() as d:
    res = os.path.join(d, "r.json")
    for _ in range(rounds):
        for label, binary in builds:
            subprocess.run([binary, "run", "-q", "--no-progress", topo, "--json", res],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[label].append(json.load(open(res))["wall"]["seconds"])
summary = {label: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "runs_s": t}
           for label, t in times.items()}
json.dump({"topology": os.path.basename(topo), "rounds": rounds, "builds": summary}, open(out, "w"), indent=1)
for label, s in summary.items():
    print(f"{label:10s} median {s['median_s']:.3f} s  min {s['min_s']:.3f}  max {s['max_s']:.3f}")
