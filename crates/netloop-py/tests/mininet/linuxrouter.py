#!/usr/bin/env python3
"""Mininet's linuxrouter.py pattern: a Node with ip_forward between two
LANs, hosts with a default route through it (netloop makes r0 a simulated
router). Addresses from 198.18.0.0/15."""

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Node
from mininet.topo import Topo


class LinuxRouter(Node):
    def config(self, **params):
        super(LinuxRouter, self).config(**params)
        self.cmd("sysctl net.ipv4.ip_forward=1")

    def terminate(self):
        self.cmd("sysctl net.ipv4.ip_forward=0")
        super(LinuxRouter, self).terminate()


class NetworkTopo(Topo):
    def build(self, **_opts):
        router = self.addNode("r0", cls=LinuxRouter, ip="198.18.1.1/24")
        s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
        self.addLink(s1, router, intfName2="r0-eth1", params2={"ip": "198.18.1.1/24"})
        self.addLink(s2, router, intfName2="r0-eth2", params2={"ip": "198.19.2.1/24"})
        h1 = self.addHost("h1", ip="198.18.1.100/24", defaultRoute="via 198.18.1.1")
        h2 = self.addHost("h2", ip="198.19.2.100/24", defaultRoute="via 198.19.2.1")
        self.addLink(h1, s1)
        self.addLink(h2, s2)


setLogLevel("info")
net = Mininet(topo=NetworkTopo(), controller=None)
net.start()
h1, h2 = net.get("h1", "h2")
out = h1.cmd("traceroute -n -w 1 -q 1", h2.IP())
assert "198.18.1.1" in out and "198.19.2.100" in out, out
assert net.pingAll() == 0.0
try:
    net["r0"].cmd("ip route")
except Exception as e:  # a simulated router has no shell, and says so
    assert "simulated router" in str(e), e
else:
    raise AssertionError("r0.cmd ran")
net.stop()
print("linuxrouter: OK")
