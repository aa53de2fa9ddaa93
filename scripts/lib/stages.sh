# Stages for scripts/test: each stage runs to its end whatever the ones
# before it did, and the summary at the end names every stage that failed
# (with its exit status and how long it took), so that one failure does not
# hide the next. Sourced, not run.
#
#   stage NAME COMMAND [ARGS...]   runs COMMAND with `set -e` in a subshell
#   stage_summary                  prints the table; returns 1 if any failed

_stage_names=()
_stage_results=()

# Runs one stage. COMMAND may be a shell function of the caller's; it runs
# in a subshell with errexit on, so a failing command inside it ends the
# stage (not the script).
stage() {
    local name="$1"
    shift
    local start=$SECONDS
    echo
    echo "=== stage: $name ==="
    # Not `( … ) || status=$?`: on the left of `||` bash ignores errexit
    # inside the subshell too, and a failing command would not end the stage.
    local errexit=0 status
    case $- in *e*) errexit=1 ;; esac
    set +e
    (
        set -euo pipefail
        "$@"
    )
    status=$?
    if [ "$errexit" -eq 1 ]; then set -e; fi
    local took=$((SECONDS - start))
    _stage_names+=("$name")
    if [ "$status" -eq 0 ]; then
        _stage_results+=("ok (${took} s)")
    else
        _stage_results+=("FAILED, exit status $status (${took} s)")
        echo "=== stage failed: $name (exit status $status); going on with the next ===" >&2
    fi
}

# Prints one line per stage; returns 1 if any stage failed.
stage_summary() {
    local failed=0 i
    echo
    echo "=== summary ==="
    for i in "${!_stage_names[@]}"; do
        printf '%-28s %s\n' "${_stage_names[$i]}" "${_stage_results[$i]}"
        case "${_stage_results[$i]}" in FAILED*) failed=$((failed + 1)) ;; esac
    done
    if [ "$failed" -gt 0 ]; then
        echo "$failed of ${#_stage_names[@]} stages failed" >&2
        return 1
    fi
    echo "all ${#_stage_names[@]} stages passed"
}
