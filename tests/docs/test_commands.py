"""Every command shown in README.md and docs/*.md works as written.

The shell blocks (```sh, ```bash) of those files are read line by line; each
command found there must be in ``HOW`` below, which says how this test runs
it. A command added to the docs without an entry here fails
``test_every_command_in_the_docs_is_known``, so none goes unchecked.

How a command runs:

- ``netloop`` is the binary in ``$NETLOOP`` (``target/debug/netloop`` by
  default), found on ``PATH`` as a reader who built it would have it.
- ``sudo``: as root (CI), the command runs without it (sudo as root changes
  nothing but ``PATH``, which sudo's ``secure_path`` would reset); without
  root it is skipped, saying so, and fails under ``NETLOOP_REQUIRE_REAL=1``.
- Commands that write ``out/`` run in a scratch directory where ``examples``
  is the repository's; commands that name the repository's scripts run in
  the repository.
- ``netloop exec`` without ``--run`` works while it is the only run; when
  other netloop runs are active on the machine (the tests must pass then
  too), ``--run ID`` of the run started for it is added, and the test says
  so.
- Commands that can't run in a test as written (hours long, or the test
  command itself) have an entry saying why, and a check of what can be
  checked: their options parse, or what they install is there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NETLOOP = Path(os.environ.get("NETLOOP", ROOT / "target" / "debug" / "netloop")).resolve()
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------------------
# Reading the docs
# ---------------------------------------------------------------------------


def strip_comment(line: str) -> str:
    """The line without a trailing shell comment (a ``#`` at the start or
    after white space, outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def doc_commands() -> dict[str, list[str]]:
    """Each command in the docs' shell blocks, with where it is
    (``file:line``)."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        in_block = False
        pending = ""
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            fence = re.match(r"^\s*```(\w*)", line)
            if fence:
                in_block = not in_block and fence.group(1) in ("sh", "bash", "shell")
                continue
            if not in_block:
                continue
            cmd = strip_comment(line)
            if cmd.endswith("\\"):
                pending += cmd[:-1] + " "
                continue
            cmd = (pending + cmd).strip()
            pending = ""
            if cmd:
                found.setdefault(cmd, []).append(f"{doc.relative_to(ROOT)}:{n}")
    return found


# ---------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------


def need_root(what: str) -> None:
    if IS_ROOT:
        return
    message = f"`{what}` needs root (it creates network namespaces)"
    if os.environ.get("NETLOOP_REQUIRE_REAL") == "1":
        pytest.fail(f"{message}, and NETLOOP_REQUIRE_REAL=1 requires it to run")
    pytest.skip(message)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{NETLOOP.parent}{os.pathsep}{e.get('PATH', '')}"
    return e


def as_run(cmd: str) -> str:
    """The command as this test runs it: see the module's doc on sudo."""
    if cmd.startswith("sudo "):
        need_root(cmd)
        return cmd[len("sudo ") :]
    return cmd


def sh(cmd: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        ["bash", "-c", cmd],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(f"$ {cmd}   (in {cwd}, exit {p.returncode})\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p


def ok(p: subprocess.CompletedProcess[str], cmd: str) -> str:
    assert p.returncode == 0, f"`{cmd}` exited with {p.returncode}:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p.stdout


def scratch(tmp_path: Path) -> Path:
    """A directory where the docs' relative paths mean what they mean in
    the repository (``examples/``), and ``out/`` is the test's own."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


def pcap_frames(path: Path) -> int:
    """Records in a nanosecond pcap file (by walking its record headers)."""
    data = path.read_bytes()
    assert data[:4] == bytes.fromhex("4d3cb2a1"), f"{path}: not a nanosecond pcap file"
    n, off = 0, 24
    while off < len(data):
        off += 16 + int.from_bytes(data[off + 8 : off + 12], "little")
        n += 1
    assert off == len(data), f"{path}: a torn last record"
    return n


# ---------------------------------------------------------------------------
# How each command is checked
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class How:
    check: Callable[[str, Path], None]
    why_not_as_written: str = ""


def run_in_scratch(*expect: str, timeout: float = 600) -> Callable[[str, Path], None]:
    """Runs the command in a scratch directory; each of ``expect`` is a file
    it must have written there (a pcap file must hold frames, a JSON file
    must parse)."""

    def check(cmd: str, tmp: Path) -> None:
        d = scratch(tmp)
        ok(sh(as_run(cmd), d, timeout), cmd)
        for f in expect:
            p = d / f
            assert p.is_file(), f"`{cmd}` did not write {f}"
            if f.endswith(".pcap"):
                assert pcap_frames(p) > 0, f"{f} holds no frame"
            elif f.endswith(".json"):
                json.loads(p.read_text())
            p.unlink()  # captures of busy links are big

    return check


def run_as_installed(*expect_out: str, timeout: float = 300) -> Callable[[str, Path], None]:
    """Runs the command in the repository with this test's Python
    environment (where the package is installed, with its ``netloop`` and
    ``python3``) first on the PATH; its output (both streams) must contain
    each of ``expect_out``."""

    def check(cmd: str, tmp: Path) -> None:
        venv_bin = Path(sys.executable).parent
        p = subprocess.run(["bash", "-c", as_run(cmd)], cwd=ROOT, capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"})
        print(f"$ {cmd}   (exit {p.returncode})\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        out = ok(p, cmd) + p.stderr
        for e in expect_out:
            assert e in out, f"`{cmd}` did not print {e!r}"

    return check


def check_report(cmd: str, tmp: Path) -> None:
    """``netloop report out`` on the run the docs make just before it."""
    d = scratch(tmp)
    ok(sh("netloop run examples/dumbbell.toml --duration 6s --json out/run.json --stats-interval 100ms",
          d, 600), "the run to report on")
    out = ok(sh(cmd, d, 120), cmd)
    page = (d / "out" / "run.html").read_text()
    assert "out/run.html" in out and 'id="verdict"' in page and "Link throughput" in page


def check_top(cmd: str, tmp: Path) -> None:
    """``netloop top … --once`` on the run the docs make just before it."""
    d = scratch(tmp)
    ok(sh("netloop run examples/dumbbell.toml --duration 6s --json out/run.json --stats-interval 100ms",
          d, 600), "the run to watch")
    out = ok(sh(cmd, d, 120), cmd)
    assert "t = 6.0 s" in out and "bottleneck a→b" in out, out


def run_in_repo(*expect_out: str, timeout: float = 1800) -> Callable[[str, Path], None]:
    """Runs the command in the repository; its output must contain each of
    ``expect_out``."""

    def check(cmd: str, tmp: Path) -> None:
        out = ok(sh(as_run(cmd), ROOT, timeout), cmd)
        for e in expect_out:
            assert e in out, f"`{cmd}` did not print {e!r}"

    return check


def check_exec(cmd: str, tmp: Path) -> None:
    """``netloop exec h1 -- …`` in a running network: real-hosts.toml,
    whose h1 and h2 are the addresses the docs use, is started for it."""
    need_root(cmd)
    d = scratch(tmp)
    run = subprocess.Popen(
        [str(NETLOOP), "run", "examples/real-hosts.toml", "--log-dir", str(d / "logs")],
        cwd=d,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # The run id is in its namespaces' names: "h1: namespace nl-<id>-h1, …".
        run_id = None
        deadline = time.monotonic() + 60
        assert run.stdout is not None
        while run_id is None:
            line = run.stdout.readline()
            assert line, f"real-hosts.toml ended before its hosts were up (exit {run.wait()})"
            m = re.search(r"namespace nl-([0-9a-f]{6})-h1", line)
            run_id = m.group(1) if m else None
            assert time.monotonic() < deadline, "real-hosts.toml's hosts never came up"
        others = [
            r.stem
            for r in Path("/run/netloop").glob("*.json")
            if r.stem != run_id and owner_alive(r)
        ]
        run_cmd = as_run(cmd)
        if others:
            run_cmd = run_cmd.replace("netloop exec ", f"netloop exec --run {run_id} ", 1)
            print(f"other netloop runs are active ({', '.join(others)}): running `{run_cmd}`")
        out = ok(sh(run_cmd, d, 60), cmd)
        assert "3 packets transmitted, 3 received" in out, out
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def owner_alive(record: Path) -> bool:
    try:
        pid = json.loads(record.read_text())["owner_pid"]
    except (OSError, ValueError, KeyError):
        return False
    return Path(f"/proc/{pid}").exists()


def check_bench_speed(cmd: str, tmp: Path) -> None:
    """A short run of the same command, netloop only."""
    out = tmp / "speed.json"
    reduced = f"{cmd} --flows 1,100 --duration 1 --repeats 1 --no-ns3 --json {out}"
    text = ok(sh(reduced, ROOT, 600), reduced)
    assert "netloop" in text
    assert json.loads(out.read_text())


def check_bench_speed_baseline(cmd: str, tmp: Path) -> None:
    """The command with 1 flow for 1 s, once, and this build standing in for
    the baseline's (bench/baseline/build.sh takes minutes): the table has
    the baseline's columns and the JSON its runs."""
    out = tmp / "speed.json"
    reduced = re.sub(r"--flows \S+", "--flows 1", cmd)
    reduced = re.sub(r"--baseline \S+", f"--baseline {NETLOOP}", reduced)
    reduced += f" --duration 1 --repeats 1 --json {out}"
    text = ok(sh(reduced, ROOT, 600), reduced)
    assert "vs baseline (target ≥ 5×)" in text
    row = json.loads(out.read_text())["rows"][0]
    assert row["baseline"]["samples"] and row["vs_baseline"] > 0


def check_baseline_build(cmd: str, tmp: Path) -> None:
    """The script parses, and refuses a commit this clone lacks, naming it
    (building the default one takes minutes)."""
    ok(sh(f"bash -n {cmd}", ROOT, 60), f"bash -n {cmd}")
    p = sh(f"{cmd} no-such-commit", ROOT, 60)
    assert p.returncode == 2 and "no commit 'no-such-commit'" in p.stderr, (p.returncode, p.stderr)


def check_fuzz_options(cmd: str, tmp: Path) -> None:
    """fuzz/run takes the command's options: given them with a target that
    does not exist, it gets as far as refusing the target (exit 2), which it
    checks after every option has parsed; and --help describes them."""
    words = cmd.split()
    options = [w for w in words[1:] if w.startswith("-")]
    values = [w for i, w in enumerate(words[1:], 1) if words[i - 1] == "--seconds"]
    probe = " ".join(["fuzz/run", *sum((["--seconds", v] for v in values), []), *[o for o in options if o != "--seconds"], "no_such_target"])
    p = sh(probe, ROOT, 60)
    assert p.returncode == 2 and "no target 'no_such_target'" in p.stderr, (probe, p.stderr)
    helptext = ok(sh("fuzz/run --help", ROOT, 60), "fuzz/run --help")
    for o in options:
        assert o in helptext, f"fuzz/run --help does not describe {o}"


def check_pip_install(cmd: str, tmp: Path) -> None:
    """scripts/test's Python stage runs `pip install "./crates/netloop-py[test,opcua]"`
    into the environment this test runs in: the package, and the extras the
    second line names, are there."""
    import netloop  # noqa: F401  (installed from ./crates/netloop-py)

    if "[test,opcua]" in cmd:
        import asyncua  # noqa: F401
        import pytest as _  # noqa: F401
    if "[cosim]" in cmd:
        import helics  # noqa: F401


def check_aqm_example(cmd: str, tmp: Path) -> None:
    """The queue-delay example, with this test's Python (which has the
    netloop package): it writes what it says, and shows what
    docs/topology.md says it shows."""
    d = scratch(tmp)
    args = cmd.split()[cmd.split().index("python") + 2:]
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "aqm" / "queue_delay.py"), *args],
                       cwd=d, capture_output=True, text=True, timeout=600, env=env())
    ok(r, cmd)
    res = json.loads((d / "out" / "aqm" / "queue_delay.json").read_text())
    assert set(res) == {"drop-tail", "red", "codel", "fq-codel"}, res.keys()
    assert all(v["unaccounted"] == 0 for v in res.values())
    # A standing queue behind drop-tail; CoDel keeps it under its target,
    # and FQ-CoDel's ping rides beside the bulk flow at the bare path's
    # round trip (40 ms and its own frames).
    assert res["drop-tail"]["median_queue_ms"] > 50, res["drop-tail"]["median_queue_ms"]
    assert res["codel"]["median_queue_ms"] < 5, res["codel"]["median_queue_ms"]
    assert res["fq-codel"]["ping_p50_ms"] < 41.5, res["fq-codel"]["ping_p50_ms"]
    assert "codel" in r.stdout and "queue delay" in r.stdout, r.stdout


def check_trace_maker(cmd: str, tmp: Path) -> None:
    """The documented command makes exactly the committed trace (run with
    its output elsewhere, so as not to write into the repository)."""
    args = cmd.split()[cmd.split().index("python3") + 2:]
    out = args.index("--out") + 1
    committed = ROOT / args[out]
    args[out] = str(tmp / "made.trace")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "trace" / "make_trace.py"), *args],
                       capture_output=True, text=True, timeout=120)
    ok(r, cmd)
    assert (tmp / "made.trace").read_bytes() == committed.read_bytes(), \
        f"{committed.relative_to(ROOT)} is not what `{cmd}` makes"
    assert "mean 9.97 Mbit/s" in r.stdout, r.stdout


def check_cellular_example(cmd: str, tmp: Path) -> None:
    """iperf3 between real hosts across the traced link: it ends when
    iperf3 is done, and the link carried what the trace lets through."""
    d = scratch(tmp)
    ok(sh(as_run(cmd), d, 120), cmd)
    r = json.loads((d / "out" / "cellular.json").read_text())
    assert r["conservation"]["unaccounted"] == 0
    cell = next(link for link in r["links"] if link["name"] == "cell")
    trace = cell["a_to_b"]["trace"]
    assert trace["kind"] == "mahimahi" and trace["source"] == "cellular.down", trace
    assert 9.9e6 < trace["mean_bps"] < 10.0e6, trace
    # iperf3 sent for 8 s: about the trace's mean (less what slow start
    # and the outages cost), never more.
    seconds = 8.0
    sent = cell["a_to_b"]["received_bytes"] * 8 / seconds
    assert 4e6 < sent < 11e6, sent
    iperf = [c for c in r["realtime"]["commands"] if c["cmd"].startswith("iperf3 -c")]
    assert iperf and iperf[0]["exit_code"] == 0, r["realtime"]["commands"]


def check_cosim_example(cmd: str, tmp: Path) -> None:
    """The co-simulation example, run with this test's Python (which has the
    `cosim` extra: scripts/test installs it) and netloop."""
    args = cmd.split()[cmd.split().index("python") + 2:]
    if "--realtime" in args and not IS_ROOT:
        if os.environ.get("NETLOOP_REQUIRE_REAL") == "1":
            pytest.fail("the real-time example needs root")
        pytest.skip("the real-time example needs root (it makes a network namespace)")
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "cosim" / "run.py"), *args],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, NETLOOP=str(NETLOOP)),
    )
    ok(r, cmd)
    assert "round trip ms" in r.stdout and "unaccounted frames: 0" in r.stdout, r.stdout
    if "--realtime" in args:
        assert "real time: kept up" in r.stdout, r.stdout
    # Over UDP the outage loses messages; over TCP it only delays them.
    assert ("lost" in r.stdout) == ("--outage" in args and "--tcp" not in args), r.stdout


def check_grid_study_help(cmd: str, tmp: Path) -> None:
    """The study's script runs and describes itself."""
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "cosim" / "grid_study.py"), "--help"],
                       capture_output=True, text=True, timeout=60)
    assert "usage: grid_study.py" in ok(r, cmd), r.stdout


def check_grid_study_realtime(cmd: str, tmp: Path) -> None:
    """The study in real time, as written (root: a namespace); its four
    scenarios' figures printed."""
    if not IS_ROOT:
        if os.environ.get("NETLOOP_REQUIRE_REAL") == "1":
            pytest.fail("the real-time study needs root")
        pytest.skip("the real-time study needs root (it makes a network namespace)")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "cosim" / "grid_study.py"), "--realtime"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, NETLOOP=str(NETLOOP)))
    out = ok(r, cmd)
    for scenario in ("as is", "+250 ms delay", "30 % loss", "outage 1-4 s"):
        assert scenario in out, out
    assert "link_down" in out, out


def check_mpi_build(cmd: str, tmp: Path) -> None:
    """Builds with MPI where Open MPI (or MPICH) is installed, as CI has it;
    elsewhere says why it can't."""
    if shutil.which("mpicc") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must install Open MPI (.ci/run) for the MPI build")
        pytest.skip("Open MPI or MPICH is not installed (apt-get install libopenmpi-dev openmpi-bin libclang-dev)")
    ok(sh(cmd, ROOT, DEMO_TIMEOUT), cmd)


def check_mpirun_in_rust_test(cmd: str, tmp: Path) -> None:
    """The Rust test that runs the docs' mpirun commands with the MPI build
    is there and reads them from docs/partitions.md."""
    test = (ROOT / "crates/netloop-cli/tests/mpi.rs").read_text()
    assert "fn the_docs_mpirun_commands_work_as_written" in test
    assert "docs/partitions.md" in test


DEMO_TIMEOUT = 1800  # builds netloop in release mode on a fresh machine first

HOW: dict[str, How] = {
    # README.md
    "sudo scripts/demo": How(run_in_repo("== 1. OPNET SITL", "== 2. OMNeT++/INET", "UDP probe h1 → h2", timeout=DEMO_TIMEOUT)),
    "scripts/test": How(lambda c, t: None, "it is the command that runs this test (CI runs it)"),
    "cargo build --release": How(run_in_repo(timeout=DEMO_TIMEOUT)),
    "netloop check examples/two-routers.toml --verbose": How(run_in_scratch()),
    "netloop run examples/dumbbell.toml --json out/results.json --pcap r1-r2 --pcap-dir out": How(
        run_in_scratch("out/results.json", "out/r1-r2.pcap")
    ),
    "sudo netloop run examples/real-hosts.toml": How(run_in_scratch()),
    "sudo netloop exec h1 -- ping -c 3 198.18.2.2": How(check_exec),
    "sudo netloop clean": How(run_in_scratch()),
    "netloop bench speed": How(
        check_bench_speed,
        "measures 1, 100 and 10 000 flows three times each against ns-3 (minutes); run here for 1 s "
        "with 1 and 100 flows, netloop only",
    ),
    "bench/baseline/build.sh": How(
        check_baseline_build,
        "builds netloop as of 2026-11-22 (minutes); here: it parses and refuses a commit that is not there",
    ),
    "netloop bench speed --flows 1,10,100,1000,10000 --no-ns3 --baseline bench/baseline/build/netloop": How(
        check_bench_speed_baseline,
        "runs 5 flow counts three times with both builds (minutes); here 1 flow for 1 s, this build as its own baseline",
    ),
    "sudo bench/run": How(
        lambda c, t: ok(sh("python3 bench/reference.py --help", ROOT, 120), "bench/reference.py --help"),
        "the quick profile takes about 15 minutes on 2 cores (bench/README.md) and installs ns-3; its "
        "logic is tested by bench/test_bench.py, and here its options parse",
    ),
    "sudo netloop bench wakeup": How(run_in_scratch("bench/out/wakeup.json")),
    # docs/mininet.md: as a user who pip installed the package runs them:
    # its `netloop` and `python3` first on the PATH.
    "sudo python3 -m netloop.mininet examples/mininet/bottleneck.py": How(
        run_as_installed("*** Results: [", "0% packet loss")
    ),
    "sudo netloop mn --topo tree,2,2 --link tc,bw=10,delay=10ms --test pingall": How(
        run_as_installed("*** Results: 0% dropped (12/12 received)")
    ),
    # docs/report.md
    "netloop run examples/dumbbell.toml --duration 6s --json out/run.json --stats-interval 100ms": How(
        run_in_scratch("out/run.json")
    ),
    "netloop report out": How(check_report),
    # docs/series.md
    "netloop top out/run.series.jsonl --once": How(check_top),
    # docs/capture.md
    "netloop run examples/two-routers.toml --pcap r1-r2 --pcap h1:eth0 --pcap-dir out": How(
        run_in_scratch("out/r1-r2.pcap", "out/h1-eth0.pcap")
    ),
    "netloop run examples/dumbbell.toml --duration 6s --pcap bottleneck --pcap h6:eth0 --pcap-dir out": How(
        run_in_scratch("out/bottleneck.pcap", "out/h6-eth0.pcap")
    ),
    "netloop run examples/given-cut.toml --partitions 2 --pcap all --pcap-dir out": How(
        run_in_scratch("out/h1-r1.pcap", "out/r1-r2.pcap", "out/r2-h2.pcap")
    ),
    # docs/partitions.md
    "netloop run examples/dumbbell.toml --duration 6s --partitions 2 --json out/results.json": How(
        run_in_scratch("out/results.json")
    ),
    "netloop run examples/given-cut.toml --partitions 2 --json out/given.json": How(
        run_in_scratch("out/given.json")
    ),
    "netloop run examples/dumbbell.toml --duration 6s --partitions 2 --sync null --json out/null.json": How(
        run_in_scratch("out/null.json")
    ),
    "cargo build --release --features mpi": How(check_mpi_build),
    "mpirun -np 2 netloop run examples/dumbbell.toml --duration 6s --mpi --json out/mpi.json": How(
        check_mpirun_in_rust_test,
        "needs the MPI build: crates/netloop-cli/tests/mpi.rs runs it as written (scripts/test's MPI stage)",
    ),
    # docs/python.md
    "pip install ./crates/netloop-py": How(
        check_pip_install, "scripts/test installs the package so into the environment this test runs in"
    ),
    'pip install "./crates/netloop-py[test,opcua]"': How(
        check_pip_install, "scripts/test runs exactly this in the environment this test runs in"
    ),
    # docs/cosimulation.md
    'pip install "./crates/netloop-py[cosim]"': How(
        check_pip_install, "scripts/test installs the package with its cosim extra into the environment this test runs in"
    ),
    "python examples/aqm/queue_delay.py --out out/aqm": How(check_aqm_example),
    "python3 examples/trace/make_trace.py --seconds 10 --seed 4 --out examples/trace/cellular.down": How(
        check_trace_maker
    ),
    "sudo netloop run examples/trace/cellular.toml --json out/cellular.json": How(check_cellular_example),
    "python examples/cosim/run.py": How(check_cosim_example),
    "python examples/cosim/run.py --outage": How(check_cosim_example),
    "python examples/cosim/run.py --tcp --outage": How(check_cosim_example),
    "python examples/cosim/grid_study.py": How(
        check_grid_study_help, "tests/cosim/test_helics.py runs the study (a minute) and checks its figures"
    ),
    'sudo env "PATH=$PATH" python examples/cosim/run.py --realtime': How(check_cosim_example),
    'sudo env "PATH=$PATH" python examples/cosim/grid_study.py --realtime': How(check_grid_study_realtime),
    "sudo bench/run --only rti": How(
        lambda c, t: ok(sh("python3 bench/reference.py --help", ROOT, 120), "bench/reference.py --help"),
        "about 10 minutes and installs packages; tests/cosim/test_rti.py runs its measurements small, and "
        "here its options parse",
    ),
    "python bench/rti.py --out bench/out/rti": How(
        lambda c, t: ok(sh(f"{sys.executable} bench/rti.py --help", ROOT, 120), "bench/rti.py --help"),
        "about 10 minutes; tests/cosim/test_rti.py runs its measurements small, and here its options parse",
    ),
    # docs/realtime.md
    "sudo netloop run examples/real-hosts.toml --json out/results.json --log-dir out/logs": How(
        run_in_scratch("out/results.json", "out/logs/h1.0.log")
    ),
    # docs/topology.md
    "netloop run examples/path-mtu.toml": How(run_in_scratch()),
    # docs/robustness.md
    "fuzz/run --seconds 3600 --grow": How(
        check_fuzz_options, "an hour per target, and --grow rewrites the committed corpus; scripts/test runs fuzz/run for 20 s"
    ),
    "fuzz/run --seconds 600 frames_host --asan": How(
        check_fuzz_options, "ten minutes with AddressSanitizer; scripts/test runs fuzz/run for 20 s"
    ),
}


def test_every_command_in_the_docs_is_known() -> None:
    found = doc_commands()
    unknown = {c: w for c, w in found.items() if c not in HOW}
    assert not unknown, (
        "commands in the docs that this test does not run (add each to HOW in "
        f"{Path(__file__).relative_to(ROOT)}): "
        + "; ".join(f"{', '.join(w)}: `{c}`" for c, w in unknown.items())
    )
    stale = [c for c in HOW if c not in found]
    assert not stale, f"HOW lists commands no doc shows any more: {stale}"


def test_the_reader_finds_comments_and_continuations() -> None:
    assert strip_comment("netloop clean   # after a kill") == "netloop clean"
    assert strip_comment("echo 'a # b'  # c") == "echo 'a # b'"
    assert strip_comment("# only a comment") == ""
    assert strip_comment("x=a#b") == "x=a#b"


@pytest.mark.parametrize("cmd", sorted(HOW), ids=lambda c: re.sub(r"\W+", "_", c)[:60])
def test_command_works_as_written(cmd: str, tmp_path: Path) -> None:
    how = HOW[cmd]
    if how.why_not_as_written:
        print(f"not run as written: {how.why_not_as_written}")
    if "netloop" in cmd and not NETLOOP.is_file():
        pytest.fail(f"{NETLOOP} is missing: build it (cargo build -p netloop-cli) or set NETLOOP")
    how.check(cmd, tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-rs"]))
