"""``CLI(net)``: Mininet's interactive prompt (``mininet>``) on a running
netloop network: ``h1 ping h2`` (node names in the arguments become their
addresses), ``pingall``, ``pingpair``, ``iperf``, ``iperfudp``, ``nodes``,
``net``, ``dump``, ``links``, ``intfs``, ``link s1 h1 down``, ``py EXPR``,
``sh CMD``, ``source FILE``, ``help``, ``exit``/``quit``/end of input.
``CLI(net, script=FILE)`` runs a file of such lines instead."""

from __future__ import annotations

import cmd
import shlex
import subprocess
import sys
from typing import Any, TextIO

from .log import error, output
from .util import dumpNodeConnections


class CLI(cmd.Cmd):
    """The prompt; it runs until ``exit`` or the end of its input."""

    prompt = "mininet> "

    def __init__(self, mininet: Any, stdin: TextIO = sys.stdin, script: str | None = None, **kwargs: Any):
        self.mn = mininet
        self.locals = {"net": mininet}
        self.inputFile = script
        super().__init__(stdin=stdin)
        self.use_rawinput = stdin is sys.stdin and sys.stdin.isatty()
        if script:
            self.do_source(script)
            return
        output("*** Starting CLI:\n")
        self.run()

    def run(self) -> None:
        while True:
            try:
                self.cmdloop()
                break
            except KeyboardInterrupt:
                output("\nInterrupt\n")

    def emptyline(self) -> bool:  # noqa: N802 - cmd.Cmd's name
        return False

    def getLocals(self) -> dict[str, Any]:  # noqa: N802
        return {**self.mn.nameToNode, **self.locals}

    helpStr = (
        "You may also send a command to a node using:\n"
        "  <node> command {args}\n"
        "For example:\n"
        "  mininet> h1 ifconfig\n\n"
        "The interpreter automatically substitutes IP addresses\n"
        "for node names when a node is the first arg, so commands\n"
        "like\n"
        "  mininet> h2 ping h3\n"
        "should work.\n"
    )

    def do_help(self, line: str) -> None:
        super().do_help(line)
        if line == "":
            output(self.helpStr)

    def do_nodes(self, _line: str) -> None:
        "List all nodes."
        output(f"available nodes are: \n{' '.join(sorted(self.mn.nameToNode))}\n")

    def do_ports(self, _line: str) -> None:
        "display ports and interfaces for each switch"
        for s in self.mn.switches:
            output(f"{s.name} " + " ".join(f"{i.name}:{p}" for i, p in sorted(s.ports.items(), key=lambda x: x[1]))
                   + "\n")

    def do_net(self, _line: str) -> None:
        "List network connections."
        dumpNodeConnections(self.mn.controllers + self.mn.switches + self.mn.hosts)

    def do_dump(self, _line: str) -> None:
        "Dump node info."
        for node in self.mn.values():
            output(f"{node!r}\n")

    def do_links(self, _line: str) -> None:
        "Report on links"
        for link in self.mn.links:
            output(f"{link} {link.status()}\n")

    def do_intfs(self, _line: str) -> None:
        "List interfaces."
        for node in self.mn.values():
            output(f"{node.name}: {','.join(node.intfNames())}\n")

    def do_pingall(self, line: str) -> None:
        "Ping between all hosts."
        self.mn.pingAll(line or None)

    def do_pingpair(self, _line: str) -> None:
        "Ping between first two hosts, useful for testing."
        self.mn.pingPair()

    def do_pingallfull(self, _line: str) -> None:
        "Ping between all hosts, returns all ping results."
        self.mn.pingAllFull()

    def do_pingpairfull(self, _line: str) -> None:
        "Ping between first two hosts, returns all ping results."
        self.mn.pingPairFull()

    def _hosts(self, args: list[str], need: int) -> list[Any] | None:
        if not args:
            return None
        if len(args) != need:
            error(f"invalid number of args: expected {need} hosts\n")
            raise ValueError
        for a in args:
            if a not in self.mn:
                error(f"node '{a}' not in network\n")
                raise ValueError
        return [self.mn[a] for a in args]

    def do_iperf(self, line: str) -> None:
        "Simple iperf TCP test between two (optionally specified) hosts."
        try:
            self.mn.iperf(self._hosts(line.split(), 2))
        except ValueError:
            error("usage: iperf [src dst]\n")

    def do_iperfudp(self, line: str) -> None:
        "Simple iperf UDP test between two (optionally specified) hosts."
        args = line.split()
        if not args:
            error("usage: iperfudp bw [src dst]\n")
            return
        try:
            self.mn.iperf(self._hosts(args[1:], 2), l4Type="UDP", udpBw=args[0])
        except ValueError:
            error("usage: iperfudp bw [src dst]\n")

    def do_link(self, line: str) -> None:
        "Bring link(s) between two nodes up or down.\nUsage: link node1 node2 [up/down]"
        args = line.split()
        if len(args) != 3:
            error("invalid number of args: link end1 end2 [up down]\n")
        elif args[2] not in ("up", "down"):
            error("invalid type: link end1 end2 [up down]\n")
        else:
            self.mn.configLinkStatus(*args)

    def do_py(self, line: str) -> None:
        "Evaluate a Python expression (node names are its variables)."
        try:
            result = eval(line, globals(), self.getLocals())  # noqa: S307 - the user's own prompt
            if result is not None:
                output(f"{result}\n")
        except Exception as e:  # noqa: BLE001 - show it, as Mininet does
            output(f"{e}\n")

    def do_px(self, line: str) -> None:
        "Execute a Python statement (node names are its variables)."
        try:
            exec(line, globals(), self.locals)  # noqa: S102 - the user's own prompt
        except Exception as e:  # noqa: BLE001
            output(f"{e}\n")

    def do_sh(self, line: str) -> None:
        "Run an external shell command on this machine."
        subprocess.call(line, shell=True)

    def do_source(self, line: str) -> None:
        "Read commands from an input file."
        args = line.split()
        if len(args) != 1:
            error("usage: source <file>\n")
            return
        try:
            with open(args[0], encoding="utf-8") as f:
                for raw in f:
                    cmdline = raw.strip()
                    if cmdline and not cmdline.startswith("#"):
                        output(f"*** {cmdline}\n")
                        if self.onecmd(cmdline):
                            break
        except OSError as e:
            error(f"error reading file {args[0]}: {e}\n")

    def do_noecho(self, line: str) -> None:
        "Run an interactive command with echoing turned off."
        self.default(line)

    def do_x(self, line: str) -> None:
        "Create an X11 tunnel to the given node."
        error("x/xterm: netloop runs without a display\n")

    do_xterm = do_gterm = do_x

    def do_switch(self, line: str) -> None:
        "Starts or stops a switch"
        error("switch start/stop: netloop's switches run with the network (take a link down instead)\n")

    def do_dpctl(self, line: str) -> None:
        "Run dpctl (or ovs-ofctl) command on all switches."
        error("dpctl: netloop's switches have no OpenFlow\n")

    def do_time(self, line: str) -> None:
        "Measure time taken for any command in Mininet."
        import time

        start = time.time()
        self.onecmd(line)
        output(f"*** Elapsed time: {time.time() - start:0.6f} secs\n")

    def do_exit(self, _line: str) -> bool:
        "Exit"
        return True

    do_quit = do_exit

    def do_EOF(self, line: str) -> bool:  # noqa: N802 - cmd.Cmd's name
        "Exit"
        output("\n")
        return True

    def default(self, line: str) -> None:
        """``<node> <command>``: runs the command in the node's shell, with
        other node names replaced by their addresses, output as it comes."""
        first, _, rest = line.partition(" ")
        if first not in self.mn:
            error(f"*** Unknown command: {line}\n")
            return
        node = self.mn[first]
        if not rest:
            error("*** Please enter a command for node: %s <cmd>\n" % first)
            return
        try:
            words = shlex.split(rest, posix=False)
        except ValueError:
            words = rest.split(" ")
        words = [self.mn[w].IP() or w if w in self.mn and self.mn[w].IP() else w for w in words]
        try:
            node.sendCmd(" ".join(words))
            self.waitForNode(node)
        except Exception as e:  # noqa: BLE001 - the prompt goes on
            error(f"*** {e}\n")

    def waitForNode(self, node: Any) -> None:  # noqa: N802
        """Prints the node's output until its command ends; ^C interrupts it."""
        while node.waiting:
            try:
                data = node.monitor(timeoutms=100)
                if data:
                    sys.stdout.write(data.replace("\r\n", "\n"))
                    sys.stdout.flush()
            except KeyboardInterrupt:
                node.sendInt()
