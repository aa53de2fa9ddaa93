"""Networks built in code or loaded from a topology file, run as fast as
possible (:meth:`Network.simulate`) or in real time with real hosts
(:meth:`Network.start`, or ``with network:``).

The model is the Rust core's: this module writes the topology as TOML (the
same file format as ``netloop run`` reads, see ``docs/topology.md``), hands it
to ``netloop._native`` and turns what comes back into Python objects.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, Union

from . import _native, _toml
from ._native import NetloopError, TopologyError
from .results import Results, Snapshot

NodeRef = Union[str, "Node"]
Progress = Union[bool, Callable[[float, float, float], Any]]

#: Run "until stopped": a year of simulated time.
_UNTIL_STOPPED = "8760h"

_running: "weakref.WeakSet[Network]" = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    # An interpreter that exits with networks still up (a script that forgot
    # stop(), an uncaught exception outside a with-block) tears them down.
    for net in list(_running):
        try:
            net.stop()
        except Exception as e:  # noqa: BLE001 - report and go on with the rest
            print(f"netloop: stopping {net.name} at exit: {e}", file=sys.stderr)


atexit.register(_stop_all_at_exit)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _call(method: str, /, *args: Any, **kwargs: Any) -> str:
    """How the user's code called ``method``, and where: the first frame
    outside this package (``net.add_link('a', 'r', loss=1) at test.py:12``),
    for errors to name the call rather than lines of generated TOML."""
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if v is not None]
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _PACKAGE_DIR:
        f = f.f_back
    where = f" at {f.f_code.co_filename}:{f.f_lineno}" if f is not None else ""
    return f"{method}({', '.join(shown)}){where}"


_CLONE_NEWPID = 0x20000000


@contextlib.contextmanager
def in_pid_namespace_of(init_pid: int | None, what: str) -> Any:
    """While in the block, processes this thread starts are born in the PID
    namespace whose init is ``init_pid`` (a real host's): they end with the
    run, even if this process is killed with SIGKILL, as the programs
    netloop starts itself do. ``None``: nothing changes."""
    if init_pid is None:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)

    def children_in(fd: int, where: str) -> None:
        if libc.setns(fd, _CLONE_NEWPID) != 0:
            raise NetloopError(f"{what}: {where}: {os.strerror(ctypes.get_errno())}")

    own = os.open("/proc/thread-self/ns/pid", os.O_RDONLY)
    try:
        try:
            target = os.open(f"/proc/{init_pid}/ns/pid", os.O_RDONLY)
        except OSError as e:
            raise NetloopError(f"{what}: the real host's PID namespace is gone ({e.strerror}): "
                               "has the run ended?") from None
        try:
            children_in(target, "entering the real host's PID namespace")
        finally:
            os.close(target)
        try:
            yield
        finally:
            children_in(own, "returning to this process's PID namespace")
    finally:
        os.close(own)


class CommandError(NetloopError):
    """A program run with ``check=True`` on a real host exited with an error."""

    def __init__(self, host: str, args: Sequence[str], returncode: int, output: str):
        self.host, self.args_, self.returncode, self.output = host, list(args), returncode, output
        tail = output.strip().splitlines()[-5:]
        super().__init__(
            f"{host}: `{shlex.join(args)}` exited with status {returncode}"
            + ("\n  " + "\n  ".join(tail) if tail else "")
        )


class Node:
    """A node of the topology (before and while it runs)."""

    def __init__(self, net: "Network", name: str, kind: str):
        self.net, self.name, self.kind = net, name, kind

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.kind})>"

    def __str__(self) -> str:
        return self.name

    def interfaces(self) -> list[dict[str, Any]]:
        """Its interfaces with their addresses and links, as built."""
        for n in self.net.info()["nodes"]:
            if n["name"] == self.name:
                return list(n["interfaces"])
        raise NetloopError(f"{self.name} is not a node of {self.net.name}")

    @property
    def ip(self) -> str | None:
        """The address of its first interface, without the prefix length
        (e.g. ``"198.18.0.2"``), or ``None`` if it has none."""
        return self._first("address")

    @property
    def ip6(self) -> str | None:
        """The global IPv6 address of its first interface that has one,
        without the prefix length (e.g. ``"2001:2:0:1::2"``), or ``None``
        (a network without ``ipv6=True``, a switch)."""
        return self._first("address6")

    def _first(self, field: str) -> str | None:
        for i in self.interfaces():
            if i.get(field):
                return str(i[field]).split("/")[0]
        return None


class Host(Node):
    """A real host: a network namespace joined to the simulation. Programs
    run in it with :meth:`cmd`, :meth:`run` and :meth:`popen` while the
    network is up."""

    def __init__(self, net: "Network", name: str):
        super().__init__(net, name, "namespace")
        self.namespace: str | None = None
        self.interface: str | None = None
        #: The init of the host's PID namespace while the network runs:
        #: programs started here are born in that namespace (they end with
        #: the run, whatever happens to this process).
        self.init_pid: int | None = None
        self._procs: list[subprocess.Popen[Any]] = []

    def _argv(self, args: str | Sequence[str]) -> list[str]:
        if self.namespace is None:
            raise NetloopError(
                f"{self.name}: the network is not running (start it first, e.g. `with net:`)"
            )
        inner = ["sh", "-c", args] if isinstance(args, str) else [str(a) for a in args]
        return ["ip", "netns", "exec", self.namespace, *inner]

    def run(
        self, args: str | Sequence[str], *, timeout: float | None = 60, check: bool = False,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Runs a program in this host's namespace and waits for it: a shell
        command line (``str``) or an argument list. Output is captured as
        text (stderr into stdout). ``check=True`` raises :class:`CommandError`
        on a non-zero exit status."""
        argv = self._argv(args)
        with in_pid_namespace_of(self.init_pid, f"{self.name}: running {argv[4:]}"):
            p = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=timeout, input=input, check=False,
            )
        if check and p.returncode != 0:
            raise CommandError(self.name, argv[4:], p.returncode, p.stdout)
        return p

    def cmd(self, args: str | Sequence[str], *, timeout: float | None = 60, check: bool = True) -> str:
        """Runs a program in this host's namespace and returns its output
        (stdout and stderr); raises :class:`CommandError` if it fails, unless
        ``check=False``."""
        return self.run(args, timeout=timeout, check=check).stdout

    def popen(self, args: str | Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Starts a program in this host's namespace in the background; the
        keyword arguments are :class:`subprocess.Popen`'s. It is stopped
        (SIGTERM, then SIGKILL) when the network stops, if still running."""
        argv = self._argv(args)
        with in_pid_namespace_of(self.init_pid, f"{self.name}: starting {argv[4:]}"):
            p = subprocess.Popen(argv, **kwargs)
        self._procs.append(p)
        return p

    def _stop_programs(self, grace: float = 2.0) -> None:
        live = [p for p in self._procs if p.poll() is None]
        for p in live:
            p.terminate()
        deadline = time.monotonic() + grace
        for p in live:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()


class Link:
    """A link. While the network runs its parameters can be changed, and it
    can go down and come back, at once."""

    def __init__(self, net: "Network", name: str):
        self.net, self.name = net, name

    def __repr__(self) -> str:
        return f"<Link {self.name}>"

    def set(self, *, direction: str = "both", **params: Any) -> None:
        """Changes parameters now: any of ``rate``, ``delay``, ``jitter``
        (with ``jitter_distribution``, ``reorder``), ``loss``, ``corrupt``,
        ``duplicate``, written as in a topology file (``delay="100ms"``,
        ``rate="10Mbps"``, ``loss="1%"`` or ``loss=0.01``). ``direction`` is
        ``"both"``, ``"a_to_b"`` or ``"b_to_a"``."""
        if not params:
            raise TopologyError(f"link {self.name}: set() with nothing to set")
        self._change("set", direction, params)

    def down(self, *, direction: str = "both") -> None:
        """The link goes down: frames queued or on the wire are lost
        (counted as ``link_down``), new ones are refused."""
        self._change("down", direction, {})

    def up(self, *, direction: str = "both") -> None:
        """The link comes back."""
        self._change("up", direction, {})

    def _change(self, action: str, direction: str, params: Mapping[str, Any]) -> None:
        run = self.net._live("change a link")
        fields = {"link": self.name, "action": action, "direction": direction, **params}
        run.change_link(_toml.table("[[event]]", fields, f"link {self.name}"))

    def stats(self) -> dict[str, Any]:
        """This link's counters so far (both directions), as in the results."""
        snap = json.loads(self.net._live("read statistics").snapshot(new_window=False))
        return Results(snap["results"]).link(self.name)


class Network:
    """A network: simulated nodes and links, real hosts, simulated traffic.

    Build it in code (``add_*``) or load a file (:meth:`from_file`); then run
    it as fast as possible (:meth:`simulate`) or start it in real time
    (:meth:`start`, or a ``with`` block, which always tears it down)."""

    def __init__(
        self,
        name: str = "netloop",
        *,
        seed: int | None = None,
        duration: str | None = None,
        link_defaults: Mapping[str, Any] | None = None,
        **run: Any,
    ):
        self.name = name
        self._text: str | None = None
        self._run: dict[str, Any] = {"seed": seed, "duration": duration, **run}
        self._defaults = dict(link_defaults or {})
        self._nodes: list[dict[str, Any]] = []
        self._links: list[dict[str, Any]] = []
        self._routes: list[dict[str, Any]] = []
        self._traffic: list[dict[str, Any]] = []
        self._events: list[dict[str, Any]] = []
        self._endpoints: list[dict[str, Any]] = []
        self._objects: dict[str, Node] = {}
        # The call that made each item, by (kind, index), and the lines of
        # the generated TOML that each call's item took (see `_located`).
        self._calls: dict[tuple[str, int], str] = {
            ("run", 0): _call("Network", name, seed=seed, duration=duration, **run),
            ("defaults", 0): _call("Network", name, link_defaults=link_defaults),
        }
        self._spans: list[tuple[int, int, str]] = []
        self._native: _native.LiveRun | None = None
        self._results: Results | None = None
        self._info: dict[str, Any] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._old_sigterm: Any = None
        self.log_dir: Path | None = None

    # ----- building -------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> "Network":
        """A network from a topology file (``docs/topology.md``)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise TopologyError(f"{p}: cannot read the file: {e}") from None
        return cls.from_toml(text, name=str(p))

    @classmethod
    def from_toml(cls, text: str, name: str = "<topology>") -> "Network":
        """A network from topology text."""
        net = cls(name)
        net._text = text
        for n in net.info()["nodes"]:
            net._objects[n["name"]] = (
                Host(net, n["name"]) if n["kind"] == "namespace" else Node(net, n["name"], n["kind"])
            )
        return net

    def _add_node(self, obj: Node, fields: Mapping[str, Any], call: str) -> Any:
        self._editable()
        if obj.name in self._objects:
            raise TopologyError(f"{call}: a node named {obj.name!r} exists already")
        self._calls[("node", len(self._nodes))] = call
        self._nodes.append({"name": obj.name, "kind": obj.kind, **fields})
        self._objects[obj.name] = obj
        return obj

    def add_host(self, name: str, *, real: bool = False, via: str | None = None,
                 commands: Sequence[Mapping[str, Any]] = (), **fields: Any) -> Node:
        """A host: simulated (ARP, ICMP, UDP, TCP: the source and sink of
        simulated traffic), or with ``real=True`` a real one, a namespace
        running real programs (as :meth:`add_real_host`, which takes ``via``
        and ``commands``)."""
        if real:
            return self.add_real_host(name, via=via, commands=commands, **fields)
        call = _call("add_host", name, via=via, commands=list(commands) or None, **fields)
        if via is not None or commands:
            raise TopologyError(f"{call}: via and commands are a real host's: add_host({name!r}, real=True, ...)")
        return self._add_node(Node(self, name, "host"), fields, call)

    def add_real_host(
        self, name: str, *, via: str | None = None, commands: Sequence[Mapping[str, Any]] = (), **fields: Any
    ) -> Host:
        """A real host: a network namespace running real programs, joined by
        a veth pair (``via="veth"``, the default) or a TAP device."""
        extra = {"via": via, **fields}
        if commands:
            extra["command"] = [dict(c) for c in commands]
        call = _call("add_real_host", name, via=via, commands=list(commands) or None, **fields)
        return self._add_node(Host(self, name), extra, call)

    def add_router(self, name: str, **fields: Any) -> Node:
        """A router (``forwarding_rate``, ``forwarding_queue``, …): IPv4,
        and IPv6 too in a network made with ``ipv6=True``."""
        return self._add_node(Node(self, name, "router"), fields, _call("add_router", name, **fields))

    def add_switch(self, name: str, **fields: Any) -> Node:
        """An Ethernet learning switch."""
        return self._add_node(Node(self, name, "switch"), fields, _call("add_switch", name, **fields))

    def add_attached(self, name: str, interface: str, *, force: bool = False) -> Node:
        """An existing interface of this machine (a NIC, a veth end) made a
        node: whatever is behind it joins the network."""
        call = _call("add_attached", name, interface, force=force or None)
        return self._add_node(Node(self, name, "attached"), {"interface": interface, "force": force or None}, call)

    def add_link(
        self,
        a: NodeRef,
        b: NodeRef,
        *,
        name: str | None = None,
        addresses: Sequence[str] | None = None,
        subnet: str | None = None,
        addresses6: Sequence[str] | None = None,
        subnet6: str | None = None,
        a_to_b: Mapping[str, Any] | None = None,
        b_to_a: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Link:
        """A link between two nodes with its parameters (``rate``, ``trace``,
        ``delay``, ``jitter``, ``loss``, ``queue``, ``mtu``, …) as in a
        topology file; ``a_to_b``/``b_to_a`` override them for one
        direction. A ``trace`` file is found from the working directory.
        ``interfaces`` names its two interfaces (``["h1-eth0", "auto"]``).
        ``addresses``/``subnet`` fix its IPv4 addressing, and
        ``addresses6``/``subnet6`` its IPv6 one in a network made with
        ``ipv6=True`` (otherwise both are automatic)."""
        self._editable()
        ends = [str(a), str(b)]
        link_name = name or f"{ends[0]}-{ends[1]}"
        self._calls[("link", len(self._links))] = _call(
            "add_link", ends[0], ends[1], name=name, addresses=addresses, subnet=subnet, addresses6=addresses6,
            subnet6=subnet6, a_to_b=a_to_b, b_to_a=b_to_a, **params)
        self._links.append({
            "name": name, "endpoints": ends, "addresses": list(addresses) if addresses else None,
            "subnet": subnet, "addresses6": list(addresses6) if addresses6 else None,
            "subnet6": subnet6, **params, "a_to_b": a_to_b, "b_to_a": b_to_a,
        })
        return Link(self, link_name)

    def add_route(self, node: NodeRef, prefix: str, via: str) -> None:
        """A static route on a router or host: an IPv4 prefix and next hop,
        or (in a network made with ``ipv6=True``) IPv6 ones."""
        self._editable()
        self._calls[("route", len(self._routes))] = _call("add_route", str(node), prefix, via)
        self._routes.append({"node": str(node), "prefix": prefix, "via": via})

    def add_traffic(self, kind: str, src: NodeRef, dst: NodeRef, *, name: str | None = None, **params: Any) -> None:
        """Simulated traffic between simulated hosts: ``ping``, ``udp-cbr``,
        ``udp-poisson``, ``udp-onoff``, ``tcp-bulk``, ``tcp-rr``,
        ``traceroute``, with their parameters (``rate``, ``size``, ``start``,
        ``count``, …)."""
        self._editable()
        self._calls[("traffic", len(self._traffic))] = _call("add_traffic", kind, str(src), str(dst), name=name,
                                                             **params)
        self._traffic.append({"name": name, "kind": kind, "from": str(src), "to": str(dst), **params})

    def add_event(self, at: str, link: str | Link, action: str, *, direction: str | None = None, **params: Any) -> None:
        """A scheduled change to a link (``down``, ``up``, ``set`` with
        parameters) at simulated time ``at``."""
        self._editable()
        self._calls[("event", len(self._events))] = _call(
            "add_event", at, str(getattr(link, "name", link)), action, direction=direction, **params)
        self._events.append({"at": at, "link": str(getattr(link, "name", link)), "direction": direction, "action": action, **params})

    def add_endpoint(self, name: str, host: NodeRef, port: int, *, to: str | None = None,
                     federate: str | None = None, protocol: str | None = None) -> None:
        """A message endpoint: port ``port`` of simulated host ``host``,
        from which :meth:`SteppedSimulation.send` sends (to ``to``: another
        endpoint's name or ``"address:port"``, unless the send names one) and
        at which :meth:`SteppedSimulation.receive` reads what arrived.
        ``protocol`` is ``"udp"`` (the default: one message, one datagram)
        or ``"tcp"`` (length-prefixed messages on TCP connections: reliable,
        in order). ``federate`` is for HELICS federations
        (docs/cosimulation.md)."""
        self._editable()
        self._calls[("endpoint", len(self._endpoints))] = _call(
            "add_endpoint", name, str(host), port, to=to, federate=federate, protocol=protocol)
        self._endpoints.append({"name": name, "host": str(host), "port": port, "protocol": protocol, "to": to,
                                "federate": federate})

    def _editable(self) -> None:
        if self._text is not None:
            raise NetloopError(f"{self.name} was loaded from a topology; edit the file instead")
        if self._native is not None:
            raise NetloopError(f"{self.name} is running; add to it before starting it")
        self._info = None

    def to_toml(self) -> str:
        """The topology as a file ``netloop run`` would read."""
        if self._text is not None:
            return self._text
        parts = [f"# {self.name}: written by netloop's Python API\n"]
        spans: list[tuple[int, int, str]] = []
        line = 2  # after the comment line: each part is joined after a newline

        def add(text: str, call: tuple[str, int]) -> None:
            nonlocal line
            first = line + 1
            line += text.count("\n") + 1
            parts.append(text)
            spans.append((first, line, self._calls.get(call, "")))

        run = {k: v for k, v in self._run.items() if v is not None}
        if run:
            add(_toml.table("[run]", run, "run"), ("run", 0))
        if self._defaults:
            add(_toml.table("[defaults.link]", self._defaults, "link_defaults"), ("defaults", 0))
        for kind, items in (("node", self._nodes), ("link", self._links), ("route", self._routes),
                            ("traffic", self._traffic), ("event", self._events),
                            ("endpoint", self._endpoints)):
            for i, item in enumerate(items):
                add(_toml.table(f"[[{kind}]]", item, f"{kind}[{i}]"), (kind, i))
        self._spans = spans
        return "\n".join(parts)

    @contextlib.contextmanager
    def _located(self) -> Any:
        """Errors of a network built in code name the Python call that made
        the item at fault and where it was made, instead of a line of the
        TOML that netloop's loader read (``NAME:LINE:COL: link 'a-r', field
        'loss': …`` becomes ``add_link('a', 'r', loss=1) at test.py:12:
        link 'a-r', field 'loss': …``)."""
        try:
            yield
        except TopologyError as e:
            if self._text is not None or not self._spans:
                raise
            raise TopologyError(self._explain(str(e))) from None

    def _explain(self, message: str) -> str:
        at = re.compile(rf"^{re.escape(self.name)}:(\d+):\d+: (.*)$")

        def one(line: str) -> str:
            m = at.match(line)
            if m is None:
                return line
            n = int(m.group(1))
            call = next((c for first, last, c in self._spans if first <= n <= last and c), None)
            return f"{call}: {m.group(2)}" if call else line

        return "\n".join(one(line) for line in message.split("\n"))

    def info(self) -> dict[str, Any]:
        """Checks the topology and returns what was built: nodes with their
        interfaces and addresses, links, flows. Raises :class:`TopologyError`
        with every problem found."""
        if self._info is None:
            # The results document of the built network at time zero.
            with self._located():
                r = json.loads(_native.check(self.to_toml(), self.name))
            self._info = {
                "nodes": [{k: n[k] for k in ("name", "kind", "interfaces")} for n in r["nodes"]],
                "links": [link["name"] for link in r["links"]],
                "flows": [f["name"] for f in r["flows"]],
                "duration_s": r["meta"]["duration_ns"] / 1e9,
                "seed": r["meta"]["seed"],
            }
        return self._info

    def check(self) -> None:
        """Raises :class:`TopologyError` if the topology is not valid."""
        self.info()

    # ----- looking things up ----------------------------------------------

    def __getitem__(self, name: str) -> Any:
        try:
            return self._objects[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a node of {self.name} (nodes: {', '.join(self._objects)})") from None

    @property
    def hosts(self) -> list[Node]:
        """Every host, simulated and real, in the order added (as Mininet's
        ``net.hosts``); ``net["h1"]`` finds one by name."""
        return [o for o in self._objects.values() if o.kind in ("host", "namespace")]

    @property
    def real_hosts(self) -> list[Host]:
        """The real hosts (namespaces), in the order added."""
        return [o for o in self._objects.values() if isinstance(o, Host)]

    def node(self, name: str) -> Node:
        """A node by name."""
        return self[name]

    def link(self, name: str) -> Link:
        """A link by name (``"<a>-<b>"`` unless it was named)."""
        names = self.info()["links"]
        if name not in names:
            raise KeyError(f"{name!r} is not a link of {self.name} (links: {', '.join(names)})")
        return Link(self, name)

    # ----- as fast as possible --------------------------------------------

    def simulate(
        self,
        duration: str | None = None,
        *,
        seed: int | None = None,
        pcap: Sequence[str] = (),
        pcap_dir: str | os.PathLike[str] = ".",
        progress: Progress = False,
        partitions: int = 1,
        stats_interval: str | None = None,
        stats: str | os.PathLike[str] | None = None,
        sync: str = "windowed",
    ) -> Results:
        """Runs the topology (no real nodes) as fast as possible and returns
        its results. ``progress=True`` draws a progress line on stderr; a
        callable gets ``(simulated_s, duration_s, speed)`` about four times a
        second. Ctrl-C stops the run and raises ``KeyboardInterrupt``.
        ``partitions=N`` cuts the network into N partitions, each run on a
        thread of its own, with the same results (nodes may name theirs:
        ``add_router("r1", partition=1)``; see docs/partitions.md);
        ``sync="null"`` keeps them in step by null messages instead of
        rounds (the same results).
        ``stats_interval="100ms"`` with ``stats=PATH`` writes the run's
        counters every interval into that file as it goes (JSON Lines:
        docs/series.md), as ``netloop run --stats-interval`` does."""
        cb = _progress_printer(self.name) if progress is True else (progress or None)
        try:
            with self._located():
                raw = _native.simulate(self.to_toml(), self.name, duration=duration, seed=seed,
                                       pcap=list(pcap), pcap_dir=os.fspath(pcap_dir), progress=cb,
                                       partitions=partitions, stats_interval=stats_interval,
                                       stats=None if stats is None else os.fspath(stats),
                                       sync=sync)
        finally:
            if progress is True:
                print(file=sys.stderr, flush=True)
        return Results(json.loads(raw))

    def stepped(self, *, duration: str | None = None, seed: int | None = None) -> "SteppedSimulation":
        """The network built at simulated time zero, for the caller to step:
        advance its time (:meth:`SteppedSimulation.run_until`) and send and
        receive messages at its endpoints (:meth:`add_endpoint`) in between.
        How a Python co-simulation drives netloop without HELICS."""
        with self._located():
            native = _native.Stepped(self.to_toml(), self.name, duration=duration, seed=seed)
        return SteppedSimulation(native, self.name)

    # ----- in real time ---------------------------------------------------

    def start(
        self,
        *,
        duration: str | None = None,
        pcap: Sequence[str] = (),
        pcap_dir: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        steer: bool = False,
        priority: int | None = 50,
        late_threshold: str = "1ms",
        partitions: int = 1,
        stats_interval: str | None = None,
        stats: str | os.PathLike[str] | None = None,
    ) -> "Network":
        """Sets up the real hosts and starts the network in real time; it
        runs until :meth:`stop` (or for ``duration``). Needs root for real
        hosts. ``pcap`` names links (or ``NODE:IFACE``, or ``"all"``) to
        capture into ``pcap_dir``; programs of the topology write their output
        into ``log_dir`` (a temporary directory by default).
        ``partitions=N`` cuts the network into N partitions, each on a thread
        kept to the wall clock, every real host in the first (see
        docs/partitions.md); snapshots and link changes reach them all.
        ``stats_interval="1s"`` with ``stats=PATH`` writes the run's counters
        and its own figures (kept up, lateness) every interval into that
        file as it goes (docs/series.md; ``netloop top PATH`` watches it)."""
        if self._native is not None:
            raise NetloopError(f"{self.name} is running already")
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="netloop-")
            log_dir = self._tmp.name
        self.log_dir = Path(log_dir)
        self._results = None
        self._catch_sigterm()
        try:
            with self._located():
                self._native = _native.LiveRun.start(
                    self.to_toml(), self.name, os.fspath(log_dir),
                    duration=duration or _UNTIL_STOPPED, pcap=list(pcap),
                    pcap_dir=os.fspath(pcap_dir if pcap_dir is not None else log_dir),
                    priority=priority or None, steer=steer, late_threshold=late_threshold,
                    partitions=partitions, stats_interval=stats_interval,
                    stats=None if stats is None else os.fspath(stats),
                )
        except BaseException:
            self._restore_sigterm()
            raise
        _running.add(self)
        for h in json.loads(self._native.hosts()):
            obj = self._objects.get(h["name"])
            if isinstance(obj, Host):
                obj.namespace, obj.interface = h.get("namespace"), h.get("interface")
                obj.init_pid = h.get("init_pid")
        return self

    def _live(self, what: str) -> _native.LiveRun:
        if self._native is None or not self._native.running():
            raise NetloopError(f"cannot {what}: {self.name} is not running")
        return self._native

    @property
    def started(self) -> bool:
        """Whether it was started and not yet stopped (it may have ended by
        itself; :meth:`stop` then tears it down and takes the results)."""
        return self._native is not None

    @property
    def running(self) -> bool:
        """Whether the network is running in real time."""
        return self.started and self._native.running()

    def stats(self) -> Snapshot:
        """Results and self-report so far, while it runs."""
        return Snapshot(json.loads(self._live("read statistics").snapshot()))

    def now(self) -> float:
        """Simulated seconds since the network started."""
        return self._live("read its clock").now()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the run to end by itself (its ``duration``, or every
        awaited command exited); true if it ended."""
        if self._native is None:
            return True
        return bool(self._native.wait(timeout))

    def stop(self) -> Results:
        """Stops the programs started on real hosts, ends the run, removes
        the namespaces and devices, and returns the results (the self-report
        is ``results.realtime``). Safe to call twice."""
        if self._native is None:
            if self._results is not None:
                return self._results
            raise NetloopError(f"{self.name} was never started")
        run, self._native = self._native, None
        try:
            for h in self.real_hosts:
                h._stop_programs()
            self._results = Results(json.loads(run.stop()))
        finally:
            for h in self.real_hosts:
                h.namespace = h.init_pid = None
            _running.discard(self)
            self._restore_sigterm()
        return self._results

    @property
    def results(self) -> Results:
        """The results of the last run (after :meth:`stop`)."""
        if self._results is None:
            raise NetloopError(f"{self.name} has no results yet (stop it first)")
        return self._results

    def __enter__(self) -> "Network":
        if self._native is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._native is not None:
            self.stop()

    def sleep(self, seconds: float) -> None:
        """Sleeps while the network runs, raising if it ends meanwhile."""
        if not self._live("sleep").wait(seconds):
            return
        raise NetloopError(f"{self.name} ended while sleeping: {self.stop().end_reason}")

    # SIGTERM's default action kills the interpreter without unwinding, which
    # would leave the namespaces behind: while a network runs in the main
    # thread, SIGTERM raises SystemExit instead (finally-blocks and with-blocks
    # run, and atexit stops what is left).
    def _catch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._old_sigterm = signal.signal(signal.SIGTERM, _raise_exit)

    def _restore_sigterm(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            if not any(n._old_sigterm is not None for n in _running if n is not self):
                signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _progress_printer(name: str) -> Callable[[float, float, float], None]:
    def show(sim: float, total: float, speed: float) -> None:
        pct = 100.0 * sim / total if total > 0 else 0.0
        print(f"\r{name}: simulated {sim:.2f} of {total:.2f} s ({pct:.0f} %, {speed:.1f}x real time)",
              end="", file=sys.stderr, flush=True)
    return show


def simulate(path: str | os.PathLike[str], duration: str | None = None, **kwargs: Any) -> Results:
    """Runs a topology file as fast as possible (see :meth:`Network.simulate`)."""
    return Network.from_file(path).simulate(duration, **kwargs)


def clean() -> str:
    """Removes what runs killed with SIGKILL left behind (``netloop clean``)."""
    return _native.clean()


def can_run_real_hosts() -> str | None:
    """``None`` if this process may create real hosts (root, or
    CAP_NET_ADMIN and CAP_SYS_ADMIN, and the ``ip`` command); else why not."""
    why = _native.privileges_missing()
    if why:
        return why
    if not any(os.access(os.path.join(d, "ip"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]):
        return "the `ip` command (iproute2) is not installed"
    return None



@dataclasses.dataclass(frozen=True)
class Message:
    """A message that reached an endpoint of a :class:`SteppedSimulation`."""

    #: When its last bit (its last fragment) arrived, in simulated seconds.
    at: float
    #: The same, in simulated nanoseconds (exact).
    at_ns: int
    #: The sender's ``"address:port"``.
    source: str
    #: Its bytes.
    data: bytes


class SteppedSimulation:
    """A simulated network whose time the caller advances
    (:meth:`Network.stepped`). Times are seconds (numbers) or quantities
    such as ``"250ms"``; simulated time never goes back.

    >>> sim = net.stepped()
    >>> sim.send("pmu", b"measurement")
    >>> sim.run_until(0.1)
    >>> [m.data for m in sim.receive("ctrl")]
    """

    def __init__(self, native: "_native.Stepped", name: str):
        self._n = native
        self.name = name

    @property
    def now(self) -> float:
        """Simulated time now, in seconds."""
        return self._n.now_ns() / 1e9

    @property
    def now_ns(self) -> int:
        """Simulated time now, in nanoseconds."""
        return self._n.now_ns()

    def next_event(self) -> float | None:
        """When the next event is due, in seconds (``None``: none is)."""
        t = self._n.next_event_ns()
        return None if t is None else t / 1e9

    def run_until(self, until: float | str) -> int:
        """Runs every event due up to and including ``until``; returns how
        many ran."""
        return self._n.run_until(until)

    def run_for(self, duration: float | str) -> int:
        """Runs ``duration`` (seconds or a quantity) past now."""
        return self._n.run_for(duration)

    def send(self, endpoint: str, data: bytes, to: str | None = None) -> None:
        """Sends ``data`` from ``endpoint`` now, as one UDP datagram, to ``to``
        (another endpoint or ``"address:port"``) or the endpoint's own ``to``.
        Raises :class:`NetloopError` if the endpoint refuses (too large, no
        route, no destination)."""
        self._n.send(endpoint, bytes(data), to)

    def receive(self, endpoint: str) -> list[Message]:
        """Takes the messages that reached ``endpoint`` so far, oldest first."""
        return [Message(at_ns / 1e9, at_ns, src, data) for at_ns, src, data in self._n.receive(endpoint)]

    @property
    def endpoints(self) -> dict[str, str]:
        """Each endpoint's ``"address:port"``, by name."""
        return {name: addr for name, _host, addr in self._n.endpoints()}

    def results(self) -> Results:
        """The results as of now (``meta.mode`` is ``"stepped"``)."""
        return Results(json.loads(self._n.results()))
