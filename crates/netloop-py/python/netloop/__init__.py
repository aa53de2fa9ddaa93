"""netloop from Python: build a network of simulated routers, switches, links
and traffic with real hosts (Linux network namespaces running real programs),
run it in real time, change its links while it runs, and read its results and
self-report — or run it as fast as possible as a plain simulation.

>>> import netloop
>>> net = netloop.Network("demo")
>>> h1, h2 = net.add_real_host("h1"), net.add_real_host("h2")
>>> r1 = net.add_router("r1")
>>> net.add_link(h1, r1, rate="100Mbps", delay="5ms")
>>> net.add_link(r1, h2, rate="100Mbps", delay="5ms")
>>> with net:                                    # needs root
...     print(h1.cmd(["ping", "-c", "3", h2.ip]))
...     net.link("r1-h2").set(delay="50ms")
"""

from ._native import NetloopError, TopologyError, __version__
from .network import (
    CommandError,
    Host,
    Link,
    Message,
    Network,
    Node,
    SteppedSimulation,
    can_run_real_hosts,
    clean,
    simulate,
)
from .results import Direction, Distribution, FlowResult, LinkResult, RealtimeReport, Results, Snapshot

__all__ = [
    "CommandError",
    "Direction",
    "Distribution",
    "FlowResult",
    "Host",
    "Link",
    "LinkResult",
    "Message",
    "NetloopError",
    "Network",
    "Node",
    "RealtimeReport",
    "Results",
    "Snapshot",
    "SteppedSimulation",
    "TopologyError",
    "__version__",
    "can_run_real_hosts",
    "clean",
    "simulate",
]
