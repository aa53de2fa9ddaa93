"""The ``netloop`` command that installing the package gives: the same
command line as the binary ``cargo build`` makes, the same results, errors
and exit codes, and ``python -m netloop`` alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import netloop

ROOT = Path(__file__).resolve().parents[3]


def command() -> str:
    p = Path(sys.prefix) / "bin" / "netloop"
    assert p.exists(), f"installing the package put no `netloop` command in {p.parent}"
    return str(p)


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def without_wall(path: Path) -> dict:
    r = json.loads(path.read_text())
    r.pop("wall", None)
    return r


def test_the_package_gives_the_netloop_command(tmp_path: Path) -> None:
    v = run(command(), "--version")
    assert v.returncode == 0 and v.stdout.strip() == f"netloop {netloop.__version__}", v
    out = tmp_path / "pkg.json"
    r = run(command(), "run", "examples/two-routers.toml", "--json", str(out), "-q")
    assert r.returncode == 0, r.stderr
    results = without_wall(out)
    assert results["conservation"]["unaccounted"] == 0 and results["flows"], results["conservation"]
    # The same results as netloop's own binary, where the tests have it.
    binary = os.environ.get("NETLOOP")
    if binary and Path(binary).exists():
        theirs = tmp_path / "bin.json"
        b = run(binary, "run", "examples/two-routers.toml", "--json", str(theirs), "-q")
        assert b.returncode == 0, b.stderr
        assert without_wall(theirs) == results
    # Errors and exit codes as the binary's: bad input 2, a usage error 2.
    bad = run(command(), "check", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and "cannot read the file" in bad.stderr, bad
    usage = run(command(), "nonsense")
    assert usage.returncode == 2 and "unrecognized subcommand 'nonsense'" in usage.stderr, usage
    helped = run(command(), "run", "--help")
    assert helped.returncode == 0 and "Usage: netloop run" in helped.stdout, helped


def test_python_dash_m_netloop_is_the_same_command() -> None:
    r = run(sys.executable, "-m", "netloop", "check", "examples/two-routers.toml", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "r1" in r.stdout and "198.18." in r.stdout, r.stdout
