"""Real-time runs of a topology (`netloop run TOPO --realtime`, no real hosts)
for several builds in turn, ROUNDS times: each run's event-thread CPU per
event (event CPU share x simulated seconds / events), late events, lateness
p99 and sleeps. usage: python3 rtab.py TOPO ROUNDS label=BIN[:ENV=VAL] ...
(OUT=FILE.json in the environment writes the figures.)"""
import subprocess, json, sys, statistics, os, tempfile
topo, rounds = sys.argv[1], int(sys.argv[2])
confs = [a.split('=',1) for a in sys.argv[3:]]  # label=BIN[:ENV=VAL]
res = {}
tmp = os.path.join(tempfile.mkdtemp(), 'rt.json')
for r in range(rounds):
    for l, spec in confs:
        b, *envs = spec.split(':')
        env = dict(os.environ); env.update(dict(e.split('=') for e in envs))
        subprocess.run([b, 'run', '-q', '--no-progress', topo, '--realtime', '--json', tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        rt = json.load(open(tmp))['realtime']
        ns = rt['event_cpu_share'] * rt['sim_seconds'] / rt['events'] * 1e9
        p99 = rt['event_lateness']['p99_ns']/1e3
        res.setdefault(l, []).append((ns, rt['late_events'], p99))
        print(l, r, f"{ns:.0f} ns/ev cpu {rt['event_cpu_share']:.3f} late {rt['late_events']} p99 {p99:.0f}us sleeps {rt['sleeps']}", flush=True)
out = os.environ.get('OUT')
if out:
    json.dump(res, open(out, 'w'), indent=1)
for l, v in res.items():
    print(l, 'median ns/event', round(statistics.median(x[0] for x in v)), 'late', [x[1] for x in v], 'p99 us', [round(x[2]) for x in v])
