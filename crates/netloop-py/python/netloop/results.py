"""Results as Python objects: the JSON document of ``docs/results-schema.md``
(``netloop run --json`` writes the same) with typed accessors for what tests
read most — a link's directions, a flow's figures, distributions, drops by
reason, conservation and the real-time self-report.

The typed objects (:class:`LinkResult`, :class:`Direction`,
:class:`FlowResult`, :class:`Distribution`, :class:`RealtimeReport`) have an
attribute per documented field, and stay mappings of the JSON they come from
(``link["a_to_b"]["drops"]`` reads as before), so fields added to the schema
later are there too."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class _Typed(Mapping[str, Any]):
    """A typed view that is still the JSON object's mapping."""

    _raw: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def _typed(cls: type) -> type:
    """A frozen dataclass whose ``_raw`` (the JSON object) is left out of its
    fields, comparison and repr."""
    return dataclasses.dataclass(frozen=True, eq=False)(cls)


@_typed
class Distribution(_Typed):
    """Samples of a duration, in ns: a flow's delay, or the real-time loop's
    lateness and latencies. Fields the source has not are ``None``."""

    count: int
    min_ns: int | None
    mean_ns: float | None
    p50_ns: int | None
    p90_ns: int | None
    p99_ns: int | None
    p999_ns: int | None
    max_ns: int | None
    _raw: Mapping[str, Any] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Distribution | None":
        if d is None:
            return None
        # Flows name them p50, the self-report p50_ns.
        def get(k: str) -> Any:
            return d.get(k, d.get(f"{k}_ns"))

        return cls(int(d.get("count", 0)), get("min"), get("mean"), get("p50"), get("p90"), get("p99"),
                   get("p999"), get("max"), d)


@_typed
class Direction(_Typed):
    """One direction of a link (``a_to_b`` or ``b_to_a``)."""

    rate_bps: int | None
    delay_ns: int
    up: bool
    offered_packets: int
    sent_packets: int
    sent_bytes: int
    received_packets: int
    received_bytes: int
    drops: dict[str, int]
    queue_high_water_packets: int
    queue_delay_max_ns: int
    ecn_marked: int
    _raw: Mapping[str, Any] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Direction":
        return cls(d.get("rate_bps"), int(d.get("delay_ns", 0)), bool(d.get("up", True)),
                   int(d.get("offered_packets", 0)), int(d.get("sent_packets", 0)), int(d.get("sent_bytes", 0)),
                   int(d.get("received_packets", 0)), int(d.get("received_bytes", 0)), dict(d.get("drops", {})),
                   int(d.get("queue_high_water_packets", 0)), int(d.get("queue_delay_max_ns", 0)),
                   int(d.get("ecn_marked", 0)), d)

    @property
    def dropped(self) -> int:
        """Frames this direction dropped, every reason."""
        return sum(self.drops.values())

    @property
    def mean_queue_delay_ns(self) -> float | None:
        """Mean time a sent frame waited in the queue."""
        n = self.sent_packets
        return float(self._raw.get("queue_delay_sum_ns", 0)) / n if n else None


@_typed
class LinkResult(_Typed):
    """A link: its name, its ends (``node:interface``) and its directions."""

    name: str
    a: str
    b: str
    a_to_b: Direction
    b_to_a: Direction
    _raw: Mapping[str, Any] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "LinkResult":
        return cls(str(d["name"]), str(d.get("a", "")), str(d.get("b", "")), Direction.of(d["a_to_b"]),
                   Direction.of(d["b_to_a"]), d)

    def __getitem__(self, key: str) -> Any:
        # The directions as typed objects, still mappings.
        if key in ("a_to_b", "b_to_a"):
            return getattr(self, key)
        return self._raw[key]


@_typed
class FlowResult(_Typed):
    """A simulated flow (``from_`` is the JSON's ``from``)."""

    name: str
    kind: str
    from_: str
    to: str
    sent_packets: int | None
    received_packets: int | None
    received_bytes: int
    throughput_bps: float | None
    loss: float | None
    delay: Distribution | None
    _raw: Mapping[str, Any] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "FlowResult":
        return cls(str(d["name"]), str(d.get("kind", "")), str(d.get("from", "")), str(d.get("to", "")),
                   d.get("sent_packets"), d.get("received_packets"), int(d.get("received_bytes", 0)),
                   d.get("throughput_bps"), d.get("loss"), Distribution.of(d.get("delay_ns")), d)


@_typed
class RealtimeReport(_Typed):
    """A real-time run's self-report (docs/realtime.md, the self-report):
    the fields read most, typed; every other field by ``report["name"]``."""

    kept_up: bool
    late_events: int
    end: str
    event_lateness: Distribution
    input_latency: Distribution
    output_latency: Distribution | None
    rx_frames: int
    tx_frames: int
    boundary_lost: int
    rx_malformed: int
    _raw: Mapping[str, Any] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "RealtimeReport":
        return cls(bool(d["kept_up"]), int(d.get("late_events", 0)), str(d.get("end", "")),
                   Distribution.of(d.get("event_lateness", {})) or Distribution.of({}),  # type: ignore[arg-type]
                   Distribution.of(d.get("input_latency", {})) or Distribution.of({}),  # type: ignore[arg-type]
                   Distribution.of(d.get("output_latency")), int(d.get("rx_frames", 0)),
                   int(d.get("tx_frames", 0)), int(d.get("boundary_lost", 0)), int(d.get("rx_malformed", 0)), d)


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

    @property
    def links(self) -> list[LinkResult]:
        """Every link, typed, in the topology's order."""
        return [LinkResult.of(link) for link in self.raw["links"]]

    @property
    def flows(self) -> list[FlowResult]:
        """Every simulated flow, typed."""
        return [FlowResult.of(f) for f in self.raw["flows"]]

    def link(self, name: str) -> LinkResult:
        """A link: ``a_to_b`` and ``b_to_a`` (:class:`Direction`: packets
        and bytes offered, sent, received, drops by reason, queue)."""
        for link in self.raw["links"]:
            if link["name"] == name:
                return LinkResult.of(link)
        raise KeyError(f"{name!r} is not a link (links: {', '.join(l['name'] for l in self.raw['links'])})")

    def flow(self, name: str) -> FlowResult:
        """A simulated flow's figures (throughput, loss, delay, …)."""
        for f in self.raw["flows"]:
            if f["name"] == name:
                return FlowResult.of(f)
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
    def realtime(self) -> RealtimeReport | None:
        """The self-report of a real-time run: ``kept_up``, ``event_lateness``
        and ``input_latency`` (:class:`Distribution`), frames across the
        boundary and ``boundary_lost``; the rest (real hosts, programs, …)
        by ``realtime["name"]``. ``None`` for a simulation."""
        rt = self.raw.get("realtime")
        return None if rt is None else RealtimeReport.of(rt)

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
