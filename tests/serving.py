"""Test helpers for `sp-scan serve`: a server on 127.0.0.1 in a thread, a plain HTTP client, indexes from chains."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

from sp_scan.index import Index
from sp_scan.node import RestNode
from sp_scan.server import Server


class ServerThread:
    """An `sp_scan.server.Server` over `db` on 127.0.0.1 and an ephemeral port, run by its own event loop thread.

    Use as a context manager; `.url` is the base URL, `.server.urls` every listener's ("grpc", "status").
    `options` go to `Server` (limits, grpc_port, status_port, relay...).
    """

    def __init__(self, db: Path, threads: int = 4, **options) -> None:
        self.server = Server(db, "127.0.0.1", 0, threads, **options)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-server", daemon=True)
        self.url = ""

    def __enter__(self) -> ServerThread:
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], object]:
    """GET url with urllib: (status, headers, JSON body), a gzip body decompressed. Never raises for a status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, head, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        status, head, raw = err.code, dict(err.headers), err.read()
    if head.get("Content-Encoding") == "gzip":
        raw = gzip.decompress(raw)
    return status, head, json.loads(raw)


def ok(url: str) -> object:
    """The JSON body of a GET that must answer 200."""
    status, _, body = get(url)
    assert status == 200, (url, status, body)
    return body


def synced_index(path: Path, rest_url: str, stop: int | None = None) -> Path:
    """Create an index at `path` and sync it from a REST stand-in (to its tip, or `stop`)."""
    with Index.create(path, "regtest") as index:
        index.sync(RestNode(rest_url), stop=stop)
    return path


def sync(path: Path, rest_url: str, stop: int | None = None) -> None:
    """Bring an existing index to the REST stand-in's tip (or `stop`), following any reorg."""
    with Index.open(path) as index:
        index.sync(RestNode(rest_url), stop=stop)
