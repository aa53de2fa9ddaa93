#!/bin/bash
# The mixed experiment's netloop-p2 row (queue-keys-arrival-hints-2026-11-29/mixed.py)
# for several builds in turn, each copied to target/release/netloop for its run
# (the one there is put back at the end); run as root from anywhere in the
# repository. Writes OUTDIR/LABEL-PAIRS-ROUND.json.
# usage: mixed-ab.sh OUTDIR PAIRS ROUNDS label=BIN[:ENV=VAL] ...
set -e
out=$(realpath "$1"); shift
cd "$(git rev-parse --show-toplevel)"
pairs=$1; rounds=$2; shift 2
saved=$(mktemp)
cp target/release/netloop "$saved"
for r in $(seq 1 $rounds); do
  for lb in "$@"; do
    l=${lb%%=*}; spec=${lb#*=}; b=${spec%%:*}; envs=""; [[ "$spec" == *:* ]] && envs=${spec#*:}
    cp $b target/release/netloop
    env $envs python3 bench/results/queue-keys-arrival-hints-2026-11-29/mixed.py $pairs 1 "$out/$l-$pairs-$r.json" 2>&1 | tail -1 | sed "s/^/$l r$r: /"
  done
done
cp "$saved" target/release/netloop
rm -f "$saved"
