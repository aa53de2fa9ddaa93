"""``Mininet``: a network of Mininet's nodes and links, run by netloop in
real time.

Until ``start()`` the network is a description (nodes, interfaces, their
addresses: hosts get theirs from ``ipBase`` in the order they are added, as
in Mininet). ``start()`` hands it to netloop — hosts become network
namespaces, switches learning bridges, links simulated links — and starts
it; ``stop()`` tears everything down. The tests Mininet offers
(``pingAll``, ``pingPair``, ``ping``, ``iperf``…) run real ``ping`` and
``iperf`` in the hosts and report as Mininet reports.

Differences from Mininet, by design: the default ``ipBase`` is
``198.18.0.0/15`` (the benchmarking range; Mininet's is ``10.0.0.0/8``);
MACs are netloop's; controllers are not run.
"""

from __future__ import annotations

import re
import time
from typing import Any, Iterator, Sequence

from .. import network as _netloop
from .._native import NetloopError
from .link import Intf, Link
from .log import debug, error, info, note_once, output
from .node import Controller, Host, Node, OVSKernelSwitch, Switch, _default_controller
from .util import ipAdd, netParse, waitListening

DEFAULT_IP_BASE = "198.18.0.0/15"


class Mininet:
    """A Mininet network (``Mininet(topo=…, link=TCLink, …)``) on netloop."""

    def __init__(self, topo: Any = None, switch: Any = OVSKernelSwitch, host: Any = Host,
                 controller: Any = _default_controller, link: Any = Link, intf: Any = Intf, build: bool = True,
                 xterms: bool = False, cleanup: bool = False, ipBase: str = DEFAULT_IP_BASE,  # noqa: N803
                 inNamespace: bool = False, autoSetMacs: bool = False, autoStaticArp: bool = False,  # noqa: N803
                 autoPinCpus: bool = False, listenPort: int | None = None,  # noqa: N803
                 waitConnected: bool = False, name: str = "mininet"):  # noqa: N803
        self.topo, self.switch, self.host, self.controller = topo, switch, host, controller
        self.link, self.intf = link, intf
        self.ipBase = ipBase
        self.ipBaseNum, self.prefixLen = netParse(ipBase)
        host_part = (0xFFFFFFFF >> self.prefixLen) & self.ipBaseNum
        self.nextIP = host_part if host_part > 0 else 1
        self.autoSetMacs, self.autoStaticArp = autoSetMacs, autoStaticArp
        self.hosts: list[Node] = []
        self.switches: list[Node] = []
        self.controllers: list[Node] = []
        self.links: list[Link] = []
        self.nameToNode: dict[str, Node] = {}
        self.terms: list[Any] = []
        self.name = name
        self.built = False
        self._started = False
        self._netloop: _netloop.Network | None = None
        if xterms:
            note_once("xterms", "xterms are not opened (netloop runs without a display)")
        if autoSetMacs:
            note_once("mac", "autoSetMacs ignored: netloop assigns every interface's MAC itself")
        if autoPinCpus:
            note_once("cpu", "autoPinCpus ignored: netloop's hosts are not pinned")
        if topo is not None and build:
            self.build()

    # ----- building -------------------------------------------------------

    def _add(self, node: Node, group: list[Node]) -> Node:
        if self._started:
            raise NetloopError(f"cannot add {node.name}: netloop's network is fixed once started")
        if node.name in self.nameToNode:
            raise NetloopError(f"a node named {node.name!r} exists already")
        node.net = self
        group.append(node)
        self.nameToNode[node.name] = node
        return node

    def addHost(self, name: str, cls: Any = None, **params: Any) -> Node:  # noqa: N802 - Mininet's names
        """A host, with the next address from ``ipBase`` unless ``ip`` is given."""
        defaults: dict[str, Any] = {
            "ip": ipAdd(self.nextIP, ipBaseNum=self.ipBaseNum, prefixLen=self.prefixLen) + f"/{self.prefixLen}"
        }
        self.nextIP += 1
        defaults.update(params)
        return self._add((cls or self.host)(name, **defaults), self.hosts)

    def addSwitch(self, name: str, cls: Any = None, **params: Any) -> Node:  # noqa: N802
        return self._add((cls or self.switch)(name, **params), self.switches)

    def addController(self, name: Any = "c0", controller: Any = None, **params: Any) -> Node:  # noqa: N802
        if isinstance(name, Controller):
            return self._add(name, self.controllers)
        cls = controller or self.controller or Controller
        return self._add(cls(name, **params), self.controllers)

    def addNAT(self, *args: Any, **kwargs: Any) -> Node:  # noqa: N802
        raise NetloopError("addNAT: netloop's networks have no route out of the machine (no NAT)")

    def addLink(self, node1: Any, node2: Any, port1: int | None = None, port2: int | None = None,  # noqa: N802
                cls: Any = None, **params: Any) -> Link:
        """A link between two nodes (names or nodes), of class ``cls`` or
        the network's ``link``; TCLink parameters shape it."""
        if self._started:
            raise NetloopError(f"cannot add a link {node1}-{node2}: netloop's network is fixed once started")
        n1 = self[node1] if isinstance(node1, str) else node1
        n2 = self[node2] if isinstance(node2, str) else node2
        options = {k: v for k, v in params.items() if k not in ("node1", "node2")}
        if port1 is not None:
            options["port1"] = port1
        if port2 is not None:
            options["port2"] = port2
        link = (cls or self.link)(n1, n2, **options)
        link._net = self
        self.links.append(link)
        for node, intf in ((n1, link.intf1), (n2, link.intf2)):
            # A host's address (ip= or from ipBase) is its first interface's.
            if not isinstance(node, Switch) and intf.ip is None and node.defaultIntf() is intf \
                    and node.params.get("ip"):
                intf.setIP(str(node.params["ip"]))
        return link

    def build(self) -> None:
        if self.topo is not None:
            self.buildFromTopo(self.topo)
        self.built = True

    def buildFromTopo(self, topo: Any = None) -> None:  # noqa: N802
        topo = topo or self.topo
        if not self.controllers and self.controller:
            classes = self.controller if isinstance(self.controller, list) else [self.controller]
            for i, cls in enumerate(classes):
                self.addController(f"c{i}", cls)
        info("*** Adding hosts:\n")
        for name in topo.hosts():
            self.addHost(name, **topo.nodeInfo(name))
            info(name + " ")
        info("\n*** Adding switches:\n")
        for name in topo.switches():
            params = {k: v for k, v in topo.nodeInfo(name).items() if k != "isSwitch"}
            self.addSwitch(name, **params)
            info(name + " ")
        info("\n*** Adding links:\n")
        for src, dst, params in topo.links(sort=True, withInfo=True):
            self.addLink(**params)
            info(f"({src}, {dst}) ")
        info("\n")

    # ----- looking things up ----------------------------------------------

    def getNodeByName(self, *args: str) -> Any:  # noqa: N802
        if len(args) == 1:
            return self[args[0]]
        return [self[n] for n in args]

    def get(self, *args: str) -> Any:
        return self.getNodeByName(*args)

    def __getitem__(self, key: str) -> Node:
        try:
            return self.nameToNode[key]
        except KeyError:
            raise KeyError(f"{key!r} is not a node of this network (nodes: {', '.join(self.nameToNode)})") from None

    def __delitem__(self, key: str) -> None:
        raise NetloopError(f"del net[{key!r}]: nodes cannot be removed from a netloop network")

    def __contains__(self, item: str) -> bool:
        return item in self.nameToNode

    def __iter__(self) -> Iterator[str]:
        for node in self.hosts + self.switches + self.controllers:
            yield node.name

    def __len__(self) -> int:
        return len(self.hosts) + len(self.switches) + len(self.controllers)

    def keys(self) -> list[str]:
        return list(self)

    def values(self) -> list[Node]:
        return [self[n] for n in self]

    def items(self) -> list[tuple[str, Node]]:
        return list(zip(self.keys(), self.values()))

    def linksBetween(self, node1: Node, node2: Node) -> list[Link]:  # noqa: N802
        return [lk for lk in self.links if {lk.intf1.node, lk.intf2.node} == {node1, node2}]

    def delLinkBetween(self, node1: Node, node2: Node, index: int = 0, allLinks: bool = False) -> Any:  # noqa: N802, N803
        raise NetloopError("delLinkBetween: links cannot be removed from a running netloop network "
                           "(configLinkStatus(a, b, 'down') takes one down)")

    def _mac_of(self, intf: Intf) -> str | None:
        built = self._network()
        for n in built.info()["nodes"]:
            if n["name"] == intf.node.name:
                for i in n["interfaces"]:
                    if i["name"] == intf.name:
                        return str(i["mac"]).replace("-", ":")
        return None

    # ----- netloop --------------------------------------------------------

    def _network(self) -> _netloop.Network:
        """The netloop network this one is (made once)."""
        if self._netloop is None:
            self._netloop = self._make_network()
        return self._netloop

    def _make_network(self) -> _netloop.Network:
        net = _netloop.Network(self.name)
        for node in self.hosts + self.switches:
            if isinstance(node, Switch):
                net.add_switch(node.name)
            elif node._kind() == "router":
                note_once(f"router:{node.name}", f"{node.name} has {len(node.intfs)} links: netloop makes it a "
                          "simulated router (a real host has one link)")
                net.add_router(node.name)
            elif not node.intfs:
                raise NetloopError(f"{node.name} has no link: netloop's real hosts need one")
            else:
                net.add_real_host(node.name)
        names: set[str] = set()
        for link in self.links:
            a, b = link.intf1, link.intf2
            name = f"{a.node.name}-{b.node.name}"
            k = 2
            while name in names:
                name, k = f"{a.node.name}-{b.node.name}-{k}", k + 1
            names.add(name)
            addrs = ["auto" if (isinstance(i.node, Switch) or i.ip is None) else f"{i.ip}/{i.prefixLen}"
                     for i in (a, b)]
            extra: dict[str, Any] = {}
            if addrs != ["auto", "auto"]:
                extra["addresses"] = addrs
            net.add_link(a.node.name, b.node.name, name=name, interfaces=[a.name, b.name],
                         a_to_b=a._direction() or None, b_to_a=b._direction() or None, **extra)
            link._name = name
        return net

    # ----- running --------------------------------------------------------

    def start(self) -> None:
        """Starts the network in real time (hosts become namespaces)."""
        if self._started:
            return
        if not self.built:
            self.build()
        for c in self.controllers:
            c.start()
        info(f"*** Starting {len(self.switches)} switches\n")
        for s in self.switches:
            info(s.name + " ")
        info("...\n")
        net = self._network()
        net.start()
        self._started = True
        try:
            for node in self.hosts:
                if node._kind() == "host":
                    node._attach(net[node.name])
            for node in self.hosts:
                node.config(**node.params)
            if self.autoStaticArp:
                self.staticArp()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> Any:
        """Stops the network: shells, namespaces, links. Returns netloop's
        results of the run (or None if it never started)."""
        if not self._started:
            return None
        info(f"*** Stopping {len(self.controllers)} controllers\n")
        info(f"*** Stopping {len(self.links)} links\n")
        info(f"*** Stopping {len(self.switches)} switches\n")
        info(f"*** Stopping {len(self.hosts)} hosts\n")
        try:
            for node in self.hosts:
                node._detach()
        finally:
            self._started = False
            results = self._netloop.stop() if self._netloop is not None else None
        info("\n*** Done\n")
        return results

    @property
    def results(self) -> Any:
        """netloop's results of the last run (after ``stop()``)."""
        if self._netloop is None:
            raise NetloopError("the network never ran")
        return self._netloop.results

    def run(self, test: Any, *args: Any, **kwargs: Any) -> Any:
        self.start()
        try:
            return test(*args, **kwargs)
        finally:
            self.stop()

    def interact(self) -> None:
        from .cli import CLI

        self.start()
        try:
            CLI(self)
        finally:
            self.stop()

    def waitConnected(self, timeout: float | None = None, delay: float = 0.5) -> bool:  # noqa: N802
        """Netloop's switches forward from the start."""
        return True

    def staticArp(self) -> None:  # noqa: N802
        """Every host learns every other host's MAC (``ip neigh replace``)."""
        for src in self.hosts:
            if src._kind() != "host":
                continue
            for dst in self.hosts:
                if src is not dst and dst.IP() and dst.MAC() and dst._kind() == "host":
                    src.cmd(f"ip neigh replace {dst.IP()} lladdr {dst.MAC()} dev {src.defaultIntf()}")

    def configLinkStatus(self, src: str, dst: str, status: str) -> None:  # noqa: N802
        """Takes the links between ``src`` and ``dst`` ``'down'`` or ``'up'``."""
        if src not in self.nameToNode:
            error(f"src not in network: {src}\n")
        elif dst not in self.nameToNode:
            error(f"dst not in network: {dst}\n")
        elif status not in ("up", "down"):
            error(f"unknown link status: {status} (up or down)\n")
        else:
            links = self.linksBetween(self[src], self[dst])
            if not links:
                error(f"src and dst not connected: {src} {dst}\n")
            for link in links:
                link.intf1.ifconfig(status)

    # ----- tests ----------------------------------------------------------

    def _pingable(self, hosts: Sequence[Node] | None) -> list[Node]:
        return [h for h in (hosts if hosts is not None else self.hosts) if h._kind() == "host"]

    @staticmethod
    def _parsePing(pingOutput: str) -> tuple[int, int]:  # noqa: N802, N803
        """(sent, received) of a ping's summary."""
        m = re.search(r"(\d+) packets transmitted, (\d+)( packets)? received", pingOutput)
        if m is None:
            error(f"*** Error: could not parse ping output: {pingOutput}\n")
            return 1, 0
        return int(m.group(1)), int(m.group(2))

    def ping(self, hosts: Sequence[Node] | None = None, timeout: Any = None, manualdestip: str | None = None) -> float:
        """Pings every pair of ``hosts`` (all by default) once; prints each
        host's reachability and returns the percentage lost."""
        hosts = self._pingable(hosts)
        packets = lost = 0
        output("*** Ping: testing ping reachability\n")
        opts = f"-W {timeout}" if timeout else ""
        for node in hosts:
            output(f"{node.name} -> ")
            dests = [manualdestip] if manualdestip else [d for d in hosts if d is not node]
            for dest in dests:
                ip = dest if isinstance(dest, str) else dest.IP()
                sent, received = self._parsePing(node.cmd(f"LANG=C ping -c1 {opts} {ip}"))
                packets += sent
                lost += sent - received
                output((dest if isinstance(dest, str) else dest.name) + " " if received else "X ")
            output("\n")
        ploss = 100.0 * lost / packets if packets else 0.0
        output(f"*** Results: {round(ploss)}% dropped ({packets - lost}/{packets} received)\n")
        return ploss

    def pingAll(self, timeout: Any = None) -> float:  # noqa: N802
        return self.ping(timeout=timeout)

    def pingPair(self) -> float:  # noqa: N802
        return self.ping(hosts=self._pingable(None)[:2])

    @staticmethod
    def _parsePingFull(pingOutput: str) -> tuple[int, int, float, float, float, float]:  # noqa: N802, N803
        sent, received = Mininet._parsePing(pingOutput)
        m = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", pingOutput)
        if m is None:
            return sent, received, 0.0, 0.0, 0.0, 0.0
        rttmin, rttavg, rttmax, rttdev = (float(g) for g in m.groups())
        return sent, received, rttmin, rttavg, rttmax, rttdev

    def pingFull(self, hosts: Sequence[Node] | None = None, timeout: Any = None,  # noqa: N802
                 manualdestip: str | None = None) -> list[tuple[Node, Node, tuple[Any, ...]]]:
        """Like ``ping``, returning (src, dest, (sent, received, rtt min, avg,
        max, mdev)) for each pair."""
        hosts = self._pingable(hosts)
        out = []
        opts = f"-W {timeout}" if timeout else ""
        output("*** Ping: testing ping reachability\n")
        for node in hosts:
            output(f"{node.name} -> ")
            for dest in [d for d in hosts if d is not node]:
                r = self._parsePingFull(node.cmd(f"LANG=C ping -c1 {opts} {dest.IP()}"))
                out.append((node, dest, r))
                output(f"{dest.name} " if r[1] else "X ")
            output("\n")
        output("*** Results: \n")
        for src, dest, r in out:
            output(f" {src.name}->{dest.name}: {r[1]}/{r[0]}, rtt min/avg/max/mdev "
                   f"{r[2]:0.3f}/{r[3]:0.3f}/{r[4]:0.3f}/{r[5]:0.3f} ms\n")
        return out

    def pingAllFull(self) -> list[Any]:  # noqa: N802
        return self.pingFull()

    def pingPairFull(self) -> list[Any]:  # noqa: N802
        return self.pingFull(hosts=self._pingable(None)[:2])

    @staticmethod
    def _parseIperf(iperfOutput: str) -> str:  # noqa: N802, N803
        found = re.findall(r"([\d\.]+ \w+/sec)", iperfOutput)
        if found:
            return found[-1]
        error(f"could not parse iperf output: {iperfOutput}")
        return ""

    def iperf(self, hosts: Sequence[Node] | None = None, l4Type: str = "TCP", udpBw: str = "10M",  # noqa: N803
              fmt: str | None = None, seconds: int = 5, port: int = 5001) -> list[str]:
        """iperf (version 2) between two hosts (the first and last by
        default): [server's rate, client's rate] as iperf prints them, with
        the UDP rate asked first for UDP, as Mininet returns them."""
        if not hosts:
            pingable = self._pingable(None)
            hosts = [pingable[0], pingable[-1]]
        if len(hosts) != 2:
            raise NetloopError(f"iperf: two hosts, not {len(hosts)}")
        client, server = hosts
        if l4Type not in ("TCP", "UDP"):
            raise NetloopError(f"iperf: l4Type {l4Type!r}: TCP or UDP")
        if not client.cmd("command -v iperf").strip():
            raise NetloopError("iperf: the iperf command (iperf 2) is not installed: apt-get install iperf")
        output(f"*** Iperf: testing {l4Type} bandwidth between {client} and {server} \n")
        args = f"iperf -p {port} "
        bw_args = ""
        if l4Type == "UDP":
            args += "-u "
            bw_args = f"-b {udpBw} "
        if fmt:
            args += f"-f {fmt} "
        server.sendCmd(args + "-s")
        try:
            if l4Type == "TCP" and not waitListening(client, server, port, timeout=10):
                raise NetloopError(f"iperf: the server on {server} did not listen on port {port}")
            cliout = client.cmd(f"{args}-t {seconds} -c {server.IP()} {bw_args}")
            debug(f"Client output: {cliout}\n")
            servout = ""
            # The server's report of the test: its one line with a rate
            # (iperf 2.1 prints one for TCP and for UDP).
            deadline = time.monotonic() + 10
            while "/sec" not in servout and time.monotonic() < deadline:
                servout += server.monitor(timeoutms=5000)
        finally:
            server.sendInt()
            servout_rest = server.waitOutput()
        servout += servout_rest
        debug(f"Server output: {servout}\n")
        result = [self._parseIperf(servout), self._parseIperf(cliout)]
        if l4Type == "UDP":
            result.insert(0, udpBw)
        output(f"*** Results: {result}\n")
        return result

    def iperfSingle(self, hosts: Sequence[Node] | None = None, udpBw: str = "10M", period: int = 60,  # noqa: N802, N803
                    port: int = 5001) -> list[str]:
        return self.iperf(hosts, l4Type="UDP", udpBw=udpBw, seconds=period, port=port)

    def monitor(self, hosts: Sequence[Node] | None = None, timeoutms: int = -1) -> Iterator[tuple[Node, str]]:
        """(host, output) of hosts' running commands as they print."""
        hosts = list(hosts or self.hosts)
        while any(h.waiting for h in hosts):
            for h in hosts:
                if h.waiting:
                    data = h.monitor(timeoutms=100 if timeoutms < 0 else timeoutms)
                    if data:
                        yield h, data

    def __enter__(self) -> "Mininet":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class MininetWithControlNet(Mininet):
    """Mininet's variant with a control network: the same here."""


def init() -> None:
    """Mininet checks its set-up here; netloop needs root for real hosts."""
    reason = _netloop.can_run_real_hosts()
    if reason:
        raise NetloopError(reason)
