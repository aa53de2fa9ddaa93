"""scripts/test runs every stage even when one fails, and says at the end
which failed (issue 15: with `set -e` one failing Rust test kept the fuzz
and Python stages from running at all)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake(bin_dir: Path, name: str, log: Path) -> None:
    """A program that writes its name and arguments to ``log`` and fails."""
    p = bin_dir / name
    p.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexit 1\n')
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_every_stage_runs_and_the_failed_ones_are_named(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    # Every stage starts with cargo or python3: with both failing, each
    # stage fails at its first command, and must still have been tried.
    # mpicc and mpirun only have to be found (the MPI stage then runs).
    for name in ("cargo", "python3", "mpicc", "mpirun"):
        fake(bin_dir, name, log)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NETLOOP_REQUIRE_REAL")}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    env["NETLOOP_TEST_VENV"] = str(tmp_path / "venv")  # no venv there: none is touched
    p = subprocess.run(
        [str(ROOT / "scripts" / "test")], env=env, capture_output=True, text=True, timeout=120
    )
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    calls = log.read_text().splitlines()
    # One first command per stage: fmt, clippy, test --workspace, the fuzz
    # corpus, the bench's build, the venv, the MPI lints.
    assert calls[:7] == [
        "cargo fmt --all -- --check",
        "cargo clippy --workspace --all-targets --quiet -- -D warnings",
        "cargo test --workspace --no-fail-fast",
        "cargo test -q --manifest-path fuzz/Cargo.toml",
        "cargo build -q -p netloop-cli",
        f"python3 -m venv {tmp_path / 'venv'}",
        "cargo clippy -p netloop-cli --all-targets --features mpi --quiet -- -D warnings",
    ], calls
    assert len(calls) == 7, f"a stage went on after its first command failed: {calls}"
    summary = out[out.index("=== summary ===") :]
    for name in (
        "formatting",
        "lints (clippy)",
        "workspace tests",
        "fuzzing",
        "benchmark logic",
        "Python and docs tests",
        "MPI partitions",
    ):
        assert f"{name}" in summary and "FAILED" in summary.split(name, 1)[1].splitlines()[0], summary
    assert "7 of 7 stages failed" in summary, summary


def test_a_stage_that_passes_is_reported_so(tmp_path: Path) -> None:
    script = tmp_path / "t.sh"
    script.write_text(
        f"""set -uo pipefail
source {ROOT / 'scripts' / 'lib' / 'stages.sh'}
one() {{ echo one; }}
two() {{ false; echo after-false; }}
stage first one
stage second two
stage third true
stage_summary
"""
    )
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "after-false" not in out, "a failing command inside a stage did not end it"
    lines = {l.split()[0]: l for l in out[out.index("=== summary ===") :].splitlines()[1:4]}
    assert lines["first"].split(None, 1)[1].startswith("ok"), lines
    assert lines["second"].split(None, 1)[1].startswith("FAILED, exit status 1"), lines
    assert lines["third"].split(None, 1)[1].startswith("ok"), lines
    assert "1 of 3 stages failed" in out
