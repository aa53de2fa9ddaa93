"""Mininet's nodes on netloop.

- ``Host`` (and ``CPULimitedHost``): a real host, i.e. a network namespace
  joined to the simulation. ``cmd`` runs in a shell kept for the host (a
  ``bash`` on a pseudo-terminal, as Mininet keeps one), so ``cd`` and
  variables persist from one call to the next; ``sendCmd``/``waitOutput``/
  ``monitor``/``sendInt`` drive the same shell, ``popen``/``pexec`` start
  programs beside it.
- Switches (``OVSSwitch``, ``OVSKernelSwitch``, ``UserSwitch``,
  ``OVSBridge``, ``LinuxBridge``…): netloop's learning bridges, inside the
  simulation. They have no shell and no OpenFlow.
- A node with more than one link that is not a switch (Mininet's
  ``LinuxRouter`` pattern: a ``Node`` with ``ip_forward``) becomes a netloop
  router: it forwards IPv4 between its interfaces, with routes netloop
  computes. It has no shell either; the ``ip_forward`` sysctl such classes
  send is answered as the router behaves (forwarding on).
- Controllers are accepted and do nothing: netloop's switches learn by
  themselves (there is no OpenFlow yet).
"""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import select
import shlex
import subprocess
import termios
import time
from typing import TYPE_CHECKING, Any, Sequence

from .._native import NetloopError
from ..network import in_pid_namespace_of
from .log import debug, note_once, output

if TYPE_CHECKING:
    from .link import Intf

#: What the host's shell prints as its prompt: the end of a command's output.
SENTINEL = "\x7f"
#: What a background command (``cmd … &``) prints before its PID.
PID_MARK = "\x01"
_PID_RE = re.compile(PID_MARK + r"(\d+)\r?\n")
_JOB_RE = re.compile(r"\[\d+\] \d+\r?\n")
_FORWARDING_RE = re.compile(r"^\s*sysctl\s+(-w\s+|-q\s+)*net\.ipv4\.ip_forward\s*=\s*([01])\s*$")


def _own_terminal() -> None:
    # In the child, a session leader already (start_new_session): make the
    # pseudo-terminal on stdin its controlling terminal, so that ^C written
    # by sendInt interrupts the command in the foreground, as in Mininet.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class _Shell:
    """A ``bash`` in a namespace on a pseudo-terminal, whose prompt is the
    sentinel: what it prints up to the next prompt is a command's output."""

    def __init__(self, namespace: str, init_pid: int | None, name: str):
        master, slave = pty.openpty()
        argv = ["ip", "netns", "exec", namespace, "env", f"PS1={SENTINEL}", "bash", "--norc",
                "--noediting", "-is", f"netloop:{name}"]
        try:
            # In the host's PID namespace, as netloop's own programs: the
            # shell and what it starts end with the run, even on SIGKILL.
            with in_pid_namespace_of(init_pid, f"{name}: starting its shell"):
                self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                             start_new_session=True, preexec_fn=_own_terminal)
        finally:
            os.close(slave)
        self.fd = master
        self.name = name
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The first prompt, then no echo of what is written, no job control
        # messages, no history file.
        self.read_until_sentinel(timeout=20)
        self.write("unset HISTFILE; stty -echo; set +m\n")
        self.read_until_sentinel(timeout=20)

    def write(self, text: str) -> None:
        data = text.encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def read(self, timeout: float | None) -> str | None:
        """What the shell printed within ``timeout`` seconds (None: wait for
        ever): '' if nothing; raises if the shell has gone."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return ""
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:
            code = self.proc.poll()
            raise NetloopError(f"{self.name}: its shell ended" + (f" (status {code})" if code is not None else "")
                               + ": was the network stopped?")
        return self._decoder.decode(data)

    def read_until_sentinel(self, timeout: float) -> str:
        out, deadline = "", time.monotonic() + timeout
        while SENTINEL not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NetloopError(f"{self.name}: its shell did not answer within {timeout:.0f} s")
            out += self.read(left) or ""
        return out.replace(SENTINEL, "")

    def close(self) -> None:
        try:
            os.close(self.fd)  # the shell gets SIGHUP and ends
        except OSError:
            pass
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Node:
    """A node of a Mininet network: its name, parameters and interfaces."""

    portBase = 0  # the first port number given to a link (switches: 1)

    def __init__(self, name: str, inNamespace: bool = True, **params: Any):  # noqa: N803
        self.name = name
        self.inNamespace = inNamespace
        self.params = params
        self.intfs: dict[int, Intf] = {}
        self.ports: dict[Intf, int] = {}
        self.nameToIntf: dict[str, Intf] = {}
        self.net: Any = None  # the Mininet it belongs to
        self.shell: _Shell | None = None
        self.waiting = False
        self.lastPid: int | None = None
        self.lastCmd: str | None = None
        self.pid: int | None = None
        self._real: Any = None  # netloop's Host, while the network runs
        self._stopping = False

    # ----- what netloop makes of it ---------------------------------------

    def _kind(self) -> str:
        """``host``, ``router`` or ``switch``: a node with several links
        that is not a switch routes between them (see the module doc)."""
        return "router" if len(self.intfs) > 1 else "host"

    def __repr__(self) -> str:
        intfs = ",".join(f"{i.name}:{i.IP()}" for i in self.intfList())
        return f"<{type(self).__name__} {self.name}: {intfs} pid={self.pid}>"

    def __str__(self) -> str:
        return self.name

    # ----- interfaces -----------------------------------------------------

    def newPort(self) -> int:  # noqa: N802 - Mininet's names from here on
        return max(self.intfs) + 1 if self.intfs else self.portBase

    def addIntf(self, intf: "Intf", port: int | None = None, moveIntfFn: Any = None) -> None:  # noqa: N803
        if port is None:
            port = self.newPort()
        if port in self.intfs:
            raise NetloopError(f"{self.name}: port {port} is taken by {self.intfs[port].name}")
        self.intfs[port] = intf
        self.ports[intf] = port
        self.nameToIntf[intf.name] = intf

    def intfList(self) -> list["Intf"]:
        return [self.intfs[p] for p in sorted(self.intfs)]

    def intfNames(self) -> list[str]:
        return [i.name for i in self.intfList()]

    def defaultIntf(self) -> "Intf | None":
        ports = sorted(self.intfs)
        if ports:
            return self.intfs[ports[0]]
        output(f"*** defaultIntf: warning: {self.name} has no interfaces\n")
        return None

    def intf(self, intf: "str | Intf | None" = None) -> "Intf | None":
        if not intf:
            return self.defaultIntf()
        if isinstance(intf, str):
            try:
                return self.nameToIntf[intf]
            except KeyError:
                raise NetloopError(f"{self.name} has no interface {intf!r} (it has {', '.join(self.nameToIntf)})") from None
        return intf

    def connectionsTo(self, node: "Node") -> list[tuple["Intf", "Intf"]]:
        out = []
        for intf in self.intfList():
            link = intf.link
            if link is not None:
                other = link.intf2 if intf is link.intf1 else link.intf1
                if other.node is node:
                    out.append((intf, other))
        return out

    def deleteIntfs(self, checkName: bool = True) -> None:  # noqa: N803
        """Mininet removes interfaces here; netloop removes its own at the end."""

    def IP(self, intf: "str | Intf | None" = None) -> str | None:
        i = self.intf(intf) if self.intfs else None
        return i.IP() if i is not None else None

    def MAC(self, intf: "str | Intf | None" = None) -> str | None:
        i = self.intf(intf) if self.intfs else None
        return i.MAC() if i is not None else None

    def setIP(self, ip: str, prefixLen: int = 8, intf: "str | Intf | None" = None, **_kw: Any) -> None:  # noqa: N803
        i = self.intf(intf)
        if i is None:
            raise NetloopError(f"{self.name}.setIP({ip!r}): it has no interface")
        i.setIP(ip, prefixLen)

    def setMAC(self, mac: str, intf: "str | Intf | None" = None) -> None:
        note_once("mac", f"setMAC({mac!r}) on {self.name} ignored: netloop assigns every interface's MAC itself")

    # ----- configuration --------------------------------------------------

    def config(self, mac: str | None = None, ip: str | None = None, defaultRoute: str | None = None,  # noqa: N803
               lo: str = "up", **_params: Any) -> dict[str, Any]:
        """Applied when the network starts (Mininet's hook for subclasses):
        the address was given to netloop already; a default route given as
        ``'via ADDRESS'`` or an interface is installed in a host."""
        if mac:
            self.setMAC(mac)
        if defaultRoute and self._real is not None:
            self.setDefaultRoute(defaultRoute)
        return {}

    def configDefault(self, **moreParams: Any) -> None:  # noqa: N803
        self.params.update(moreParams)
        self.config(**self.params)

    def setDefaultRoute(self, intf: "str | Intf | None" = None) -> str:
        """``'via ADDRESS'``, ``'dev NAME'`` or an interface: the host's
        default route (``ip route replace default …`` in its namespace)."""
        spec = intf if isinstance(intf, str) and " " in intf else f"dev {self.intf(intf)}"
        return self.cmd(f"ip route replace default {spec}")

    def setParam(self, results: dict[str, Any], method: str, **param: Any) -> Any:  # noqa: N802
        name, value = next(iter(param.items()))
        if value is None:
            return None
        f = getattr(self, method, None)
        if not f:
            return None
        result = f(*value) if isinstance(value, list) else f(**value) if isinstance(value, dict) else f(value)
        results[name] = result
        return result

    # ----- programs -------------------------------------------------------

    def _no_shell(self, what: str) -> NetloopError:
        kind = self._kind() if not isinstance(self, Switch) else "switch"
        return NetloopError(
            f"{self.name}.{what}: {self.name} is a simulated {kind} in netloop, not a namespace: it runs no "
            "programs (only hosts with one link are real hosts)")

    def _started_shell(self) -> _Shell:
        if self._real is None:
            if self._kind() != "host" or isinstance(self, Switch):
                raise self._no_shell("cmd")
            raise NetloopError(f"{self.name}: the network is not running (call net.start() first)")
        if self.shell is None:
            self.shell = _Shell(self._real.namespace, self._real.init_pid, self.name)
            self.pid = self.shell.proc.pid
        return self.shell

    def _router_cmd(self, command: str) -> str:
        # What a LinuxRouter-like class sends when configured or stopped:
        # the simulated router forwards, always.
        m = _FORWARDING_RE.match(command)
        if m and (m.group(2) == "1" or self._stopping):
            return "net.ipv4.ip_forward = 1\r\n" if m.group(2) == "1" else ""
        raise self._no_shell(f"cmd({command!r})")

    @staticmethod
    def _line(args: Sequence[Any]) -> str:
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            return " ".join(str(a) for a in args[0])
        return " ".join(str(a) for a in args)

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:
        """Starts a command in the host's shell without waiting for it."""
        command = self._line(args)
        if self._kind() == "router" or isinstance(self, Switch):
            raise self._no_shell(f"sendCmd({command!r})")
        shell = self._started_shell()
        if self.waiting:
            raise NetloopError(f"{self.name}.sendCmd({command!r}): the previous command "
                               f"({self.lastCmd!r}) has not finished (waitOutput() first)")
        if command.rstrip().endswith("&") and kwargs.get("printPid", True):
            # The PID of what went to the background, for lastPid.
            command += ' printf "\\001%d\\012" $! '
        self.lastCmd = command
        self.lastPid = None
        shell.write(command + "\n")
        self.waiting = True

    def sendInt(self, intr: str = chr(3)) -> None:
        """Interrupts the command in the foreground (^C)."""
        self._started_shell().write(intr)

    def monitor(self, timeoutms: int | None = None, findPid: bool = True) -> str:  # noqa: N803
        """What the running command printed so far (waiting at most
        ``timeoutms``); ``waiting`` turns false when it has finished."""
        shell = self._started_shell()
        data = shell.read(None if timeoutms is None or timeoutms < 0 else timeoutms / 1000.0)
        if not data:
            return ""
        if findPid and PID_MARK in data:
            while not _PID_RE.search(data) and SENTINEL not in data:
                data += shell.read(5.0) or ""
            m = _PID_RE.search(data)
            if m:
                self.lastPid = int(m.group(1))
                data = _PID_RE.sub("", data)
            data = _JOB_RE.sub("", data)
        if SENTINEL in data:
            self.waiting = False
            data = data.replace(SENTINEL, "")
        return data

    def waitReadable(self, timeoutms: int | None = None) -> bool:  # noqa: N802
        shell = self._started_shell()
        ready, _, _ = select.select([shell.fd], [], [], None if timeoutms is None else timeoutms / 1000.0)
        return bool(ready)

    def waitOutput(self, verbose: bool = False, findPid: bool = True) -> str:  # noqa: N803
        """Waits for the command started by ``sendCmd`` and returns its output."""
        log = output if verbose else debug
        out = ""
        while self.waiting:
            data = self.monitor(findPid=findPid)
            out += data
            log(data)
        return out

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """Runs a command line in the host's shell and returns what it
        printed (standard output and error, with the terminal's ``\\r\\n``
        line ends, as in Mininet). A line ending in ``&`` returns at once."""
        command = self._line(args)
        if self._kind() == "router" and not isinstance(self, Switch):
            return self._router_cmd(command)
        verbose = kwargs.get("verbose", False)
        (output if verbose else debug)(f"*** {self.name} : {args}\n")
        self.sendCmd(*args, **kwargs)
        return self.waitOutput(verbose)

    def cmdPrint(self, *args: Any) -> str:
        return self.cmd(*args, verbose=True)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        """Starts a program in the host's namespace (not in its shell):
        standard output and error are pipes unless given; a string is split
        into words unless ``shell=True``."""
        if self._real is None:
            self._started_shell()  # raises the right error
        shell = kwargs.pop("shell", False)
        kwargs.pop("mncmd", None)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            argv = [str(a) for a in args[0]]
        elif len(args) == 1 and isinstance(args[0], str):
            argv = [args[0]] if shell else shlex.split(args[0])
        else:
            argv = [str(a) for a in args]
        if shell:
            argv = ["bash", "-c", " ".join(argv)]
        return self._real.popen(argv, **kwargs)

    def pexec(self, *args: Any, **kwargs: Any) -> tuple[str, str, int]:
        """Runs a program in the host's namespace: (stdout, stderr, status)."""
        p = self.popen(*args, **kwargs)
        out, err = p.communicate()
        decode = (lambda b: b.decode(errors="replace")) if isinstance(out, bytes) else (lambda s: s or "")
        return decode(out), decode(err), p.returncode

    # ----- life -----------------------------------------------------------

    def _attach(self, real: Any) -> None:
        self._real = real
        self.pid = None

    def terminate(self) -> None:
        """Closes the shell (netloop stops the rest with the network)."""
        if self.shell is not None:
            self.shell.close()
            self.shell = None
        self.waiting = False

    def stop(self, deleteIntfs: bool = False) -> None:  # noqa: N803
        self.terminate()

    def _detach(self) -> None:
        self._stopping = True
        try:
            self.terminate()
        finally:
            self._real = None
            self._stopping = False


class Host(Node):
    """A real host: a network namespace running real programs."""


class CPULimitedHost(Host):
    """Mininet's CPU-limited host: a real host; ``cpu``/``sched`` limits are
    not applied (noted once)."""

    def setCPUFrac(self, f: float, sched: str | None = None) -> None:  # noqa: N802
        note_once("cpu", f"CPU limits ({self.name}: {f}) are not applied: netloop's hosts are not in cgroups")

    def config(self, cpu: float = -1, cores: Any = None, **params: Any) -> dict[str, Any]:
        if cpu != -1:
            self.setCPUFrac(cpu)
        return super().config(**params)


class Switch(Node):
    """A switch: netloop's Ethernet learning bridge (no OpenFlow, no shell)."""

    portBase = 1
    dpidLen = 16

    def __init__(self, name: str, dpid: str | None = None, opts: str = "", listenPort: int | None = None,  # noqa: N803
                 **params: Any):
        super().__init__(name, **params)
        self.dpid = dpid or self._default_dpid()
        self.opts, self.listenPort = opts, listenPort

    def _default_dpid(self) -> str:
        digits = re.findall(r"\d+", self.name)
        return f"{int(digits[0]):0{self.dpidLen}x}" if digits else "0" * self.dpidLen

    def _kind(self) -> str:
        return "switch"

    def defaultIntf(self) -> "Intf | None":
        ports = sorted(self.intfs)
        return self.intfs[ports[0]] if ports else None

    def start(self, controllers: Sequence[Any] = ()) -> None:
        """Netloop's switches start with the network."""

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803
        """Netloop's switches stop with the network."""

    def connected(self) -> bool:
        return True


OVSSwitch = OVSKernelSwitch = UserSwitch = OVSBridge = LinuxBridge = IVSSwitch = OVSLegacyKernelSwitch = Switch


class Controller(Node):
    """An OpenFlow controller: accepted and not run (netloop's switches
    learn by themselves; there is no OpenFlow yet)."""

    def __init__(self, name: str = "c0", *args: Any, **params: Any):
        super().__init__(name, **params)

    def start(self) -> None:
        note_once("controller", f"controller {self.name} not started: netloop's switches are learning "
                                "bridges (no OpenFlow)")

    def stop(self, *args: Any, **kwargs: Any) -> None:
        pass

    def checkListening(self) -> None:  # noqa: N802
        pass

    def isListening(self, ip: str = "127.0.0.1", port: int = 6653) -> bool:  # noqa: N802
        return True


OVSController = DefaultController = NOX = Ryu = RemoteController = Controller


def _default_controller(name: str = "c0", **kwargs: Any) -> Controller:
    return Controller(name, **kwargs)
