#!/usr/bin/env bash
# Build an earlier netloop, to measure beside this one in the same run:
#   bench/baseline/build.sh [COMMIT]   (default efdea06)
#     -> bench/baseline/build/netloop-<commit>, and bench/baseline/build/netloop
#        pointing at it
#   netloop bench speed --no-ns3 --baseline bench/baseline/build/netloop
#
# efdea06 (2026-11-22) is the engine that measured the committed baseline,
# bench/results/speed.json: issue 17's "5x today's" is 5x that engine. Its
# numbers in the file are from another day; the machine's speed changes from
# day to day (2.5x between two days here), so only a run of both builds side
# by side gives the ratio.
#
# The commit is checked out into a temporary git worktree (removed at the
# end, also on error or Ctrl-C) and built with cargo into
# bench/baseline/build/target. It needs the commit in this clone's history
# (a shallow clone: `git fetch --unshallow`). Idempotent: a binary already
# built is kept.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "$here" rev-parse --show-toplevel)"
rev="${1:-efdea06}"

if ! full="$(git -C "$repo" rev-parse --quiet --verify "$rev^{commit}")"; then
    echo "build.sh: no commit '$rev' in $repo (a shallow clone? git fetch --unshallow)" >&2
    exit 2
fi
short="${full:0:7}"
out="$here/build/netloop-$short"
mkdir -p "$here/build"
if [[ ! -x "$out" ]]; then
    tmp="$(mktemp -d)"
    cleanup() {
        git -C "$repo" worktree remove --force "$tmp/src" 2>/dev/null || true
        rm -rf "$tmp"
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    git -C "$repo" worktree add --detach --quiet "$tmp/src" "$full"
    echo "build.sh: building netloop $short (a few minutes the first time)" >&2
    CARGO_TARGET_DIR="$here/build/target" cargo build --release --quiet \
        --manifest-path "$tmp/src/Cargo.toml" -p netloop-cli
    # A name of this run's own, so that two builds at once never install
    # a half-copied binary.
    cp "$here/build/target/release/netloop" "$out.tmp.$$"
    mv "$out.tmp.$$" "$out"
fi
ln -sfn "netloop-$short" "$here/build/netloop"
echo "$out"
