"""`sp-scan serve --electrum-port`: an Electrum server for silent-payments wallets, beside the BlindBit API.

Sparrow (Frigate's methods) and Cake Wallet (its tweak methods) connect here; every other Electrum
method goes to a backend Electrum server (electrs, Fulcrum, ElectrumX) on a connection per client.
Modules: `session` (the listener and per-connection protocol), `frigate` and `cake` (their methods'
params and answers), `passes` (the shared scans), `proxy` (the backend), `caps` (subscriptions per
address group), `rpc` (the session base class: everything the listener relies on in aiorpcx). Connections and requests count in the process's `limits.Gate`, which `sp-scan serve`
shares between this listener and the HTTP and gRPC ones (`service.Server(electrum=...)`).

```python
server = ElectrumServer("tweaks.db", port=50001, backend="tcp://127.0.0.1:60001")
url = await server.start()      # "tcp://127.0.0.1:50001"; start(gate) to share a process's Gate
...
await server.close()
```
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from sp_scan.index import Index
from sp_scan.index.scan import DASK_PARTITION_BLOCKS, DEFAULT_PARTITION_BLOCKS

from ..answers import READER_THREADS, Readers
from ..limits import Gate, Limits
from .passes import ScanService
from .proxy import BackendUrl
from .rpc import serve_lines
from .session import LISTEN_BACKLOG, LISTENER, ElectrumLimits, ElectrumSession, ServerState

__all__ = ["BackendUrl", "ElectrumLimits", "ElectrumServer", "ScanService"]


class ElectrumServer:
    """The Electrum listener over an index file.

    Args:
        db: the index.
        host, port: where to listen (port 0: any free port).
        backend: `tcp://HOST:PORT` or `ssl://HOST:PORT` of the backend Electrum server, or None
            (then only the silent-payments and tweak methods are served).
        tls: (certificate file, key file) to listen with TLS.
        limits: the listener's own caps (labels, subscriptions, line size, outbox).
        threads: native scanning threads.
        partition_blocks: heights read and scanned at a time for the subscriptions (default:
            DEFAULT_PARTITION_BLOCKS, with a cluster DASK_PARTITION_BLOCKS, one task each).
        mempool: tell caught-up subscriptions of mempool payments (the index's mempool table).
        cluster: a `sp_scan.index.cluster.Pool` (not closed here) that scans the subscriptions'
            histories, or None for this machine's cores (see `passes`).

    Raises:
        ValueError: a malformed backend URL.
    """

    def __init__(
        self,
        db: str | Path,
        host: str = "127.0.0.1",
        port: int = 50001,
        backend: str | None = None,
        tls: tuple[str, str] | None = None,
        limits: ElectrumLimits = ElectrumLimits(),
        threads: int = 1,
        mempool: bool = True,
        partition_blocks: int | None = None,
        cluster=None,
    ) -> None:
        self.db, self.host, self.port, self.tls = Path(db), host, port, tls
        self.backend = BackendUrl.parse(backend) if backend else None
        self.limits, self.threads, self.mempool = limits, threads, mempool
        self.partition_blocks = partition_blocks or (DEFAULT_PARTITION_BLOCKS if cluster is None else DASK_PARTITION_BLOCKS)
        self.cluster = cluster
        self.gate: Gate | None = None
        self.state: ServerState | None = None
        self._server: asyncio.base_events.Server | None = None

    @property
    def requests(self) -> int:
        """JSON-RPC calls received so far."""
        return self.state.requests if self.state is not None else 0

    async def start(self, gate: Gate | None = None) -> str:
        """Open the index, start the scanner, listen; return the URL (tcp:// or ssl://).

        Args:
            gate: the process's Gate, whose connection and request limits this listener shares with
                the others (its connections count as "electrum"); None: a Gate of its own with the
                default `limits.Limits`.

        Raises:
            IndexStoreError: the index cannot be opened.
            OSError: the address cannot be bound.
            ssl.SSLError: the certificate or key does not load.
        """
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(*self.tls)
        with Index.open(self.db, readonly=True) as index:
            network = index.network
        self.gate = gate if gate is not None else Gate(Limits(), (LISTENER,))
        scans = ScanService(self.db, threads=self.threads, partition_blocks=self.partition_blocks, mempool=self.mempool, cluster=self.cluster)
        self.state = ServerState(self.db, network, scans, Readers(self.db, READER_THREADS), self.gate, self.limits, self.backend, context is not None)
        scans.start()
        state = self.state
        try:
            self._server = await serve_lines(
                lambda transport: ElectrumSession(transport, state=state), self.host, self.port, ssl=context, backlog=LISTEN_BACKLOG
            )
        except BaseException:
            await self.close()
            raise
        host, port = self._server.sockets[0].getsockname()[:2]
        self.port = port
        return f"{'ssl' if context else 'tcp'}://{f'[{host}]' if ':' in host else host}:{port}"

    async def close(self) -> None:
        """Stop listening, close every connection, stop the scanner (wiping every key), close the index."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.state is not None:
            state, self.state = self.state, None
            await asyncio.gather(*(s.close(force_after=1) for s in list(state.sessions)), return_exceptions=True)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, state.scans.close)
            await loop.run_in_executor(None, state.readers.close)
