"""netloop.mininet: Mininet's API on netloop. Topologies are named and
numbered as Mininet's; TCLink parameters become the directions they shape;
Mininet scripts (tests/mininet/*.py, written as for Mininet) run unchanged
under ``python -m netloop.mininet`` as root; ``netloop mn`` mirrors ``mn``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from netloop import NetloopError
from netloop.mininet.link import Link, TCLink
from netloop.mininet.net import Mininet
from netloop.mininet.topo import LinearTopo, MinimalTopo, SingleSwitchTopo, Topo
from netloop.mininet.topolib import TreeTopo

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "mininet"


def layer(*args: str, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m netloop.mininet ARGS`` with this interpreter."""
    return subprocess.run([sys.executable, "-m", "netloop.mininet", *args], capture_output=True, text=True,
                          input=stdin, timeout=timeout, cwd=SCRIPTS)


def mn(*args: str, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``netloop mn ARGS``, the command installed with the package."""
    command = Path(sys.prefix) / "bin" / "netloop"
    assert command.exists(), f"no netloop command in {command.parent}"
    return subprocess.run([str(command), "mn", *args], capture_output=True, text=True, input=stdin,
                          timeout=timeout)


def links_of(net: Mininet) -> list[dict]:
    return tomllib.loads(net._network().to_toml())["link"]


# ----- without root: the description netloop is given ------------------

def test_topologies_are_named_and_numbered_as_mininet_names_them() -> None:
    t = SingleSwitchTopo(3)
    assert t.hosts() == ["h1", "h2", "h3"] and t.switches() == ["s1"]
    assert [(a, b, i["port1"], i["port2"]) for a, b, i in t.links(withInfo=True)] == [
        ("h1", "s1", 0, 1), ("h2", "s1", 0, 2), ("h3", "s1", 0, 3)]
    lin = LinearTopo(k=3, n=2)
    assert lin.hosts() == ["h1s1", "h1s2", "h1s3", "h2s1", "h2s2", "h2s3"]
    assert ("s2", "s1") in lin.links()
    tree = TreeTopo(depth=2, fanout=2)
    assert tree.switches() == ["s1", "s2", "s3"] and tree.hosts() == ["h1", "h2", "h3", "h4"]
    # A switch's link to a child comes after the child's own subtree.
    assert tree.links() == [("s2", "h1"), ("s2", "h2"), ("s1", "s2"), ("s3", "h3"), ("s3", "h4"), ("s1", "s3")]
    assert MinimalTopo().hosts() == ["h1", "h2"]
    with pytest.raises(ValueError, match="'h9' is not a node"):
        t.addLink("h1", "h9")


def test_hosts_get_addresses_from_the_base_and_interfaces_mininets_names() -> None:
    net = Mininet(topo=TreeTopo(depth=2, fanout=2))
    assert [h.IP() for h in net.hosts] == [f"198.18.0.{k}" for k in range(1, 5)]
    assert [str(i) for i in net["s1"].intfList()] == ["s1-eth1", "s1-eth2"]
    assert net["h3"].intf().link.intf1.name == "s3-eth1"  # the link is s3's to h3
    other = Mininet(topo=SingleSwitchTopo(2), ipBase="198.19.7.0/24")
    assert other["h2"].IP() == "198.19.7.2"
    link = links_of(net)[0]
    # Links in Mininet's (natural) order of their ends; s2's port 3, as its
    # hosts took 1 and 2 when the tree was built.
    assert link["interfaces"] == ["s1-eth1", "s2-eth3"] and "addresses" not in link
    host_link = next(lk for lk in links_of(net) if lk["endpoints"][1] == "h1")
    assert host_link["addresses"] == ["auto", "198.18.0.1/15"]
    net._network().check()  # netloop builds it as it is


def test_tclink_parameters_shape_the_direction_leaving_each_interface() -> None:
    net = Mininet(topo=MinimalTopo(), link=TCLink)
    h1, s1 = net["h1"], net["s1"]
    # Mininet's TCLink: the same on both ends; params1/params2 per end.
    net.addLink(net.addHost("h3"), s1, cls=TCLink, bw=10, delay="5ms", jitter="1ms", loss=2,
                max_queue_size=100)
    net.addLink(net.addHost("h4"), s1, cls=Link, params1={"bw": 5}, params2={"ip": None})
    net.addLink(net.addHost("h5"), s1, cls=TCLink, params1={}, intfName1="h5-in", delay=3000)
    h5 = net["h5"]
    h5.intf().link.intf2.config(bw=2.5, enable_ecn=True)
    links = {tuple(lk["endpoints"]): lk for lk in links_of(net)}
    shaped = links[("h3", "s1")]
    for d in ("a_to_b", "b_to_a"):
        assert shaped[d] == {"rate": "10Mbps", "delay": "5ms", "jitter": "1ms", "loss": "2%",
                             "queue": {"packets": 100}}, shaped
    assert "a_to_b" not in links[("h4", "s1")]  # a plain Link does not shape
    assert links[("h5", "s1")]["a_to_b"] == {"delay": "3000us"}  # a bare number: tc's microseconds
    assert links[("h5", "s1")]["b_to_a"] == {"rate": "2.5Mbps", "delay": "3000us",
                                               "queue": {"discipline": "red", "ecn": True}}
    assert links[("h5", "s1")]["interfaces"] == ["h5-in", "s1-eth5"]
    assert h1.intf().link.intf1.params == {}
    net._network().check()


@pytest.mark.parametrize("params, message", [
    ({"loss": 150}, "h1-eth0: loss=150: expected a percentage from 0 to 100"),
    ({"bw": 0}, "h1-eth0: bw=0: expected a positive number of Mbit/s"),
    ({"max_queue_size": 0.5}, "h1-eth0: max_queue_size=0.5: expected a number of packets"),
])
def test_a_bad_parameter_names_the_interface(params: dict, message: str) -> None:
    net = Mininet(topo=SingleSwitchTopo(1), link=lambda a, b, **kw: TCLink(a, b, **kw, **params))
    with pytest.raises(NetloopError, match=message):
        net._network()


def test_what_netloop_cannot_do_is_an_error_that_says_why() -> None:
    net = Mininet(topo=SingleSwitchTopo(2))
    with pytest.raises(NetloopError, match="h1: the network is not running"):
        net["h1"].cmd("true")
    with pytest.raises(NetloopError, match="s1 is a simulated switch in netloop"):
        net["s1"].cmd("ovs-vsctl show")
    with pytest.raises(NetloopError, match="no route out of the machine"):
        net.addNAT()
    with pytest.raises(KeyError, match="'h9' is not a node"):
        net.get("h9")
    lonely = Mininet()
    lonely.addHost("h1")
    with pytest.raises(NetloopError, match="h1 has no link"):
        lonely._network()


def test_scripts_import_mininet_from_the_layer(tmp_path: Path) -> None:
    script = tmp_path / "imports.py"
    script.write_text(
        "import sys\n"
        "from mininet.net import Mininet\n"
        "from mininet.node import Host, OVSKernelSwitch, RemoteController, CPULimitedHost\n"
        "from mininet.link import TCLink, Intf\n"
        "from mininet.topo import Topo, SingleSwitchTopo, LinearTopo\n"
        "from mininet.topolib import TreeTopo\n"
        "from mininet.log import setLogLevel, info, output, lg\n"
        "from mininet.cli import CLI\n"
        "from mininet.util import dumpNodeConnections, irange, custom, waitListening, pmonitor\n"
        "from mininet.clean import cleanup\n"
        "import mininet.net\n"
        "print(Mininet.__module__, sys.argv[1:], __name__)\n")
    r = layer(str(script), "a", "--b")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "netloop.mininet.net ['a', '--b'] __main__"
    missing = layer(str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "cannot open the script" in missing.stderr


# ----- as root: Mininet scripts through real hosts -----------------------

@pytest.mark.netloop_real
def test_a_mininet_script_using_every_call_runs_unchanged() -> None:
    r = layer("every_call.py", "cli_commands.txt")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "every call: OK" in out
    # What the CLI's commands printed.
    assert "available nodes are: \nc0 h1 h2 h3 h4 s1 s2" in out
    assert "s1 s1-eth1:h1-eth0 s1-eth2:h2-eth0 s1-eth3:s2-eth2 s1-eth4:h4-eth0" in out
    assert "*** Results: 0% dropped (12/12 received)" in out
    assert "1 packets transmitted, 0 received, 100% packet loss" in out  # link s1 h2 down
    assert "h1-eth0<->s1-eth1 (OK OK)" in out


@pytest.mark.netloop_real
def test_mininets_linuxrouter_pattern_runs_on_a_simulated_router() -> None:
    r = layer("linuxrouter.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "linuxrouter: OK" in r.stdout
    assert "r0 has 2 links: netloop makes it a simulated router" in r.stderr


@pytest.mark.netloop_real
def test_netloop_mn_mirrors_mn() -> None:
    r = mn("--topo", "tree,2,2", "--link", "tc,bw=10,delay=1ms", "--test", "pingall")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "*** Results: 0% dropped (12/12 received)" in r.stderr
    assert "(10.00Mbit 1ms delay)" in r.stderr and "completed in" in r.stderr
    r = mn("--topo", "linear,2", "--link", "tc,bw=5", "--test", "iperf")
    assert r.returncode == 0, r.stdout + r.stderr
    results = [line for line in r.stderr.splitlines() if line.startswith("*** Results: [")]
    assert len(results) == 1 and "Mbits/sec" in results[0], r.stderr
    # The prompt, fed on standard input.
    r = mn("--topo", "single,2", stdin="h1 ping -c 1 h2\nlink s1 h2 down\nh1 ping -c 1 -W 1 h2\nexit\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 packets transmitted, 1 received" in r.stdout
    assert "1 packets transmitted, 0 received" in r.stdout
    assert mn("-c").returncode == 0


KILLED_SCRIPT = """
import time
from mininet.net import Mininet
from mininet.topo import SingleSwitchTopo

net = Mininet(topo=SingleSwitchTopo(2))
net.start()
h1, h2 = net.get("h1", "h2")
h1.cmd("sleep 300 &")
shell = h1.shell.proc.pid
with open(f"/proc/{shell}/task/{shell}/children") as f:
    background = int(f.read().split()[0])
p = h2.popen(["sleep", "300"])
print(shell, background, p.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.netloop_real
def test_a_script_killed_with_sigkill_leaves_no_program_behind(tmp_path: Path) -> None:
    # The hosts' shells, what they put in the background and what popen
    # started are born in the hosts' PID namespaces, which end with the run
    # even when nothing could tear it down.
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    proc = subprocess.Popen([sys.executable, "-m", "netloop.mininet", str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        pids = [int(w) for w in line.split()]
        assert len(pids) == 3, (line, proc.stderr.read() if proc.poll() is not None else "")  # type: ignore[union-attr]
        for pid in pids:
            os.kill(pid, 0)  # alive while the script runs
    finally:
        proc.kill()
        proc.wait()
    try:
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in pids if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]
        assert not alive, f"left running after the SIGKILL: {alive}"
    finally:
        # The namespaces and devices a SIGKILL leaves are netloop clean's
        # (and so is a program left, if the test failed).
        assert mn("-c").returncode == 0


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_netloop_mn_refuses_what_it_does_not_know() -> None:
    r = mn("--topo", "torus,3")
    assert r.returncode != 0 and "unknown topo 'torus'" in r.stderr
    r = mn("--test", "fly")
    assert r.returncode == 2 and "unknown test 'fly'" in r.stderr
