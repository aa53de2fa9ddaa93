#!/usr/bin/env python3
"""A Mininet script, unchanged from what Mininet would run: two hosts on
two switches joined by a 10 Mbit/s, 20 ms bottleneck. It prints the round
trip (exactly 40 ms plus serialisation on netloop) and iperf's rate.

    sudo python3 -m netloop.mininet examples/mininet/bottleneck.py
"""

from mininet.link import TCLink
from mininet.log import info, setLogLevel
from mininet.net import Mininet
from mininet.topo import Topo


class Bottleneck(Topo):
    def build(self, bw=10, delay="20ms"):
        s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
        self.addLink(self.addHost("h1"), s1)
        self.addLink(self.addHost("h2"), s2)
        self.addLink(s1, s2, bw=bw, delay=delay, max_queue_size=100)


if __name__ == "__main__":
    setLogLevel("info")
    net = Mininet(topo=Bottleneck(), link=TCLink)
    net.start()
    h1, h2 = net.get("h1", "h2")
    info(h1.cmd("ping -c 3", h2.IP()))
    net.iperf((h1, h2), seconds=3)
    results = net.stop()
    info(f"*** netloop kept up with real time: {results.kept_up}\n")
