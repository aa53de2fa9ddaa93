#!/usr/bin/env python3
"""OPC-UA test client for the netloop example server (uses the asyncua package).

Each subcommand prints exactly one JSON object on stdout when it ends; all
logging goes to stderr.

  client.py read --url URL --count N [--interval 0.1] [--timeout 2]
                 [--connect-timeout 10] [--deadline 120] [--timeline]
      Resolves Plant/Counter by browse path (namespace index looked up from
      "urn:netloop:example") and reads it N times, one read started every
      --interval seconds (no catch-up bursts after a slow read). Every read is
      bounded by --timeout. A failed read is counted and the client goes on.
      After --max-timeouts consecutive timeouts, or as soon as the connection
      is known to be closed, it drops the connection and reconnects (each
      attempt bounded by --reconnect-timeout or 4x the first connect time,
      whichever is longer; exponential backoff up to --max-backoff between
      attempts that fail fast), so a link that goes down for a few seconds and
      comes back is survived. The whole run is bounded by --deadline.
      Output: {"ok", "failed", "reads", "errors", "latency_ms": {"p50", "p90",
      "p99", "max", "min", "mean"}, "values_increasing", "first_value",
      "last_value", "connect_s", "reconnects", "elapsed_s",
      "deadline_exceeded"[, "timeline": [[t_s, "ok"|"fail"], ...]]}.
      Reads that happen while reconnecting are not attempted; the timeline
      shows the gap. Exit status 0 if at least one read succeeded.

  client.py throughput --url URL --seconds S [--node Blob|Counter]
                       [--concurrency K] [--timeout 2]
      Reads the node's Value as fast as possible for S seconds with K requests
      outstanding at a time (one prebuilt ReadRequest per call, no extra
      traffic: asyncua's keep-alive probe is disabled). Output: {"requests"
      (successful), "seconds", "rps", "failed", "value_bytes" (ByteString
      length, null otherwise), "concurrency", "node", "latency_ms",
      "connect_s", "reconnects"}. Exit status 0 if any request succeeded.

If the first connection cannot be made within --connect-timeout, the JSON
object has "error" set and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
import time

NAMESPACE_URI = "urn:netloop:example"
MAX_ERRORS = 5

log = logging.getLogger("netloop.opcua.client")

# Imported lazily in main() so that argument errors are reported quickly.
Client = None
ua = None


def err_str(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ConnectionLost(Exception):
    """The current connection is unusable; reconnect before the next request."""


class Conn:
    """One OPC-UA connection at a time to URL, with the target node resolved.

    `generation` increases with every new connection, so that concurrent
    workers that all saw the same failure trigger only one reconnect.
    """

    def __init__(self, args: argparse.Namespace, node_name: str, t0: float, deadline: float):
        self.url = args.url
        self.timeout = args.timeout
        self.connect_timeout = args.connect_timeout
        self.reconnect_timeout = args.reconnect_timeout
        self.max_backoff = args.max_backoff
        self.max_timeouts = args.max_timeouts
        self.node_name = node_name
        self.t0 = t0
        self.deadline = deadline  # monotonic time
        self.client = None
        self.params = None  # prebuilt ReadParameters for the node's Value
        self.generation = 0
        self.reconnects = 0
        self.consecutive_timeouts = 0
        self.connect_s: float | None = None  # first connection, retries included
        self.first_attempt_s: float | None = None  # the successful attempt alone
        self._lock = asyncio.Lock()

    # -- connection setup / teardown -------------------------------------

    async def _open(self, attempt_timeout: float) -> None:
        client = Client(self.url, timeout=self.timeout, watchdog_intervall=1e6)
        # Abandoned sessions (after a reconnect) expire on the server after this.
        client.session_timeout = 60_000
        started = time.monotonic()
        try:
            await asyncio.wait_for(self._setup(client), attempt_timeout)
        except BaseException:
            await self._close(client, grace=0)
            raise
        if self.first_attempt_s is None:
            self.first_attempt_s = time.monotonic() - started
        self.client = client
        self.generation += 1
        self.consecutive_timeouts = 0

    async def _setup(self, client) -> None:
        await client.connect()
        ns = await client.get_namespace_index(NAMESPACE_URI)
        node = await client.nodes.objects.get_child([f"{ns}:Plant", f"{ns}:{self.node_name}"])
        rv = ua.ReadValueId()
        rv.NodeId = node.nodeid
        rv.AttributeId = ua.AttributeIds.Value
        params = ua.ReadParameters()
        params.NodesToRead = [rv]
        self.params = params

    @staticmethod
    async def _close(client, grace: float) -> None:
        """Close a connection; wait at most `grace` s for a polite CloseSession."""
        if grace > 0:
            try:
                await asyncio.wait_for(client.disconnect(), grace)
                return
            except Exception as exc:  # never let teardown fail
                log.debug("polite disconnect failed: %s", err_str(exc))
        # Dead or half-open link: stop asyncua's background tasks, drop the socket.
        try:
            await asyncio.wait_for(client.close_session(), 0.05)
        except Exception as exc:
            log.debug("close_session: %s", err_str(exc))
        try:
            client.disconnect_socket()
        except Exception as exc:
            log.debug("disconnect_socket: %s", err_str(exc))

    async def connect_first(self) -> None:
        """Initial connection: retry (e.g. server not up yet) until --connect-timeout."""
        start = time.monotonic()
        limit = min(start + self.connect_timeout, self.deadline)
        backoff = 0.1
        while True:
            remaining = limit - time.monotonic()
            try:
                await self._open(max(remaining, 0.001))
                self.connect_s = time.monotonic() - start
                return
            except Exception as exc:
                remaining = limit - time.monotonic()
                if remaining <= backoff:
                    raise
                log.warning("connect failed (%s), retrying in %.1fs", err_str(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    async def reconnect(self, seen_generation: int) -> bool:
        """Replace the connection of `seen_generation`. False if the deadline passed."""
        async with self._lock:
            if self.generation != seen_generation and self.client is not None:
                return True  # somebody else already reconnected
            old, self.client = self.client, None
            if old is not None:
                await self._close(old, grace=0)
            # A slow link (long RTT, low rate) makes connecting slow: give each
            # attempt at least 4x what the first connection took.
            attempt_timeout = max(self.reconnect_timeout, 4 * (self.first_attempt_s or 0.0))
            backoff = 0.1
            while True:
                started = time.monotonic()
                remaining = self.deadline - started
                if remaining <= 0:
                    return False
                try:
                    await self._open(min(attempt_timeout, remaining))
                    self.reconnects += 1
                    log.warning("reconnected at t=%.2fs (generation %d)", time.monotonic() - self.t0, self.generation)
                    return True
                except Exception as exc:
                    log.info("reconnect attempt failed: %s", err_str(exc))
                # Pause only what is left of the backoff: an attempt that timed
                # out has already waited, and retrying at once after a lost SYN
                # gets through soonest once the link is back.
                pause = max(0.0, backoff - (time.monotonic() - started))
                if self.deadline - time.monotonic() <= pause:
                    return False
                await asyncio.sleep(pause)
                backoff = min(backoff * 2, self.max_backoff)

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            await self._close(client, grace=2.0)

    # -- requests ----------------------------------------------------------

    async def read_value(self):
        """Read the node's Value once. Returns (generation, value).

        Raises TimeoutError or another exception on failure; ConnectionLost
        when the connection should be replaced (see reconnect()).
        """
        client = self.client
        gen = self.generation
        if client is None:
            raise ConnectionLost("not connected")
        try:
            # asyncua's own timeout is the same; this outer bound also covers
            # anything that could block before the request is sent.
            results = await asyncio.wait_for(client.uaclient.read(self.params), self.timeout + 0.5)
        except Exception as exc:
            if _is_timeout(exc):
                if gen == self.generation:
                    self.consecutive_timeouts += 1
                    if self.consecutive_timeouts >= self.max_timeouts:
                        raise ConnectionLost(f"{self.consecutive_timeouts} consecutive timeouts") from None
                raise TimeoutError(f"no response within {self.timeout}s") from None
            if isinstance(exc, (ConnectionError, OSError)) or _connection_gone(client):
                raise ConnectionLost(err_str(exc)) from exc
            if isinstance(exc, ua.UaStatusCodeError) and exc.code in _session_gone_codes():
                raise ConnectionLost(err_str(exc)) from exc
            raise
        if gen == self.generation:
            self.consecutive_timeouts = 0
        dv = results[0]
        if dv.StatusCode is not None and not dv.StatusCode.is_good():
            raise RuntimeError(f"bad status {dv.StatusCode.name}")
        return gen, (dv.Value.Value if dv.Value is not None else None)


_SESSION_GONE = (
    "BadSessionIdInvalid",
    "BadSessionClosed",
    "BadSessionNotActivated",
    "BadSecureChannelIdInvalid",
    "BadSecureChannelClosed",
    "BadSecureChannelTokenUnknown",
    "BadConnectionClosed",
    "BadServerHalted",
    "BadShutdown",
    "BadCommunicationError",
    "BadTcpSecureChannelUnknown",
    "BadServerNotConnected",
)


def _session_gone_codes() -> set:
    return {getattr(ua.StatusCodes, name) for name in _SESSION_GONE if hasattr(ua.StatusCodes, name)}


def _is_timeout(exc: BaseException) -> bool:
    """A timeout, also when asyncua 1.x wrapped it in UaError."""
    kinds = (asyncio.TimeoutError, TimeoutError)
    return isinstance(exc, kinds) or isinstance(exc.__cause__, kinds) or isinstance(exc.__context__, kinds)


def _connection_gone(client) -> bool:
    """True when asyncua knows the transport is closed (works with asyncua 1.x and 2.x)."""
    uac = client.uaclient
    state = getattr(uac, "state", None)  # asyncua >= 2: UaClientState
    if state is not None and hasattr(state, "name"):
        return state.name != "CONNECTED"
    proto = getattr(uac, "protocol", None)  # asyncua 1.x: protocol.state is "open"/"closed"
    return proto is None or str(getattr(proto, "state", "")).lower().endswith("closed")


def latency_stats(samples_s: list[float]) -> dict:
    keys = ("p50", "p90", "p99", "max", "min", "mean")
    if not samples_s:
        return {k: None for k in keys}
    xs = sorted(x * 1000.0 for x in samples_s)

    def pct(p: float) -> float:  # nearest-rank percentile
        return xs[max(0, math.ceil(p / 100.0 * len(xs)) - 1)]

    return {
        "p50": round(pct(50), 3),
        "p90": round(pct(90), 3),
        "p99": round(pct(99), 3),
        "max": round(xs[-1], 3),
        "min": round(xs[0], 3),
        "mean": round(sum(xs) / len(xs), 3),
    }


# ---------------------------------------------------------------------------


async def cmd_read(args: argparse.Namespace, t0: float) -> tuple[dict, int]:
    deadline = t0 + args.deadline
    conn = Conn(args, "Counter", t0, deadline)
    out: dict = {"ok": 0, "failed": 0, "reads": 0, "errors": []}
    try:
        await conn.connect_first()
    except Exception as exc:
        out.update(
            error=f"connect failed: {err_str(exc)}",
            connect_s=None,
            reconnects=0,
            latency_ms=latency_stats([]),
            values_increasing=None,
            elapsed_s=round(time.monotonic() - t0, 3),
            deadline_exceeded=time.monotonic() >= deadline,
        )
        out["errors"].append(out["error"])
        if args.timeline:
            out["timeline"] = []
        return out, 1

    latencies: list[float] = []
    timeline: list[list] = []
    increasing = True
    first_value = last_value = None
    deadline_exceeded = False
    next_start = time.monotonic()

    def record_error(text: str) -> None:
        if len(out["errors"]) < MAX_ERRORS:
            out["errors"].append(text)

    try:
        while out["reads"] < args.count:
            now = time.monotonic()
            if now >= deadline:
                deadline_exceeded = True
                break
            if next_start > now:
                await asyncio.sleep(min(next_start - now, deadline - now))
                continue
            next_start = max(next_start + args.interval, now)
            if conn.client is None:  # an earlier reconnect ran out of time
                deadline_exceeded = True
                break
            seen_gen = conn.generation
            out["reads"] += 1
            t_req = time.monotonic()
            try:
                _, value = await conn.read_value()
            except ConnectionLost as exc:
                out["failed"] += 1
                timeline.append([round(t_req - t0, 3), "fail"])
                record_error(f"connection lost: {exc}")
                log.warning("read failed, connection lost (%s); reconnecting", exc)
                if not await conn.reconnect(seen_gen):
                    deadline_exceeded = True
                    break
                next_start = time.monotonic()
                continue
            except Exception as exc:
                out["failed"] += 1
                timeline.append([round(t_req - t0, 3), "fail"])
                record_error(err_str(exc))
                log.info("read failed: %s", err_str(exc))
                continue
            t_resp = time.monotonic()
            latencies.append(t_resp - t_req)
            out["ok"] += 1
            timeline.append([round(t_req - t0, 3), "ok"])
            if first_value is None:
                first_value = value
            if last_value is not None and value < last_value:
                increasing = False
                log.warning("Counter went backwards: %s -> %s", last_value, value)
            last_value = value
    finally:
        await conn.close()

    out.update(
        latency_ms=latency_stats(latencies),
        values_increasing=increasing if out["ok"] else None,
        first_value=first_value,
        last_value=last_value,
        connect_s=round(conn.connect_s, 4),
        reconnects=conn.reconnects,
        elapsed_s=round(time.monotonic() - t0, 3),
        deadline_exceeded=deadline_exceeded,
    )
    if args.timeline:
        out["timeline"] = timeline
    return out, 0 if out["ok"] > 0 else 1


async def cmd_throughput(args: argparse.Namespace, t0: float) -> tuple[dict, int]:
    deadline = t0 + args.deadline
    conn = Conn(args, args.node, t0, deadline)
    out: dict = {"node": args.node, "concurrency": args.concurrency}
    try:
        await conn.connect_first()
    except Exception as exc:
        out.update(
            error=f"connect failed: {err_str(exc)}",
            requests=0,
            seconds=0.0,
            rps=0.0,
            failed=0,
            value_bytes=None,
            connect_s=None,
            reconnects=0,
        )
        return out, 1

    requests = 0
    failed = 0
    errors: list[str] = []
    latencies: list[float] = []
    value_bytes = None
    start = time.monotonic()
    end = min(start + args.seconds, deadline)

    async def worker() -> None:
        nonlocal requests, failed, value_bytes
        while time.monotonic() < end:
            seen_gen = conn.generation
            t_req = time.monotonic()
            try:
                _, value = await conn.read_value()
            except ConnectionLost as exc:
                failed += 1
                if len(errors) < MAX_ERRORS:
                    errors.append(f"connection lost: {exc}")
                if not await conn.reconnect(seen_gen):
                    return
                continue
            except Exception as exc:
                failed += 1
                if len(errors) < MAX_ERRORS:
                    errors.append(err_str(exc))
                continue
            latencies.append(time.monotonic() - t_req)
            requests += 1
            if value_bytes is None and isinstance(value, (bytes, bytearray)):
                value_bytes = len(value)

    try:
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        elapsed = time.monotonic() - start
    finally:
        await conn.close()

    out.update(
        requests=requests,
        seconds=round(elapsed, 4),
        rps=round(requests / elapsed, 2) if elapsed > 0 else 0.0,
        failed=failed,
        errors=errors,
        value_bytes=value_bytes,
        latency_ms=latency_stats(latencies),
        connect_s=round(conn.connect_s, 4),
        reconnects=conn.reconnects,
    )
    return out, 0 if requests > 0 else 1


# ---------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", required=True, help="endpoint, e.g. opc.tcp://198.18.1.2:4840/netloop/")
    common.add_argument("--timeout", type=float, default=2.0, help="per-request timeout in seconds (default 2)")
    common.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        help="bound on establishing the first connection, retries included (default 10)",
    )
    common.add_argument(
        "--reconnect-timeout",
        type=float,
        default=2.0,
        help="bound on each reconnect attempt in seconds, raised to 4x the first connect "
        "time if that is longer (default 2)",
    )
    common.add_argument(
        "--max-backoff", type=float, default=1.0, help="longest pause between reconnect attempts in seconds (default 1)"
    )
    common.add_argument(
        "--max-timeouts",
        type=int,
        default=2,
        help="consecutive request timeouts after which the connection is replaced (default 2)",
    )
    common.add_argument("--deadline", type=float, default=120.0, help="bound on the whole run in seconds (default 120)")
    common.add_argument("--log-level", default="WARNING", help="stderr log level (default WARNING)")

    p = argparse.ArgumentParser(description="netloop OPC-UA test client (asyncua); prints one JSON object")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read", parents=[common], help="read Plant/Counter N times, surviving link outages")
    r.add_argument("--count", type=int, required=True, help="number of reads to attempt")
    r.add_argument("--interval", type=float, default=0.1, help="seconds between read starts (default 0.1)")
    r.add_argument("--timeline", action="store_true", help="add [t_seconds, ok|fail] per read to the output")
    t = sub.add_parser("throughput", parents=[common], help="back-to-back reads for a fixed time")
    t.add_argument("--seconds", type=float, required=True)
    t.add_argument("--node", choices=("Blob", "Counter"), default="Blob")
    t.add_argument("--concurrency", type=int, default=1, help="requests outstanding at a time (default 1)")
    args = p.parse_args(argv)
    for name in ("timeout", "connect_timeout", "reconnect_timeout", "max_backoff", "deadline"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if args.max_timeouts < 1:
        p.error("--max-timeouts must be >= 1")
    if args.cmd == "read" and (args.count < 0 or args.interval < 0):
        p.error("--count and --interval must be >= 0")
    if args.cmd == "throughput" and (args.seconds <= 0 or args.concurrency < 1):
        p.error("--seconds must be > 0 and --concurrency >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    args = parse_args(argv)
    level = getattr(logging, str(args.log_level).upper(), logging.WARNING)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("asyncua").setLevel(max(level, logging.WARNING))
    # A response that arrives after its request timed out is expected here.
    logging.getLogger("asyncua.client.ua_client.UASocketProtocol").addFilter(
        lambda rec: "is already done" not in rec.getMessage()
    )

    global Client, ua
    from asyncua import Client as _Client, ua as _ua

    Client, ua = _Client, _ua
    t_import = time.monotonic() - t0
    log.info("asyncua imported in %.3fs", t_import)

    cmd = cmd_read if args.cmd == "read" else cmd_throughput
    try:
        out, rc = asyncio.run(cmd(args, t0))
    except KeyboardInterrupt:
        out, rc = {"error": "interrupted"}, 130
    out["import_s"] = round(t_import, 4)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
