"""The aiohttp application: routes, reader threads, JSON and gzip, JSON errors for everything else."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from sp_scan.errors import HeightError, IndexStoreError
from sp_scan.index import Index

from . import routes

log = logging.getLogger("sp_scan.server")

GZIP_MIN_BYTES = 256
"""Smaller bodies are sent as they are: gzip would not make them shorter."""
GZIP_LEVEL = 1
"""Hex of random bytes: level 1 compresses it as well as level 9 (to ~57%) at a third of level 4's time."""
READER_THREADS = 4
_JSON = {"Content-Type": "application/json; charset=utf-8", "Access-Control-Allow-Origin": "*"}
"""Every answer is public chain data: browser wallets on any origin may read it (as from BlindBit)."""


class Readers:
    """Read-only `Index` connections for the handlers: a thread pool, one connection per thread.

    SQLite calls block, so every request's reads, JSON encoding and gzip run on these threads
    (SQLite and zlib release the GIL) and the event loop only moves bytes. WAL lets them read
    while a sync writes.
    """

    def __init__(self, path: str | Path, threads: int = READER_THREADS) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._opened: list[Index] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sp-scan-reader")

    def _index(self) -> Index:
        index = getattr(self._local, "index", None)
        if index is None:
            index = Index.open(self.path, readonly=True)
            with self._lock:
                self._opened.append(index)
            self._local.index = index
        return index

    async def run(self, fn: Callable, *args):
        """Run fn(index, *args) on a reader thread and return its result."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(self._index(), *args))

    def close(self) -> None:
        """Wait for running reads, then close every connection."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for index in self._opened:
                index.close()
            self._opened.clear()


READERS = web.AppKey("readers", Readers)


def accepts_gzip(accept_encoding: str) -> bool:
    """True when an Accept-Encoding header value allows gzip (a `gzip` or `*` coding, q > 0)."""
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() in ("gzip", "*"):
            q = params.strip()
            return not (q.startswith("q=") and _qvalue(q[2:]) == 0)
    return False


def _qvalue(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 1.0


def _render(index: Index, body: Callable, args: tuple, gzip: bool) -> tuple[int, bytes, bool]:
    """Build one answer on a reader thread: (status, body bytes, gzipped)."""
    try:
        status, value = 200, body(index, *args)
    except routes.RouteError as exc:
        status, value = exc.status, {"error": str(exc)}
    except HeightError as exc:
        status, value = 404, {"error": str(exc)}
    except IndexStoreError as exc:
        log.error("index read failed: %s", exc)
        status, value = 503, {"error": f"the index cannot be read: {exc}"}
    data = json.dumps(value, separators=(",", ":")).encode()
    if gzip and len(data) >= GZIP_MIN_BYTES:
        return status, zlib.compress(data, GZIP_LEVEL, wbits=31), True
    return status, data, False


def _response(status: int, data: bytes, gzipped: bool) -> web.Response:
    headers = dict(_JSON, Vary="Accept-Encoding")
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return web.Response(status=status, body=data, headers=headers)


async def _answer(request: web.Request, body: Callable, *args) -> web.Response:
    gzip = accepts_gzip(request.headers.get("Accept-Encoding", ""))
    return _response(*await request.app[READERS].run(_render, body, args, gzip))


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"error": message}, separators=(",", ":")), headers=_JSON)


async def info(request: web.Request) -> web.Response:
    return await _answer(request, routes.info_body)


async def block_height(request: web.Request) -> web.Response:
    return await _answer(request, routes.block_height_body)


async def block_hash(request: web.Request) -> web.Response:
    return await _answer(request, routes.block_hash_body, routes.parse_height(request.match_info["height"]))


async def tweak_index(request: web.Request) -> web.Response:
    height = routes.parse_height(request.match_info["height"])
    return await _answer(request, routes.tweaks_body, height, routes.parse_dust_limit(request.query.get("dustLimit")), False)


async def tweaks(request: web.Request) -> web.Response:
    height = routes.parse_height(request.match_info["height"])
    return await _answer(request, routes.tweaks_body, height, routes.parse_dust_limit(request.query.get("dustLimit")), True)


async def filter_(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    if kind not in routes.FILTER_KINDS:
        raise routes.RouteError(404, f"unknown filter type {kind[:40]!r} (new-utxos or spent)")
    return await _answer(request, routes.filter_body, kind, routes.parse_height(request.match_info["height"]))


async def utxos(request: web.Request) -> web.Response:
    return await _answer(request, routes.utxos_body, routes.parse_height(request.match_info["height"]))


async def spent_index(request: web.Request) -> web.Response:
    return await _answer(request, routes.spent_index_body, routes.parse_height(request.match_info["height"]))


@web.middleware
async def json_errors(request: web.Request, handler) -> web.StreamResponse:
    """Answer every failure as a JSON `{"error": ...}` body: bad input, unknown route, bad method."""
    try:
        return await handler(request)
    except routes.RouteError as exc:
        return _error(exc.status, str(exc))
    except IndexStoreError as exc:  # a reader thread could not open the index
        log.error("index open failed: %s", exc)
        return _error(503, f"the index cannot be read: {exc}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason.lower())
    except Exception:
        log.exception("%s failed", request.path_qs)
        return _error(500, "internal error")


def create_app(readers: Readers) -> web.Application:
    """The BlindBit Oracle v1 application over an index read through `readers`."""
    app = web.Application(middlewares=[json_errors])
    app[READERS] = readers
    app.router.add_get("/info", info)
    app.router.add_get("/block-height", block_height)
    app.router.add_get("/block-hash/{height}", block_hash)
    app.router.add_get("/tweak-index/{height}", tweak_index)
    app.router.add_get("/tweaks/{height}", tweaks)
    app.router.add_get("/filter/{kind}/{height}", filter_)
    app.router.add_get("/utxos/{height}", utxos)
    app.router.add_get("/spent-index/{height}", spent_index)
    return app
