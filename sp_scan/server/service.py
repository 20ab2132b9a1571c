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

from aiohttp import web

from sp_scan.errors import IndexStoreError
from sp_scan.index import Index

from .app import READER_THREADS, Readers, create_app

LISTEN_BACKLOG = 1024
"""Pending connections the socket queues: clients open ~200 at once."""
SYNC_RESTART_MIN, SYNC_RESTART_MAX = 1.0, 60.0
SYNC_STOP_TIMEOUT = 30.0
INTERRUPTED = 130
"""The sync's exit status after Ctrl-C (a terminal's Ctrl-C reaches the server and its child)."""
INDEX_WAIT = 60.0
"""How long a new index may take to appear when the sync beside the server creates it."""


class Server:
    """The BlindBit v1 app over an index file, listening on host:port (port 0: any free port).

    Use `await start()` then `await close()`, in one event loop.
    """

    def __init__(self, db: str | Path, host: str = "127.0.0.1", port: int = 8000, threads: int = READER_THREADS) -> None:
        self.db, self.host, self.port, self.threads = Path(db), host, port, threads
        self.readers: Readers | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Check the index opens, bind the socket and serve; return the base URL.

        Raises:
            IndexStoreError: the index is missing, corrupt, or of another format version.
            OSError: the address cannot be bound.
        """
        Index.open(self.db, readonly=True).close()
        self.readers = Readers(self.db, self.threads)
        self._runner = web.AppRunner(create_app(self.readers), access_log=None, handle_signals=False)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self.port, backlog=LISTEN_BACKLOG).start()
        except BaseException:
            await self.close()
            raise
        host, port = self._runner.addresses[0][:2]
        self.port = port
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    async def close(self) -> None:
        """Stop accepting, finish the requests in flight, close the index connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.readers is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.readers.close)
            self.readers = None


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
    listeners: Sequence = (),
) -> None:
    """Serve until SIGINT or SIGTERM (or until `stop` is set), with `sync` running beside when given.

    Signal handlers are installed when called from the main thread. `listeners` (e.g. an
    `electrum.ElectrumServer`) are started once the index exists and closed before the sync stops.

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
        started = []
        try:
            for listener in listeners:
                log(f"sp-scan serve: {await listener.start()} (electrum)")
                started.append(listener)
            with Index.open(server.db, readonly=True) as index:
                tip = index.tip()
                where = f"tip {tip[0]}" if tip else "no blocks yet"
                log(f"sp-scan serve: {url} (index {server.db}, {index.network}, {where}{'; syncing' if sync else ''})")
            await stop.wait()
            log("sp-scan serve: stopping")
        finally:
            for listener in started:
                await listener.close()
            await server.close()
    finally:
        if sync is not None:
            await sync.stop()
        for signum in signals:
            loop.remove_signal_handler(signum)
