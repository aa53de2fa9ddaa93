"""`python3 abu.py TOPOLOGY ROUNDS OUT.json LABEL=BINARY ...`: like
../hint-lines-2026-11-29/ab.py, plus each run's user and system CPU (rusage of the child): the kernel's zeroing of new pages shows as system time and varies run to run on this VM."""
import json, os, statistics, subprocess, sys, tempfile, resource
topo, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
builds = [a.split("=", 1) for a in sys.argv[4:]]
t = {l: {"wall": [], "user": [], "sys": []} for l, _ in builds}
with tempfile.TemporaryDirectory() as d:
    res = os.path.join(d, "r.json")
    for _ in range(rounds):
        for label, binary in builds:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([binary, "run", "-q", "--no-progress", topo, "--json", res], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t[label]["wall"].append(json.load(open(res))["wall"]["seconds"])
            t[label]["user"].append(r1.ru_utime - r0.ru_utime)
            t[label]["sys"].append(r1.ru_stime - r0.ru_stime)
json.dump({"topology": os.path.basename(topo), "rounds": rounds, "builds": t}, open(out, "w"), indent=1)
for label, s in t.items():
    m = {k: statistics.median(v) for k, v in s.items()}
    print(f"{label:8s} wall {m['wall']:.3f} s  user {m['user']:.3f} s  sys {m['sys']:.3f} s   walls {[round(x,2) for x in s['wall']]} sys {[round(x,2) for x in s['sys']]}")
