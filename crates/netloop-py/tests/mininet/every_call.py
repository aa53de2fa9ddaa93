#!/usr/bin/env python3
"""A Mininet test script, written as for Mininet, using each call that
netloop.mininet provides; run by test_mininet.py with
``python -m netloop.mininet every_call.py``. Every check is an assert."""

import re
import sys

from mininet.cli import CLI
from mininet.link import TCLink
from mininet.log import info, output, setLogLevel
from mininet.net import Mininet
from mininet.node import Controller, OVSKernelSwitch
from mininet.topo import Topo
from mininet.util import dumpNodeConnections, irange, quietRun


class TwoSwitchTopo(Topo):
    """h1, h2 on s1; h3 on s2; s1-s2 shaped."""

    def build(self, delay="5ms"):
        s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
        for h in irange(1, 2):
            self.addLink(self.addHost(f"h{h}"), s1)
        self.addLink(self.addHost("h3"), s2, bw=20, delay="1ms", max_queue_size=50)
        self.addLink(s1, s2, bw=10, delay=delay, jitter="0ms", loss=0)


def rtt_ms(out):
    m = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", out)
    assert m, out
    return float(m.group(1))


setLogLevel("info")
net = Mininet(topo=TwoSwitchTopo(), link=TCLink, switch=OVSKernelSwitch, controller=Controller)
h1, h2, h3 = net.get("h1", "h2", "h3")
s1 = net["s1"]
# Before start: Mininet's names, addresses from the base, in order.
assert [h.name for h in net.hosts] == ["h1", "h2", "h3"], net.hosts
assert [s.name for s in net.switches] == ["s1", "s2"]
assert sorted(net) == ["c0", "h1", "h2", "h3", "s1", "s2"], list(net)
assert len(net.links) == 4
assert h1.IP() == "198.18.0.1" and h3.IP() == "198.18.0.3", (h1.IP(), h3.IP())
assert str(h1.intf()) == "h1-eth0" and h1.defaultIntf() is h1.intf("h1-eth0")
assert [i.name for i in s1.intfList()] == ["s1-eth1", "s1-eth2", "s1-eth3"]
# A node added by the net's own calls, before start.
h4 = net.addHost("h4", ip="198.18.0.44/15")
net.addLink(h4, s1, cls=TCLink, delay="2ms")
assert h4.IP() == "198.18.0.44"

net.start()
dumpNodeConnections(net.hosts)
info("*** a shell per host: cd and variables persist\n")
assert h1.cmd("cd /tmp; X=netloop").strip() == ""
assert h1.cmd("echo $X $PWD").strip() == "netloop /tmp"
assert "h1-eth0" in h1.cmd("ip -o link show h1-eth0")
assert h1.MAC() and re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", h1.MAC()), h1.MAC()
assert h1.MAC() in h1.cmd("ip -o link show h1-eth0")

info("*** pingAll, pingPair, ping\n")
assert net.pingAll() == 0.0
assert net.pingPair() == 0.0
assert net.ping([h1, h3], timeout=2) == 0.0
# h1 -> h3 crosses h1-s1 (unshaped), s1-s2 (5 ms each way), s2-h3 (1 ms):
# 12 ms and a little serialisation at 10 and 20 Mbit/s: never less (the
# delay is exact), and the upper bound leaves room for a loaded machine.
out = h1.cmd("ping -c 3 -i 0.2", h3.IP())
assert 12.0 <= rtt_ms(out) < 20.0, out

info("*** sendCmd / waitOutput / monitor, popen, pexec\n")
h2.sendCmd("sleep 0.2; echo late")
assert h2.waiting
assert h2.waitOutput().strip() == "late" and not h2.waiting
h2.cmd("sleep 30 &")
assert h2.lastPid and h2.lastPid > 1
p = h3.popen(["ping", "-c", "1", h1.IP()])
so, _ = p.communicate()
assert p.returncode == 0 and b"1 received" in so
out, err, code = h3.pexec("sh", "-c", "echo out; echo err >&2; exit 3")
assert (out, err, code) == ("out\n", "err\n", 3), (out, err, code)

info("*** iperf over the 10 Mbit/s link\n")
tcp = net.iperf((h1, h3), seconds=3)
assert len(tcp) == 2 and all(r.endswith("bits/sec") for r in tcp), tcp
mbps = float(tcp[1].split()[0]) * (1000 if tcp[1].split()[1].startswith("G") else 1)
assert 5.0 < mbps <= 10.0, tcp
udp = net.iperf((h1, h3), l4Type="UDP", udpBw="5M", seconds=2)
assert udp[0] == "5M" and len(udp) == 3, udp

info("*** run-time changes: configLinkStatus, intf.config\n")
net.configLinkStatus("s1", "s2", "down")
assert net.ping([h1, h3], timeout=1) == 100.0
net.configLinkStatus("s1", "s2", "up")
assert net.ping([h1, h3], timeout=2) == 0.0
link = net.linksBetween(net["s1"], net["s2"])[0]
link.intf1.config(delay="25ms")
link.intf2.config(delay="25ms")
out = h1.cmd("ping -c 2 -i 0.2", h3.IP())
assert 52.0 <= rtt_ms(out) < 60.0, out
link.intf1.config(loss=100)
assert net.ping([h1, h3], timeout=1) == 100.0
link.intf1.config(loss=0)
assert net.ping([h1, h3], timeout=2) == 0.0

info("*** CLI(net) from a script of commands\n")
CLI(net, script=sys.argv[1])

res = net.stop()
assert res.conservation["unaccounted"] == 0
output("every call: OK\n")
