"""Mininet's library topologies: ``TreeTopo`` (and ``TreeNet``)."""

from __future__ import annotations

from typing import Any

from .topo import Topo


class TreeTopo(Topo):
    """A tree of switches ``depth`` deep with ``fanout`` children each and
    hosts at the leaves, numbered depth first as Mininet numbers them."""

    def build(self, depth: int = 1, fanout: int = 2) -> None:
        self.hostNum = 1
        self.switchNum = 1
        self.addTree(depth, fanout)

    def addTree(self, depth: int, fanout: int) -> str:  # noqa: N802 - Mininet's name
        if depth > 0:
            node = self.addSwitch(f"s{self.switchNum}")
            self.switchNum += 1
            for _ in range(fanout):
                self.addLink(node, self.addTree(depth - 1, fanout))
        else:
            node = self.addHost(f"h{self.hostNum}")
            self.hostNum += 1
        return node


def TreeNet(depth: int = 1, fanout: int = 2, **kwargs: Any) -> Any:  # noqa: N802
    """A ``Mininet`` on a ``TreeTopo``."""
    from .net import Mininet

    return Mininet(TreeTopo(depth, fanout), **kwargs)
