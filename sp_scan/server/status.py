"""The operator's view (`--status-port`, loopback only): GET /status (JSON) and GET /metrics (Prometheus).

Everything is read from the live counters when asked: serving pays nothing for it. `/metrics`
needs `prometheus_client` (the `serve` extra). The access log (`--access-log`) is here too.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, TextIO

from sp_scan import native
from sp_scan.errors import ServerError

from .answers import AnswerCache, ChainView, node_call
from .http import JSON_HEADERS, HttpServer, Request, Response, json_error
from .limits import Gate

NODE_POLL = 30.0
RATE_WINDOW = 10
"""Seconds of request counts the req/s figure averages."""


class ServerView(Protocol):
    """What the operator's view reads of `service.Server`."""

    view: ChainView
    cache: AnswerCache
    gate: Gate
    http: HttpServer
    node_watch: NodeWatch | None
    rate: RateMeter
    started: float

    def request_counts(self) -> dict[str, int]: ...

    def request_count(self) -> int: ...


def version() -> str:
    try:
        return importlib.metadata.version("sp-scan")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


class NodeWatch:
    """The node's tip height and mempool size, polled every NODE_POLL seconds on a daemon thread (None when unknown)."""

    def __init__(self, node) -> None:
        self.node = node
        self.tip: int | None = None
        self.mempool: int | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _poll(self) -> None:
        while True:
            self.tip, self.mempool = await node_call(self._read)
            await asyncio.sleep(NODE_POLL)

    def _read(self) -> tuple[int | None, int | None]:
        try:
            tip = self.node.tip_height()
        except ServerError:
            return None, None
        try:
            if hasattr(self.node, "call"):
                info = self.node.call("getmempoolinfo")
            else:
                info = json.loads(self.node.get("/rest/mempool/info.json"))
            mempool = info.get("size") if isinstance(info, dict) else None
        except (ServerError, ValueError):
            mempool = None
        return tip, mempool if isinstance(mempool, int) else None


class RateMeter:
    """Requests per second over the last RATE_WINDOW seconds, from a counter sampled once a second."""

    def __init__(self, count: Callable[[], int]) -> None:
        self.count = count
        self._samples: deque[tuple[float, int]] = deque(maxlen=RATE_WINDOW + 1)
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._sample()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _sample(self) -> None:
        self._samples.append((time.monotonic(), self.count()))
        self._handle = asyncio.get_running_loop().call_later(1.0, self._sample)

    def rate(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0


def status(server: ServerView) -> dict:
    """The /status document."""
    view, cache, gate = server.view, server.cache, server.gate
    tip = view.tip
    node_tip = server.node_watch.tip if server.node_watch else None
    lookups = cache.hits + cache.misses
    return {
        "version": version(),
        "ec_engine": native.ec_engine(),
        "network": view.network,
        "index": {"first_height": view.first, "tip_height": tip[0] if tip else None, "tip_hash": tip[1][::-1].hex() if tip else None},
        "node": {
            "tip_height": node_tip,
            "lag": node_tip - tip[0] if node_tip is not None and tip else None,
            "mempool_size": server.node_watch.mempool if server.node_watch else None,
        },
        "connections": dict(gate.stats.open),
        "connection_cap": gate.max_connections,
        "fd_limit": gate.fd_limit,
        "requests_per_second": round(server.rate.rate(), 1),
        "requests": server.request_count(),
        "refused": {
            "connections_total_cap": gate.stats.refused_total,
            "connections_per_ip": gate.stats.refused_per_ip,
            "rate_limited": gate.stats.rate_limited,
            "bad_requests": server.http.bad_requests,
        },
        "timeouts": dict(server.http.timeouts),
        "cache": {
            "entries": len(cache),
            "bytes": cache.bytes,
            "max_bytes": cache.max_bytes,
            "hit_rate": round(cache.hits / lookups, 4) if lookups else None,
        },
        "cluster": _cluster(server),
        "uptime_s": round(time.monotonic() - server.started, 1),
    }


def _cluster(server: ServerView) -> dict | None:
    """The Dask cluster of the Electrum subscriptions (`passes.ScanService.cluster_status`), None without one."""
    electrum = server.electrum
    state = electrum.state if electrum is not None else None
    return state.scans.cluster_status() if state is not None else None


class _Collector:
    """A prometheus_client collector reading `server`'s counters at scrape time."""

    def __init__(self, server: ServerView) -> None:
        self.server = server

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

        doc = status(self.server)
        server = self.server

        def gauge(name: str, text: str, value) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"sp_scan_{name}", text, value=float("nan") if value is None else value)

        yield InfoMetricFamily("sp_scan", "sp-scan version, EC engine and network", value={"version": doc["version"], "ec_engine": doc["ec_engine"], "network": doc["network"]})
        yield gauge("index_tip_height", "Height of the index's tip.", doc["index"]["tip_height"])
        yield gauge("node_tip_height", "Height of the node's tip (NaN without a node).", doc["node"]["tip_height"])
        yield gauge("index_lag_blocks", "Blocks the index is behind the node.", doc["node"]["lag"])
        yield gauge("mempool_size", "Transactions in the node's mempool.", doc["node"]["mempool_size"])
        connections = GaugeMetricFamily("sp_scan_open_connections", "Open client connections.", labels=["listener"])
        for listener, count in doc["connections"].items():
            connections.add_metric([listener], count)
        yield connections
        requests = CounterMetricFamily("sp_scan_requests", "Requests received.", labels=["listener"])
        for listener, count in server.request_counts().items():
            requests.add_metric([listener], count)
        yield requests
        refused = CounterMetricFamily("sp_scan_refused", "Connections and requests refused by the limits.", labels=["reason"])
        for reason, count in doc["refused"].items():
            refused.add_metric([reason], count)
        yield refused
        timeouts = CounterMetricFamily("sp_scan_timeouts", "Connections closed by a timeout.", labels=["kind"])
        for kind, count in doc["timeouts"].items():
            timeouts.add_metric([kind], count)
        yield timeouts
        yield CounterMetricFamily("sp_scan_cache_hits", "Answers served from the cache.", value=server.cache.hits)
        yield CounterMetricFamily("sp_scan_cache_misses", "Answers built.", value=server.cache.misses)
        yield gauge("cache_bytes", "Bytes of cached answers.", doc["cache"]["bytes"])
        yield gauge("cache_entries", "Cached answers.", doc["cache"]["entries"])
        yield gauge("requests_per_second", f"Requests per second over the last {RATE_WINDOW} s.", doc["requests_per_second"])
        dask = doc["cluster"]
        if dask is not None:
            yield gauge("dask_workers", "Workers of the Dask cluster scanning the Electrum subscriptions.", dask["workers"])
            yield gauge("dask_tasks_in_flight", "Partitions sent to the cluster and not yet returned.", dask["tasks_in_flight"])
            yield CounterMetricFamily("sp_scan_dask_partitions", "Partitions the cluster scanned.", value=dask["partitions_done"])
            yield gauge("dask_fell_back", "1 once the cluster failed and the scans run on this machine.", int(dask["fell_back"]))


class StatusApp:
    """The `http.Handler` of the status listener."""

    def __init__(self, server: ServerView) -> None:
        self.server = server
        self._registry = None

    def __call__(self, request: Request) -> Response:
        if request.path not in ("/status", "/metrics"):
            return json_error(404, "not found (GET /status or /metrics)")
        if request.method not in ("GET", "HEAD"):
            return json_error(405, "method not allowed", b"Allow: GET, HEAD\r\n")
        if request.path == "/status":
            return Response(200, json.dumps(status(self.server), indent=1).encode(), JSON_HEADERS)
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from prometheus_client.registry import CollectorRegistry

        if self._registry is None:
            self._registry = CollectorRegistry(auto_describe=False)
            self._registry.register(_Collector(self.server))
        return Response(200, generate_latest(self._registry), f"Content-Type: {CONTENT_TYPE_LATEST}\r\n".encode())


class AccessLog:
    """One line per answered request: time, address, method, path, status, bytes, milliseconds.

    Only the path and the dustLimit value are written: never a query's other values, a header
    or a body (POST /forward-tx carries a transaction, not a secret, but it stays out too).
    """

    def __init__(self, target: str) -> None:
        self._out: TextIO = sys.stderr if target == "-" else open(target, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._owned = target != "-"

    def __call__(self, request: Request, response: Response, seconds: float) -> None:
        query = ""
        if "dustLimit=" in request.query:
            dust = request.query.split("dustLimit=", 1)[1].split("&", 1)[0]
            query = f"?dustLimit={dust[:20]}" if dust.isdigit() else "?dustLimit=(bad)"
        length = len(response.body) if response.length is None else response.length
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path = request.path.encode("unicode_escape").decode("ascii")[:200]
        self._out.write(f'{stamp} {request.peer} "{request.method} {path}{query}" {response.status} {length} {seconds * 1e3:.2f}ms\n')

    def close(self) -> None:
        if self._owned:
            self._out.close()
