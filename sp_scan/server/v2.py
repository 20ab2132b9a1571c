"""BlindBit Oracle v2 over gRPC (`sp-scan serve --grpc-port N`): the `OracleService` of blindbit-lib.

What each call answers, as setavenger/blindbit-oracle 9ad4e46c's `internal/server/v2/service.go`
does over its store (`internal/database/dbpebble`):

- `GetInfo`: network (`main`, `testnet` for testnet3, `signet`, `regtest`; `testnet4` as is),
  the tip height, and which tweak kinds are served (all).
- `GetBestBlockHeight`, `GetBlockHashByHeight` (display order).
- `StreamComputeIndex(start, end, dustlimit, cut_through)`: one message per block, start..end:
  the block's hash and height, and per eligible tx, sorted by txid in internal byte order (the
  order of BlindBit's store keys), its display-order txid, tweak, and the first 8 bytes of each
  of its taproot outputs' x-only keys in vout order.
- `StreamBlockScanDataShort`: the same, and the first 8 bytes of the key of every P2TR output the
  block's inputs spend, tx then vin order.

Where sp-scan differs: `GetSpentOutputsShort`, in the proto but UNIMPLEMENTED by BlindBit's
server, answers those spent-output prefixes alone. BlindBit ignores `dustlimit` and
`cut_through`; here they filter per tx exactly as the v1 routes do (a tx is kept whole, by its
largest (unspent) taproot output), so 0 and false give BlindBit's answer byte for byte. A height that is not indexed is NOT_FOUND
(BlindBit sends an empty block), a range with start > end INVALID_ARGUMENT. `GetFullBlock` lists,
per eligible tx in the same order, its txid, tweak, taproot outputs and the outpoints its inputs
spend of P2TR outputs (display-order txid ‖ vout big-endian, as BlindBit packs them); the index
keeps no outpoints per tx, so they come from the server's node (UNAVAILABLE without one).

Each block's message is serialized once and kept in the server's answer cache (keyed by its
block hash, and the tip's for cut-through). Streams read a few blocks ahead on the reader
threads, follow the client's flow control, and stop when it cancels.

Limits: gRPC has no hook at accept, so clients reach the gRPC server through a small TCP
front on the public port that holds every connection to the process's `Gate` (total and
per-IP caps, a first-byte timeout, the write timeout) and relays bytes to the server on a
loopback port; each call takes a token of its client's per-IP rate. Request and metadata
sizes, concurrent streams per connection and idle connections are capped by gRPC's own options.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import grpc
from google.protobuf import empty_pb2

from sp_scan import wire
from sp_scan.errors import HeightError, IndexStoreError, SPError

from . import routes
from .answers import Answer, AnswerCache, ChainView, Readers, node_call
from .limits import Gate, RateLimitedLog, Ticket
from sp_scan.proto import blindbit_oracle_pb2 as pb

SERVICE = "blindbit.oracle.v1.OracleService"
NETWORK_NAMES = {"main": "main", "test": "testnet", "testnet4": "testnet4", "signet": "signet", "regtest": "regtest"}
READ_AHEAD = 4
"""Blocks a stream reads ahead of the one being sent."""
MAX_STREAMS_PER_CONNECTION = 16
SWEEP_EVERY = 1.0


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _items(txs: list) -> list[pb.ComputeIndexTxItem]:
    """BlindBit's compute index of a block's (txid32, tweak33, outputs) in its store's order (internal txid)."""
    return [
        pb.ComputeIndexTxItem(txid=txid32[::-1], tweak=tweak33, outputs_short=b"".join(u.output32[:8] for u in outputs))
        for txid32, tweak33, outputs in sorted(txs, key=lambda t: t[0])
    ]


def block_message(index, height: int, hash32: bytes, tip: bytes | None, dust: int, cut: bool, spent: bool) -> Answer:
    """One block's StreamBlockScanDataShort (spent) or StreamComputeIndex message, serialized (on a reader thread)."""

    def read():
        return index.eligible_txs(height, dust, cut), index.spent_keys(height) if spent else b""

    got, (txs, keys8), cacheable = routes.read_block(index, height, hash32, tip, read)
    ident = pb.BlockIdentifier(block_hash=got[::-1], block_height=height)
    if spent:
        message = pb.BlockScanDataShortResponse(block_identifier=ident, comp_index=_items(txs), spent_outputs=keys8)
    else:
        message = pb.ComputeIndexResponse(block_identifier=ident, index=_items(txs))
    return Answer(200, message.SerializeToString(), None, cacheable)


def full_block_message(index, height: int, hash32: bytes, block: tuple) -> Answer:
    """GetFullBlock's answer for one block, serialized: per eligible tx in BlindBit's order, its
    display-order txid, tweak, taproot outputs, and the outpoints its inputs spend of P2TR outputs
    (display-order txid ‖ vout big-endian, as BlindBit's store packs them), those from `block`, the
    node's copy of it (`node.block`'s answer: the index keeps no outpoints per tx).
    """
    got, txs, cacheable = routes.read_block(index, height, hash32, None, lambda: index.eligible_txs(height))
    try:
        spending = {tx.txid32: tx.inputs for tx in wire.transactions(*block)}
    except SPError as exc:
        raise _Abort(grpc.StatusCode.UNAVAILABLE, f"the node's block {height} does not parse: {exc}") from None
    items = []
    for txid32, tweak33, outputs in sorted(txs, key=lambda t: t[0]):
        inputs = b"".join(i.outpoint.txid32[::-1] + i.outpoint.vout.to_bytes(4, "big") for i in spending.get(txid32, ()) if _is_p2tr(i.prevout_script))
        utxos = [pb.UTXOItemLight(vout=u.vout, amount=u.value, pubkey=u.output32) for u in outputs]
        items.append(pb.FullTxItem(txid=txid32[::-1], tweak=tweak33, inputs=inputs, utxos=utxos))
    message = pb.FullBlockResponse(block_identifier=pb.BlockIdentifier(block_hash=got[::-1], block_height=height), index=items)
    return Answer(200, message.SerializeToString(), None, cacheable)


def _is_p2tr(script: bytes) -> bool:
    return len(script) == 34 and script[:2] == b"\x51\x20"


def spent_message(index, height: int, hash32: bytes) -> Answer:
    """GetSpentOutputsShort's answer for one block, serialized."""
    got, keys8, cacheable = routes.read_block(index, height, hash32, None, lambda: index.spent_keys(height))
    message = pb.IndexResponse(block_identifier=pb.BlockIdentifier(block_hash=got[::-1], block_height=height), index=keys8)
    return Answer(200, message.SerializeToString(), None, cacheable)


def _guarded(index, fn: Callable, *args) -> Answer:
    """fn(index, *args), the index's refusals raised as the call's status."""
    try:
        return fn(index, *args)
    except HeightError as exc:
        raise _Abort(grpc.StatusCode.NOT_FOUND, str(exc)) from None
    except routes.RouteError as exc:
        raise _Abort(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
    except IndexStoreError as exc:
        raise _Abort(grpc.StatusCode.UNAVAILABLE, f"the index cannot be read: {exc}") from None


class OracleService:
    """The OracleService calls over the index seen through `view` (answers built by `readers` into `cache`);
    `node` (a `RestNode` or `RpcNode`, or None) gives GetFullBlock the blocks' inputs.

    `admit(context)` is awaited first by every call (the front's per-IP rate), and may abort it.
    """

    def __init__(self, view: ChainView, readers: Readers, cache: AnswerCache, admit: Callable, node=None) -> None:
        self.view, self.readers, self.cache, self.admit, self.node = view, readers, cache, admit, node

    def handlers(self) -> grpc.GenericRpcHandler:
        """The generic handler registering every call under blindbit.oracle.v1.OracleService."""
        unary, stream = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
        empty, height, ranged = empty_pb2.Empty.FromString, pb.BlockHeightRequest.FromString, pb.RangedBlockHeightRequestFiltered.FromString
        calls = {
            "GetInfo": unary(self._call(self.get_info), empty, _serialize),
            "GetBestBlockHeight": unary(self._call(self.get_best_block_height), empty, _serialize),
            "GetBlockHashByHeight": unary(self._call(self.get_block_hash_by_height), height, _serialize),
            "GetSpentOutputsShort": unary(self._call(self.get_spent_outputs_short), height, _serialize),
            "GetFullBlock": unary(self._call(self.get_full_block), height, _serialize),
            "StreamComputeIndex": stream(self._stream(False), ranged, _serialize),
            "StreamBlockScanDataShort": stream(self._stream(True), ranged, _serialize),
        }
        return grpc.method_handlers_generic_handler(SERVICE, calls)

    def _call(self, fn: Callable) -> Callable:
        async def call(request, context):
            await self.admit(context)
            try:
                self._refresh()
                return await fn(request)
            except _Abort as exc:
                await context.abort(exc.code, str(exc))

        return call

    def _stream(self, spent: bool) -> Callable:
        async def stream(request, context):
            await self.admit(context)
            try:
                self._refresh()
                async for message in self.blocks(request, spent):
                    yield message
            except _Abort as exc:
                await context.abort(exc.code, str(exc))

        return stream

    def _refresh(self) -> None:
        try:
            self.view.refresh()
        except IndexStoreError as exc:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, f"the index cannot be read: {exc}") from None

    def _tip(self) -> tuple[int, bytes]:
        if self.view.tip is None:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, "the index has no blocks yet")
        return self.view.tip

    def _hash(self, height: int) -> bytes:
        hash32 = self.view.hash_at(height)
        if hash32 is None:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"height {height} is not in the index ({self.view.range_text()})")
        return hash32

    async def _build(self, key: tuple, fn: Callable, *args) -> bytes:
        return (await self.cache.build(key, lambda: self.readers.run(_guarded, fn, *args))).plain

    # ---- the calls ----

    async def get_info(self, request) -> pb.InfoResponse:
        height, _ = self._tip()
        return pb.InfoResponse(
            network=NETWORK_NAMES.get(self.view.network, self.view.network),
            height=height,
            tweaks_only=False,
            tweaks_full_basic=True,
            tweaks_full_with_dust_filter=True,
            tweaks_cut_through_with_dust_filter=True,
        )

    async def get_best_block_height(self, request) -> pb.BlockHeightResponse:
        return pb.BlockHeightResponse(block_height=self._tip()[0])

    async def get_block_hash_by_height(self, request) -> pb.BlockHashResponse:
        return pb.BlockHashResponse(block_hash=self._hash(request.block_height)[::-1])

    async def get_spent_outputs_short(self, request) -> bytes:
        height = request.block_height
        hash32 = self._hash(height)
        return await self._build(("v2-spent", height, hash32, None), spent_message, height, hash32)

    async def get_full_block(self, request) -> bytes:
        if self.node is None:
            raise _Abort(grpc.StatusCode.UNAVAILABLE, "GetFullBlock needs the server's node (serve --rest or --rpc): the index keeps no outpoints per tx")
        height = request.block_height
        hash32 = self._hash(height)

        async def build() -> Answer:
            try:
                block = await node_call(self.node.block, hash32[::-1].hex())  # not on a reader: the node may hang
            except SPError as exc:
                raise _Abort(grpc.StatusCode.UNAVAILABLE, f"the node could not give block {height}: {exc}") from None
            return await self.readers.run(_guarded, full_block_message, height, hash32, block)

        return (await self.cache.build(("v2-full", height, hash32, None), build)).plain

    async def blocks(self, request, spent: bool):
        """The serialized message of each block of the request's range, in height order."""
        start, end, dust, cut = request.start, request.end, request.dustlimit, request.cut_through
        if start > end:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"start {start} is above end {end}")
        self._hash(start)
        self._hash(end)
        kind = "v2-scan" if spent else "v2-compute"
        loop = asyncio.get_running_loop()
        ahead: deque[asyncio.Future] = deque()
        next_height = start
        try:
            for _ in range(start, end + 1):
                self._refresh()  # a long stream follows the chain as it moves
                while next_height <= end and len(ahead) < READ_AHEAD:
                    h, hash32 = next_height, self._hash(next_height)
                    tip = self._tip()[1] if cut else None
                    key = (kind, h, hash32, dust, cut, tip)
                    ahead.append(loop.create_task(self._build(key, block_message, h, hash32, tip, dust, cut, spent)))
                    next_height += 1
                yield await ahead.popleft()
        finally:
            for task in ahead:
                task.cancel()


def _serialize(message) -> bytes:
    return message if isinstance(message, bytes) else message.SerializeToString()


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection: what it receives is written to its peer, with backpressure.

    An end of stream is passed on as one (a half-close); once both sides have ended theirs the
    connection is over and both are closed. asyncio stops reading a half-closed side, so a socket
    left in that state would otherwise never be noticed again (nor its Gate ticket given back).
    """

    def __init__(self) -> None:
        self.peer: _Pipe | None = None
        self.transport: asyncio.Transport | None = None
        self.waiting: list[bytes] = []
        self.ended = False

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        else:
            self.waiting.append(data)

    def eof_received(self) -> bool:
        self.ended = True
        if self.peer is None:
            return True  # passed on by `link`
        if self.peer.ended or not self.peer.transport.can_write_eof():
            return False  # both directions are done: close (connection_lost closes the peer)
        self.peer.transport.write_eof()
        return True

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def link(self, peer: _Pipe) -> None:
        self.peer, peer.peer = peer, self
        for data in self.waiting:
            peer.transport.write(data)
        self.waiting.clear()
        if self.ended and peer.transport.can_write_eof():
            peer.transport.write_eof()


class _ClientSide(_Pipe):
    """The client's connection to the front: admitted by the gate, relayed to the gRPC server."""

    def __init__(self, front: GrpcFront) -> None:
        super().__init__()
        self.front = front
        self.ticket: Ticket | None = None
        self.opened = self.progress = time.monotonic()
        self.received = False
        self.pending = 0
        self.upstream_port: int | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        self.ticket = self.front.gate.admit("grpc", ip)
        if self.ticket is None:
            self.front.note("refused", f"refused a gRPC connection from {ip}: {self.front.gate.refusal(ip) or 'total'} connection limit")
            transport.abort()
            return
        self.front.clients.add(self)
        transport.pause_reading()
        asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream_transport, upstream = await loop.create_connection(_Pipe, "127.0.0.1", self.front.internal_port)
        except OSError:
            self.transport.abort()
            return
        if self.transport.is_closing():
            upstream_transport.close()
            return
        self.upstream_port = upstream_transport.get_extra_info("sockname")[1]
        self.front.tickets[self.upstream_port] = self.ticket
        upstream.link(self)
        self.link(upstream)
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.received = True
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.front.clients.discard(self)
        if self.upstream_port is not None:
            self.front.tickets.pop(self.upstream_port, None)
        if self.ticket is not None:
            self.front.gate.release(self.ticket)

    def sweep(self, now: float) -> None:
        limits, transport = self.front.gate.limits, self.transport
        pending = transport.get_write_buffer_size()
        if pending and pending >= self.pending and now - self.progress > limits.write_timeout:
            self.front.timeouts["write"] += 1
            transport.abort()
        elif not self.received and now - self.opened > limits.header_timeout:
            self.front.timeouts["header"] += 1
            transport.abort()
        if not pending or pending < self.pending:
            self.progress = now
        self.pending = pending


class GrpcFront:
    """The gRPC server on a loopback port and the limiting front that relays the public port to it."""

    def __init__(self, view: ChainView, readers: Readers, cache: AnswerCache, gate: Gate, log: Callable[[str], None] = print, node=None) -> None:
        self.view, self.readers, self.cache, self.gate, self.log, self.node = view, readers, cache, gate, log, node
        self.clients: set[_ClientSide] = set()
        self.tickets: dict[int, Ticket] = {}
        self.requests = 0
        self.timeouts = {"header": 0, "write": 0}
        self.internal_port = 0
        self._limited_log = RateLimitedLog()
        self._grpc: grpc.aio.Server | None = None
        self._listener: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None

    def note(self, kind: str, line: str) -> None:
        passed = self._limited_log(kind, line)
        if passed is not None:
            self.log(f"sp-scan serve: {passed}")

    async def admit(self, context) -> None:
        """Take a token of the calling client's per-IP rate; abort the call with RESOURCE_EXHAUSTED when none is left."""
        self.requests += 1
        peer = context.peer()  # "ipv4:127.0.0.1:PORT": the front's side of the relayed connection
        ticket = self.tickets.get(int(peer.rsplit(":", 1)[1])) if peer.startswith("ipv4:127.0.0.1:") else None
        if ticket is not None and not self.gate.allow_request(ticket):
            self.note("rate", f"rate limited gRPC calls from {ticket.group}")
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many requests from your address; slow down")

    async def start(self, host: str, port: int) -> str:
        """Start the gRPC server (loopback, any port) and the front on host:port; return "host:port" of the front.

        Raises:
            OSError: the port cannot be bound.
        """
        limits = self.gate.limits
        options = [
            ("grpc.max_receive_message_length", 1024),
            ("grpc.max_metadata_size", limits.max_header_bytes),
            ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
            ("grpc.max_connection_idle_ms", int(limits.idle_timeout * 1000)),
            ("grpc.server_handshake_timeout_ms", int(limits.header_timeout * 1000)),
            ("grpc.so_reuseport", 0),
        ]
        self._grpc = grpc.aio.server(options=options)
        service = OracleService(self.view, self.readers, self.cache, self.admit, self.node)
        self._grpc.add_generic_rpc_handlers((service.handlers(),))
        self.internal_port = self._grpc.add_insecure_port("127.0.0.1:0")
        await self._grpc.start()
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(lambda: _ClientSide(self), host, port, backlog=1024, reuse_address=True)
        self._sweeper = loop.call_later(SWEEP_EVERY, self._sweep)
        bound_host, bound_port = self._listener.sockets[0].getsockname()[:2]
        return f"{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"

    def _sweep(self) -> None:
        now = time.monotonic()
        for client in list(self.clients):
            client.sweep(now)
        self._sweeper = asyncio.get_running_loop().call_later(SWEEP_EVERY, self._sweep)

    async def close(self) -> None:
        """Stop accepting, end the calls in progress (2 s grace), close every relayed connection."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._listener is not None:
            self._listener.close()
        if self._grpc is not None:
            await self._grpc.stop(2)
        for client in list(self.clients):
            client.transport.close()
        if self._listener is not None:
            await self._listener.wait_closed()
