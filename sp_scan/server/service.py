"""Running `sp-scan serve`: the app on a socket, and optionally a sync that keeps the index in step.

The sync runs as a child process (`sp-scan index sync --follow`): the same code, resume and
signal handling as the command, its own interpreter (its Python work never takes the
server's GIL), and the index file is the only thing the two share. SQLite's WAL lets the
server's readers see each block as the child commits it. A child that exits early (the node
went away) is started again after a pause that doubles up to `SYNC_RESTART_MAX` seconds.
On 2 shared cores, /filter/new-utxos under 50 clients while mainnet-sized blocks sync: about
2,050 requests/s with the sync in a thread of the server or in a child alike (2,500-2,800
without a sync); the child also needs no stop hook in the sync and has a core of its own
where there is one.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sp_scan.errors import IndexStoreError
from sp_scan.index import Index

from .answers import CACHE_BYTES, READER_THREADS, AnswerCache, ChainView, Readers
from .app import BlindBitV1
from .http import HttpServer
from .limits import Gate, Limits, RateLimitedLog

LISTEN_BACKLOG = 1024
"""Pending connections the socket queues: clients open ~200 at once."""
SYNC_RESTART_MIN, SYNC_RESTART_MAX = 1.0, 60.0
SYNC_STOP_TIMEOUT = 30.0
INTERRUPTED = 130
"""The sync's exit status after Ctrl-C (a terminal's Ctrl-C reaches the server and its child)."""
INDEX_WAIT = 60.0
"""How long a new index may take to appear when the sync beside the server creates it."""
STATUS_HOST = "127.0.0.1"
STATUS_LIMITS = Limits(max_connections=64, per_ip_connections=0, per_ip_rate=0)


def _url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class Server:
    """`sp-scan serve`'s listeners over an index file: BlindBit v1 HTTP on host:port (port 0: any free
    port), and optionally BlindBit v2 gRPC on `grpc_port`, an Electrum listener, and the operator's
    view on 127.0.0.1:`status_port`. One `Gate` holds the HTTP, gRPC and Electrum listeners to the
    same per-address and total limits.

    Use `await start()` then `await close()`, in one event loop.

    Args:
        db: the index file.
        host, port: where the HTTP API listens.
        threads: reader threads building answers.
        limits: connection, rate, size and time limits (shared by the HTTP, gRPC and Electrum listeners).
        cache_bytes: the budget of built answers kept.
        relay: an `RpcNode` to relay POST /forward-tx with, or None (answered 503).
        node: the node the sync follows (`RestNode` or `RpcNode`), for the status page's node tip; or None.
        grpc_port, status_port: None for no such listener; 0 for any free port.
        electrum: an `electrum.ElectrumServer` to start (after the others) on the same Gate, or None.
        access_log: "-" (stderr) or a file to append a line per request to; None for none.
        log: where the server's own lines go.
    """

    def __init__(
        self,
        db: str | Path,
        host: str = "127.0.0.1",
        port: int = 8000,
        threads: int = READER_THREADS,
        *,
        limits: Limits = Limits(),
        cache_bytes: int = CACHE_BYTES,
        relay=None,
        node=None,
        grpc_port: int | None = None,
        status_port: int | None = None,
        electrum=None,
        access_log: str | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.db, self.host, self.port, self.threads = Path(db), host, port, threads
        self.limits, self.cache_bytes, self.relay, self.node = limits, cache_bytes, relay, node
        self.grpc_port, self.status_port, self.access_log_target, self.log = grpc_port, status_port, access_log, log
        self.electrum = electrum
        self.readers: Readers | None = None
        self.view: ChainView | None = None
        self.cache = AnswerCache(cache_bytes)
        self.gate: Gate | None = None
        self.http: HttpServer | None = None
        self.grpc = None
        self.status: HttpServer | None = None
        self.node_watch = None
        self.rate = None
        self.started = 0.0
        self.urls: dict[str, str] = {}
        self._access_log = None

    async def start(self) -> str:
        """Check the index opens, bind the sockets and serve; return the HTTP API's base URL.

        Raises:
            IndexStoreError: the index is missing, corrupt, or of another format version.
            OSError: an address cannot be bound.
        """
        from . import status

        Index.open(self.db, readonly=True).close()
        loop = asyncio.get_running_loop()
        self._quiet_accept_errors(loop)
        self.started = loop.time()
        self.readers = Readers(self.db, self.threads)
        try:
            self.view = ChainView(self.db)
            self.cache.follow(self.view)
            listeners = ("http", *(("grpc",) if self.grpc_port is not None else ()), *(("electrum",) if self.electrum else ()))
            self.gate = Gate(self.limits, listeners)
            if self.access_log_target is not None:
                self._access_log = status.AccessLog(self.access_log_target)
            app = BlindBitV1(self.view, self.readers, self.cache, self.relay)
            self.http = HttpServer(app, self.gate, "http", self.log, self._access_log)
            host, self.port = await self.http.start(self.host, self.port, LISTEN_BACKLOG)
            self.urls["http"] = _url(host, self.port)
            if self.grpc_port is not None:
                from .v2 import GrpcFront

                self.grpc = GrpcFront(self.view, self.readers, self.cache, self.gate, self.log, self.node)
                self.urls["grpc"] = await self.grpc.start(self.host, self.grpc_port)
            if self.electrum is not None:
                self.urls["electrum"] = await self.electrum.start(self.gate)
            self.rate = status.RateMeter(self.request_count)
            self.rate.start()
            if self.node is not None:
                self.node_watch = status.NodeWatch(self.node)
                self.node_watch.start()
            if self.status_port is not None:
                self.status = HttpServer(status.StatusApp(self), Gate(STATUS_LIMITS, ("status",), fd_limit=self.gate.fd_limit), "status", self.log)
                self.urls["status"] = _url(*await self.status.start(STATUS_HOST, self.status_port))
        except BaseException:
            await self.close()
            raise
        return self.urls["http"]

    def request_counts(self) -> dict[str, int]:
        """Requests received so far, per listener."""
        counts = {"http": self.http.requests if self.http else 0}
        if self.grpc is not None:
            counts["grpc"] = self.grpc.requests
        if self.electrum is not None:
            counts["electrum"] = self.electrum.requests
        return counts

    def request_count(self) -> int:
        return sum(self.request_counts().values())

    def _quiet_accept_errors(self, loop: asyncio.AbstractEventLoop) -> None:
        """Log asyncio's accept failures (out of file descriptors) as one line, rate-limited, not a traceback each."""
        limited, default = RateLimitedLog(), loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
            if "out of system resource" in context.get("message", ""):
                line = limited("accept", f"cannot accept connections: {context.get('exception')}")
                if line is not None:
                    self.log(f"sp-scan serve: {line}")
                return
            if default is not None:
                default(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)

    async def close(self) -> None:
        """Stop accepting, finish the requests in flight, close the index connections."""
        if self.electrum is not None:
            await self.electrum.close()
        for listener in (self.status, self.grpc, self.http):
            if listener is not None:
                await listener.close()
        self.status = self.grpc = self.http = None
        if self.rate is not None:
            self.rate.stop()
        if self.node_watch is not None:
            await self.node_watch.stop()
            self.node_watch = None
        if self.readers is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.readers.close)
            self.readers = None
        if self.view is not None:
            self.view.close()
            self.view = None
        if self._access_log is not None:
            self._access_log.close()
            self._access_log = None


class SyncChild:
    """`sp-scan index sync --follow` in a child process, restarted when it exits on its own."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None, log: Callable[[str], None] = print) -> None:
        self.argv, self.env, self.log = list(argv), dict(env) if env is not None else None, log
        self.process: asyncio.subprocess.Process | None = None
        self.exits = 0
        self._stopping = asyncio.Event()
        self._spawning = asyncio.Lock()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the child and keep it running in the background."""
        self._task = asyncio.create_task(self._keep_running())

    async def _keep_running(self) -> None:
        pause = SYNC_RESTART_MIN
        while True:
            async with self._spawning:  # `stop` waits for a child being started, then signals it
                if self._stopping.is_set():
                    return
                self.process = await asyncio.create_subprocess_exec(*self.argv, env=self.env, stdin=asyncio.subprocess.DEVNULL)
            code = await self.process.wait()
            self.exits += 1
            if self._stopping.is_set() or code == INTERRUPTED:  # stopping, or Ctrl-C reached the child too
                return
            self.log(f"sp-scan serve: the sync exited with status {code}; starting it again in {pause:g} s")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            pause = min(2 * pause, SYNC_RESTART_MAX)

    def running(self) -> bool:
        """True while the child process is alive."""
        return self.process is not None and self.process.returncode is None

    def stopping(self) -> None:
        """Do not start the child again when it exits (the server is stopping)."""
        self._stopping.set()

    async def stop(self) -> None:
        """SIGTERM the child (it finishes its block and exits), kill it after SYNC_STOP_TIMEOUT."""
        self._stopping.set()
        async with self._spawning:  # a child being started is signalled once it runs; none starts after
            pass
        if self.running():
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), SYNC_STOP_TIMEOUT)
            except asyncio.TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self._task is not None:
            await self._task


def sync_command(db: str | Path, node_args: Sequence[str]) -> list[str]:
    """The argv of `sp-scan index sync --db DB --follow NODE_ARGS` run with this interpreter."""
    return [sys.executable, "-m", "sp_scan.cli", "index", "sync", "--db", str(db), "--follow", *node_args]


async def _wait_for_index(db: Path, sync: SyncChild, stop: asyncio.Event) -> bool:
    """Wait until the sync has created the index file (it is built aside and renamed into place).

    Returns:
        True once the file exists; False when `stop` is set first.

    Raises:
        IndexStoreError: the sync exited, or INDEX_WAIT passed, without creating it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + INDEX_WAIT
    while not db.exists():
        if stop.is_set():
            return False
        if sync.exits:
            raise IndexStoreError(f"no index at {db}: the sync beside the server exited before creating it")
        if loop.time() > deadline:
            raise IndexStoreError(f"no index at {db}: the sync did not create it within {INDEX_WAIT:g} s")
        await asyncio.sleep(0.05)
    return True


async def serve(
    server: Server,
    sync: SyncChild | None = None,
    log: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM (or until `stop` is set), with `sync` running beside when given.

    Signal handlers are installed when called from the main thread. The server starts once the
    index exists and is closed before the sync stops.

    Raises:
        IndexStoreError, OSError: as `Server.start`, or the sync exited before creating a new index.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()

    def on_signal() -> None:
        stop.set()
        if sync is not None:
            sync.stopping()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal)
    try:
        if sync is not None:
            sync.start()
            if not await _wait_for_index(server.db, sync, stop):
                return
        url = await server.start()
        try:
            if "electrum" in server.urls:
                log(f"sp-scan serve: {server.urls['electrum']} (electrum)")
            with Index.open(server.db, readonly=True) as index:
                tip = index.tip()
                where = f"tip {tip[0]}" if tip else "no blocks yet"
                extra = "".join(f"; {name} {server.urls[name]}" for name in ("grpc", "status") if name in server.urls)
                log(f"sp-scan serve: {url} (index {server.db}, {index.network}, {where}{'; syncing' if sync else ''}){extra}")
            await stop.wait()
            log("sp-scan serve: stopping")
        finally:
            await server.close()
    finally:
        if sync is not None:
            await sync.stop()
        for signum in signals:
            loop.remove_signal_handler(signum)
