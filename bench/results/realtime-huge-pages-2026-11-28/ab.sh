#!/bin/bash
# Interleaved A/B: real-time runs with the heap in huge pages (netloop's
# restart, the default) and without (NETLOOP_HUGE_PAGES=0).
set -u
NETLOOP=${NETLOOP:-target/release/netloop}
OUT=$1; shift
mkdir -p $OUT
for i in 1 2 3; do
  for case in dumbbell p500 p800; do
    case $case in
      dumbbell) f=examples/dumbbell.toml; extra="--duration 6s";;
      p500) f=$OUT/pairs500.toml; extra="";;
      p800) f=$OUT/pairs800.toml; extra="";;
    esac
    for hp in 1 0; do
      NETLOOP_HUGE_PAGES=$hp $NETLOOP run $f $extra --realtime -q --json $OUT/$case-hp$hp-$i.json > /dev/null 2>&1
      python3 - $OUT/$case-hp$hp-$i.json $case $hp $i <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rt = d["realtime"]; el = rt["event_lateness"]
print(f"repeat {sys.argv[4]}  {sys.argv[2]:9s} huge pages {'yes' if sys.argv[3]=='1' else 'no ':3s}  kept_up {str(rt['kept_up']):5s}  late {rt['late_events']:>8}  "
      f"p99 {el['p99_ns']/1e3:9.1f} us  p99.9 {el['p999_ns']/1e3:9.1f} us  max {el['max_ns']/1e6:8.2f} ms  steal {rt.get('steal_ns', 0)/1e6:5.0f} ms")
PY
    done
  done
done
