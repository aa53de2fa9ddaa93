#!/usr/bin/env bash
# Run the ns-3 dumbbell benchmark: REPEATS runs per flow count, one at a time
# (never in parallel: the machines have 2 shared cores), then print a table of
# medians. Raw JSON lines go to bench/ns3/build/results.jsonl (appended).
#   bench/ns3/run.sh                         # N = 1 100 10000, 3 repeats
#   FLOWS="1 10" REPEATS=5 bench/ns3/run.sh --duration 2 --scheduler heap
# Extra arguments are passed to every dumbbell run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/build.sh"
flows=${FLOWS:-"1 100 10000"}
repeats=${REPEATS:-3}
out="$here/build/results.jsonl"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for n in $flows; do
    for ((r = 1; r <= repeats; r++)); do
        line=$("$here/build/dumbbell" --flows "$n" "$@")
        echo "$line" | tee -a "$out" >>"$tmp"
        echo "flows=$n run $r/$repeats: $(echo "$line" | grep -o '"wall_s":[0-9.]*')" >&2
    done
done
python3 - "$tmp" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    groups.setdefault((r["flows"], r["scheduler"], r["load_mbps"], r["duration_s"]), []).append(r)
print(f'{"flows":>6} {"H":>4} {"sched":>14} {"load":>6} {"D":>5} {"wall_med":>9} {"wall_min":>9} {"wall_max":>9} '
      f'{"setup_s":>8} {"events":>10} {"sent":>9} {"received":>9} {"drops":>8} {"pkts/s":>9} {"events/s":>9} {"rss_kb":>7}')
for (n, sched, load, d), rs in groups.items():
    w = [r["wall_s"] for r in rs]
    med = statistics.median(w)
    r0 = rs[0]
    drops = r0["drops_tc_queue_stopped"] + r0["drops_device_queue"]
    print(f'{n:>6} {r0["hosts_per_side"]:>4} {sched:>14} {load:>6g} {d:>5g} {med:>9.3f} {min(w):>9.3f} {max(w):>9.3f} '
          f'{statistics.median(r["setup_s"] for r in rs):>8.3f} {r0["events"]:>10} {r0["packets_sent"]:>9} '
          f'{r0["packets_received"]:>9} {drops:>8} {r0["packets_received"]/med:>9.0f} {r0["events"]/med:>9.0f} '
          f'{max(r["max_rss_kb"] for r in rs):>7}')
PY
