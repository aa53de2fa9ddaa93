"""Results as Python objects: the JSON document of ``docs/results-schema.md``
(``netloop run --json`` writes the same) with accessors for what tests read
most — a link's counters, a flow's figures, drops by reason, conservation and
the real-time self-report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Results:
    """A run's results. ``raw`` is the whole document."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __repr__(self) -> str:
        m = self.raw.get("meta", {})
        return f"<Results {m.get('mode')} {m.get('sim_time_reached_ns', 0) / 1e9:.3f} s simulated>"

    @property
    def sim_seconds(self) -> float:
        """Simulated time reached."""
        return float(self.raw["meta"]["sim_time_reached_ns"]) / 1e9

    def link(self, name: str) -> dict[str, Any]:
        """A link's counters: ``a_to_b`` and ``b_to_a``, each with packets
        and bytes offered, sent, received, drops by reason, queue high water."""
        for link in self.raw["links"]:
            if link["name"] == name:
                return dict(link)
        raise KeyError(f"{name!r} is not a link (links: {', '.join(l['name'] for l in self.raw['links'])})")

    def flow(self, name: str) -> dict[str, Any]:
        """A simulated flow's figures (throughput, loss, delay, …)."""
        for f in self.raw["flows"]:
            if f["name"] == name:
                return dict(f)
        raise KeyError(f"{name!r} is not a flow (flows: {', '.join(f['name'] for f in self.raw['flows'])})")

    @property
    def conservation(self) -> dict[str, Any]:
        """Frames created, delivered, dropped by reason, in flight, and
        ``unaccounted`` (always 0)."""
        return dict(self.raw["conservation"])

    @property
    def drops(self) -> dict[str, int]:
        """Frames dropped inside the model, by reason."""
        return dict(self.raw["conservation"]["dropped"])

    @property
    def realtime(self) -> dict[str, Any] | None:
        """The self-report of a real-time run: ``kept_up``, ``event_lateness``
        and ``input_latency`` percentiles, frames across the boundary and
        ``boundary_lost``, the real hosts and their programs."""
        return self.raw.get("realtime")

    @property
    def kept_up(self) -> bool | None:
        """Whether a real-time run kept up with real time."""
        rt = self.realtime
        return None if rt is None else bool(rt["kept_up"])

    @property
    def boundary_lost(self) -> int | None:
        """Frames lost between the real hosts and the model (0 in a good run)."""
        rt = self.realtime
        return None if rt is None else int(rt["boundary_lost"])

    @property
    def end_reason(self) -> str | None:
        """Why a real-time run ended."""
        rt = self.realtime
        return None if rt is None else str(rt["end"])

    @property
    def pcap(self) -> list[dict[str, Any]]:
        """The capture files: ``path``, ``frames``, ``error`` (disk full)."""
        return list(self.raw.get("pcap", []))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the results as JSON, atomically (never half a file)."""
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.raw, f, indent=2)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        finally:
            if tmp.exists():
                tmp.unlink()


class Snapshot:
    """Results and self-report of a network that is still running."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.results = Results(raw["results"])
        #: The real-time loop's report so far (``end`` is ``"running"``).
        self.realtime: dict[str, Any] = raw["realtime"]
        #: How late the events since the previous ``stats()`` ran (since the
        #: start for the first): ``p50_ns``, ``p99_ns``, ``max_ns``, ...
        #: A series of these shows drift that the cumulative
        #: ``realtime["event_lateness"]`` hides.
        self.window_lateness: dict[str, Any] = raw["window_lateness"]
        #: A network cut into partitions: each one's figures so far
        #: (``events``, ``kept_up``, ``late_events``, ``event_lateness``,
        #: frames exchanged, ...), the first's first; empty otherwise.
        #: ``results`` then merges every partition's share.
        self.partitions: list[dict[str, Any]] = raw.get("partitions") or []

    def __repr__(self) -> str:
        return f"<Snapshot at {self.results.sim_seconds:.3f} s, kept up: {self.kept_up}>"

    @property
    def kept_up(self) -> bool:
        """Every event on time so far (in every partition)."""
        return bool(self.realtime["kept_up"]) and all(p["kept_up"] for p in self.partitions)

    @property
    def boundary_lost(self) -> int:
        return int(self.realtime["boundary_lost"])
