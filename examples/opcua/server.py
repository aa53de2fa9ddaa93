#!/usr/bin/env python3
"""Small OPC-UA server for netloop examples and tests (uses the asyncua package).

Usage:
    python3 server.py --host 198.18.1.2 --port 4840 [--ready-file PATH]
                      [--blob-bytes 1000] [--counter-interval 0.1]
                      [--cache-dir DIR | --no-cache] [--log-level WARNING]

Serves opc.tcp://HOST:PORT/netloop/ without security, anonymous login only.
Namespace "urn:netloop:example" holds the object Plant (NodeId ns=<idx>;s=Plant)
with the variables
    Plant/Counter      Int64, incremented every --counter-interval seconds
    Plant/Temperature  Double, a slow sine wave around 20.0
    Plant/Blob         ByteString of --blob-bytes bytes (sets the Read response
                       size for throughput tests)
(NodeIds ns=<idx>;s=Plant.Counter etc.; clients should resolve the namespace
index from the URI.)

Once the server accepts connections it prints exactly one line
"ready opc.tcp://HOST:PORT/netloop/" on stdout and, with --ready-file, writes
the endpoint URL to that file atomically (temporary file, then rename).
It runs until SIGTERM or SIGINT and then stops cleanly with exit status 0.
Exit status 2 means it could not start (e.g. the address is not available).

Startup time is dominated by importing asyncua (~0.7 s) and building the
standard OPC-UA address space (~3 s). The latter is cached: the first start
writes a read-only shelf of the standard address space into the cache
directory (default $NETLOOP_OPCUA_CACHE, else $XDG_CACHE_HOME/netloop-opcua,
else ~/.cache/netloop-opcua; one subdirectory per asyncua/Python version) and
later starts load nodes lazily from it, taking ~0.3 s. The cache is built in a
private temporary directory and renamed into place, so concurrent servers are
safe. The cache holds pickles: keep it in a directory only you can write.
--no-cache disables it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

NAMESPACE_URI = "urn:netloop:example"
ENDPOINT_PATH = "/netloop/"

log = logging.getLogger("netloop.opcua.server")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="netloop example OPC-UA server (asyncua)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on and to put in the endpoint URL")
    p.add_argument("--port", type=int, default=4840)
    p.add_argument("--ready-file", type=Path, help="write the endpoint URL here (atomically) once serving")
    p.add_argument("--blob-bytes", type=int, default=1000, help="size of Plant/Blob in bytes (default 1000)")
    p.add_argument("--counter-interval", type=float, default=0.1, help="seconds between Counter increments")
    p.add_argument("--cache-dir", type=Path, help="address-space cache directory (see module docstring)")
    p.add_argument("--no-cache", action="store_true", help="always build the standard address space from scratch")
    p.add_argument("--log-level", default="WARNING", help="log level for stderr (default WARNING)")
    args = p.parse_args(argv)
    if args.blob_bytes < 0:
        p.error("--blob-bytes must be >= 0")
    if args.counter_interval <= 0:
        p.error("--counter-interval must be > 0")
    return args


def format_url(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):  # IPv6 literal
        host = f"[{host}]"
    return f"opc.tcp://{host}:{port}{ENDPOINT_PATH}"


def blob_content(n: int) -> bytes:
    """Deterministic, non-repeating-looking payload of n bytes."""
    pattern = bytes((i * 7 + 3) & 0xFF for i in range(256))
    return (pattern * (n // 256 + 1))[:n]


def default_cache_root() -> Path:
    env = os.environ.get("NETLOOP_OPCUA_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "netloop-opcua"


def cache_dir_for_version(root: Path) -> Path:
    from importlib.metadata import version

    return root / f"aspace-asyncua{version('asyncua')}-py{sys.version_info[0]}{sys.version_info[1]}"


async def init_server(args: argparse.Namespace):
    """Create a Server and run init(), using/building the address-space cache.

    Returns (server, description of what was done with the cache).
    """
    from asyncua import Server

    if args.no_cache:
        server = Server()
        await server.init()
        return server, "no cache"
    try:
        root = args.cache_dir if args.cache_dir else default_cache_root()
        final = cache_dir_for_version(root)
        shelf = final / "aspace"
        if shelf.is_file():  # the directory is renamed into place only when complete
            try:
                server = Server()
                await server.init(shelf)
                return server, f"loaded {final}"
            except Exception as exc:
                log.warning("address-space cache %s unusable (%r); building from scratch", final, exc)
                server = Server()
                await server.init()
                return server, "no cache (unusable)"
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    except Exception as exc:  # unreadable or unwritable cache: carry on without it
        log.warning("address-space cache unavailable (%r); building from scratch", exc)
        server = Server()
        await server.init()
        return server, "no cache (unavailable)"
    try:
        # asyncua builds the address space, then writes it to the shelf tmp/aspace*.
        server = Server()
        await server.init(tmp / "aspace")
        marker = tmp / "aspace"
        if not marker.exists():
            # dbm.dumb stores aspace.dat/aspace.dir, but asyncua checks for the
            # bare path before loading, so leave an empty marker file there.
            marker.touch()
        try:
            os.rename(tmp, final)
            return server, f"built {final}"
        except OSError:  # another process won the race
            return server, f"built (discarded, {final} already exists)"
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_ready_file(path: Path, text: str) -> None:
    path = path.resolve()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


async def update_loop(counter_node, temp_node, interval: float) -> None:
    from asyncua import ua

    value = 0
    start = time.monotonic()
    next_t = start
    while True:
        next_t += interval
        await asyncio.sleep(max(0.0, next_t - time.monotonic()))
        value += 1
        t = time.monotonic() - start
        temp = 20.0 + 5.0 * math.sin(2 * math.pi * t / 60.0)
        try:
            await counter_node.write_value(ua.Variant(value, ua.VariantType.Int64))
            await temp_node.write_value(ua.Variant(temp, ua.VariantType.Double))
        except Exception:
            log.exception("updating Plant variables failed")
        if time.monotonic() - next_t > 10 * interval:  # fell far behind (suspended?): resync
            next_t = time.monotonic()


async def run(args: argparse.Namespace) -> int:
    t_start = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    from asyncua import ua

    url = format_url(args.host, args.port)
    server, cache_info = await init_server(args)
    t_init = time.monotonic()
    server.name = "netloop OPC-UA example server"
    server.set_endpoint(url)
    server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    server.set_identity_tokens([ua.AnonymousIdentityToken])
    await server.set_application_uri("urn:netloop:example:server")

    idx = await server.register_namespace(NAMESPACE_URI)
    plant = await server.nodes.objects.add_object(ua.NodeId("Plant", idx), ua.QualifiedName("Plant", idx))
    counter = await plant.add_variable(
        ua.NodeId("Plant.Counter", idx), ua.QualifiedName("Counter", idx), ua.Variant(0, ua.VariantType.Int64)
    )
    temp = await plant.add_variable(
        ua.NodeId("Plant.Temperature", idx),
        ua.QualifiedName("Temperature", idx),
        ua.Variant(20.0, ua.VariantType.Double),
    )
    await plant.add_variable(
        ua.NodeId("Plant.Blob", idx),
        ua.QualifiedName("Blob", idx),
        ua.Variant(blob_content(args.blob_bytes), ua.VariantType.ByteString),
    )

    try:
        await server.start()
    except OSError as exc:
        print(f"server.py: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2

    updater = asyncio.create_task(update_loop(counter, temp, args.counter_interval))
    log.info(
        "serving %s (ns=%d, blob=%d bytes, address space: %s, init %.2fs, ready after %.2fs in-process)",
        url,
        idx,
        args.blob_bytes,
        cache_info,
        t_init - t_start,
        time.monotonic() - t_start,
    )
    rc = 0
    if not stop.is_set():
        # File first, then stdout: whoever sees either signal can rely on both.
        if args.ready_file:
            try:
                write_ready_file(args.ready_file, url)
            except OSError as exc:
                print(f"server.py: cannot write ready file {args.ready_file}: {exc}", file=sys.stderr)
                stop.set()
                rc = 2
    if not stop.is_set():
        try:
            print(f"ready {url}", flush=True)
        except OSError:  # stdout closed: the ready file still works
            pass

    await stop.wait()
    log.info("signal received, stopping")
    updater.cancel()
    try:
        await updater
    except asyncio.CancelledError:
        pass
    # The internal clock task sleeps 1 s between updates; cancel it so stop() is quick.
    clock = getattr(server.iserver, "time_task", None)
    if clock is not None and not clock.done():
        clock.cancel()
        try:
            await clock
        except (asyncio.CancelledError, Exception):
            pass
        server.iserver.time_task = None
    try:
        await asyncio.wait_for(server.stop(), 5)
    except Exception as exc:  # a slow or failing shutdown must not turn into a traceback
        log.warning("server stop did not finish cleanly: %r", exc)
    return rc


class _DropStartTraceback(logging.Filter):
    """asyncua logs a traceback when binding fails; we report that ourselves."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "error starting server" not in record.getMessage()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    level = getattr(logging, str(args.log_level).upper(), logging.WARNING)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("asyncua").setLevel(max(level, logging.WARNING))
    logging.getLogger("asyncua.server.server").addFilter(_DropStartTraceback())
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:  # SIGINT before the handler was installed
        return 0


if __name__ == "__main__":
    sys.exit(main())
