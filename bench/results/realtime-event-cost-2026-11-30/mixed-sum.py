import json,sys,glob
for f in sorted(glob.glob(sys.argv[1])):
    d=json.load(open(f))
    for row in d['rows']:
        for run in row['runs']:
            rep=run.get('report') or {}
            pp=(rep.get('partitions') or {}).get('per_partition') or []
            parts=' | '.join(f"ev {p['events']/1e6:.1f}M cpu {p['cpu_share']:.3f} ns/ev {p['cpu_share']*p['end_s']/max(p['events'],1)*1e9:.0f} late {p['late_events']} held {p['late_held_off']} p99 {p['event_lateness']['p99_ns']/1e6:.2f}ms dem {p['demotions']}" for p in pp)
            print(f.split('/')[-1], f"{(run.get('bps') or 0)/1e6:.3f}", rep.get('late_events'), parts)
