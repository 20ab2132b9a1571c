"""`--grpc HOST:PORT`: a BlindBit Oracle v2 gRPC server as a wallet's source (docs/serving.md, "BlindBit Oracle v2").

Blocks come from one `StreamBlockScanDataShort(start, end, dustlimit, cut_through)` per round, the
only call spdk's blindbit-v2 client makes: per block its hash, its eligible txs (txid, tweak, the
8-byte prefixes of their taproot output keys in vout order) and the 8-byte key prefixes of the
taproot outputs it spends. The sync loop hands a block the k = 0 keys of each tweak; a tx whose
prefixes hold one of its own tweak's keys is a hit, and only then is the block's `GetFullBlock`
asked for the hit txs' outputs and amounts, as blindbit-lib's scanner does (the server needs its
node for it). A wallet output is spent in the block whose spent prefixes hold its key's first 8
bytes (the spending txid is not said). `GetBlockHashByHeight` finds forks. No mempool.

Trust: the stream's shape is checked (widths, counts within a block's, the heights asked for), and
`GetFullBlock` must agree with it (the block's hash, each hit tx with the same tweak and the same
key prefixes in vout order, amounts within the money supply), else the block is refused; found
outputs are the loop's own scan. BlindBit orders a block's txs by txid and names no positions, so
two payments of one block are listed in txid order, not in the block's. A failing call raises
`ServerError` (the stream is opened again from the block it stopped at, `retry.attempts` times with
doubling waits); an answer that does not parse or contradicts itself raises `SourceError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from sp_scan.errors import ConfigError, ServerConfigError, ServerError, SourceError
from sp_scan.network import NETWORKS
from sp_scan.retry import Retry, time_left

from .base import MAX_BLOCK_OUTPUTS, MAX_BLOCK_TXS, MAX_MONEY, RETRY, BlockTxs, Closes, Keys0, Spend, endpoint

SERVICE = "/blindbit.oracle.v1.OracleService/"
MAX_MESSAGE = 64 << 20
"""The largest message read: a mainnet block's GetFullBlock is a few MB."""
MAX_SPENT = 200_000
"""More spent-output prefixes than a block has inputs."""
TIMEOUT = 60.0
STREAM_SECONDS_PER_BLOCK = 1.0
"""A stream's deadline: TIMEOUT plus this per block asked for (a server that stops sending is given up on)."""
NAMES = {"testnet": "test"}
"""BlindBit's network names that are not Core's."""
_GRPC_FRAME = 5
"""gRPC's length prefix before each message."""
_FINAL = ("INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED", "FAILED_PRECONDITION", "OUT_OF_RANGE", "UNIMPLEMENTED", "UNAUTHENTICATED")
"""Status codes a retry cannot heal."""
_NO_NODE = "needs the server's node"
"""sp-scan serve's UNAVAILABLE for GetFullBlock without a node: its configuration, not a passing fault."""


def _flag(dust_limit: int, cut_through: bool) -> str:
    """The GetInfo flag that says the tweaks this sync asks for are served."""
    if cut_through:
        return "tweaks_cut_through_with_dust_filter"
    return "tweaks_full_with_dust_filter" if dust_limit else "tweaks_full_basic"


@dataclass
class V2Block:
    """One block of the stream (a `SourceBlock`): tweaks and output prefixes; outputs on a hit."""

    height: int
    hash32: bytes
    tweaks33: bytes
    txids: list[bytes]
    shorts: list[list[bytes]]
    spent: frozenset[bytes]
    full_block: Callable[[int], object] = field(repr=False)
    prev32: bytes | None = None
    header80: bytes | None = None
    wants_keys0: bool = True
    proven: bool = False

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        """The hit txs (those holding a k = 0 key of their own tweak) with their outputs from GetFullBlock.

        Raises:
            ServerError: GetFullBlock fails after the retries.
            SourceError: GetFullBlock disagrees with the stream.
        """
        if keys0 is None:
            return BlockTxs()
        hits = [i for i, shorts in enumerate(self.shorts) if set(shorts).intersection(k[:8] for k in keys0.of(i))]
        if not hits:
            return BlockTxs()
        what = f"BlindBit v2 GetFullBlock({self.height})"
        full = self.full_block(self.height)
        if full.block_identifier.block_hash[::-1] != self.hash32 or full.block_identifier.block_height != self.height:
            raise SourceError(f"{what} names another block than the stream's {self.hash32[::-1].hex()}")
        if len(full.index) > MAX_BLOCK_TXS:
            raise SourceError(f"{what}: {len(full.index):,} transactions, more than a block holds")
        items = {item.txid[::-1]: item for item in full.index}
        txs = []
        for i in hits:
            item = items.get(self.txids[i])
            if item is None or item.tweak != self.tweaks33[33 * i : 33 * i + 33]:
                raise SourceError(f"{what} does not hold transaction {self.txids[i][::-1].hex()} with the stream's tweak")
            outputs = sorted((u.vout, u.pubkey, u.amount) for u in item.utxos)
            if any(len(key) != 32 or amount > MAX_MONEY for _, key, amount in outputs):
                raise SourceError(f"{what}: an output of {self.txids[i][::-1].hex()} is not a 32-byte key with an amount")
            if [key[:8] for _, key, _ in outputs] != self.shorts[i]:
                raise SourceError(f"{what}: the outputs of {self.txids[i][::-1].hex()} are not the keys the stream gave")
            txs.append((self.txids[i], self.tweaks33[33 * i : 33 * i + 33], outputs))
        return BlockTxs.of(txs)

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        """The outpoints whose key's first 8 bytes are among the block's spent-output prefixes."""
        return [Spend(op) for op, key in zip(outpoints36, outputs32) if key[:8] in self.spent]


class BlindBitV2Source(Closes):
    """A BlindBit Oracle v2 gRPC server as a wallet's source (needs grpcio: the serve extra).

    Args:
        url: `grpc://HOST:PORT`, or `grpcs://HOST:PORT` to connect with TLS (the system's certificate authorities)
            instead of plain HTTP/2.
        dust_limit: ask for txs whose largest taproot output is >= this many sats only.
        cut_through: ask for txs with an unspent taproot output only.
        retry: how a failing call is tried again.

    Raises:
        SourceURLError: another URL.
        ConfigError: grpcio is not installed.
    """

    def __init__(self, url: str, *, dust_limit: int = 0, cut_through: bool = False, retry: Retry = RETRY, timeout: float = TIMEOUT) -> None:
        scheme, host, port = endpoint(url, ("grpc", "grpcs"), "a BlindBit v2 server")
        target, tls = f"[{host}]:{port}" if ":" in host else f"{host}:{port}", scheme == "grpcs"
        try:
            import grpc

            from sp_scan.proto import blindbit_oracle_pb2 as pb
        except ImportError:
            raise ConfigError("BlindBit v2 needs grpcio: pip install 'sp-scan[serve]'") from None

        self.grpc, self.pb = grpc, pb
        options = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.enable_http_proxy", 0)]
        self.channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(), options) if tls else grpc.insecure_channel(target, options)
        self.name = f"BlindBit v2 at {target}"
        self.dust_limit, self.cut_through, self.retry, self.timeout = dust_limit, cut_through, retry, timeout
        self.received = 0
        self._network: str | None = None

    def _reader(self, reply) -> Callable[[bytes], object]:
        """A response deserializer that counts the bytes received."""

        def read(data: bytes):
            self.received += len(data) + _GRPC_FRAME
            return reply.FromString(data)

        return read

    def _error(self, exc, call: str) -> Exception:
        """A failed call as ServerError (the server or the connection), ServerConfigError (what a retry cannot heal),
        or SourceError (an answer that does not parse)."""
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        detail = (exc.details() if callable(getattr(exc, "details", None)) else None) or str(exc)
        detail = " ".join(str(detail).split())[:200]
        if code == self.grpc.StatusCode.INTERNAL and "deserializ" in detail.lower():
            return SourceError(f"{self.name}: {call} answered with a message that does not parse")
        final = code is not None and (code.name in _FINAL or _NO_NODE in detail)
        return (ServerConfigError if final else ServerError)(f"{self.name}: {call}: {code.name if code else 'failed'} {detail}".rstrip())

    def _unary(self, name: str, request, reply):
        """One call's answer, retried through `retry`."""
        return self.retry.call(self._unary_once, name, request, reply)

    def _unary_once(self, name: str, request, reply):
        call = self.channel.unary_unary(SERVICE + name, request_serializer=type(request).SerializeToString, response_deserializer=self._reader(reply))
        try:
            return call(request, timeout=time_left(self.timeout))
        except self.grpc.RpcError as exc:
            raise self._error(exc, name) from None

    def network(self) -> str:
        """GetInfo's network, with the flag of the tweaks this sync asks for checked.

        Raises:
            SourceError: an unknown network, or the server says it does not serve those tweaks.
        """
        if self._network is None:
            from google.protobuf import empty_pb2

            info = self._unary("GetInfo", empty_pb2.Empty(), self.pb.InfoResponse)
            network = NAMES.get(info.network, info.network)
            if network not in NETWORKS:
                raise SourceError(f"{self.name}: network {info.network[:20]!r} is not one of {', '.join(NETWORKS)}")
            flag = _flag(self.dust_limit, self.cut_through)
            if not getattr(info, flag):
                raise SourceError(f"{self.name}: GetInfo's {flag} is false: the server does not serve the tweaks this sync asks for")
            self._network = network
        return self._network

    def tip_height(self) -> int:
        from google.protobuf import empty_pb2

        return self._unary("GetBestBlockHeight", empty_pb2.Empty(), self.pb.BlockHeightResponse).block_height

    def block_hash(self, height: int) -> bytes:
        """The server's block hash at `height` (internal order).

        Raises:
            SourceError: not 32 bytes.
        """
        got = self._unary("GetBlockHashByHeight", self.pb.BlockHeightRequest(block_height=height), self.pb.BlockHashResponse).block_hash
        if len(got) != 32:
            raise SourceError(f"{self.name}: GetBlockHashByHeight({height}) is not 32 bytes")
        return got[::-1]

    def _full_block(self, height: int):
        return self._unary("GetFullBlock", self.pb.BlockHeightRequest(block_height=height), self.pb.FullBlockResponse)

    def _open(self, start: int, stop: int):
        """The stream from `start` and its first message (so a server that is down fails here, where it is retried)."""
        request = self.pb.RangedBlockHeightRequestFiltered(start=start, end=stop, dustlimit=self.dust_limit, cut_through=self.cut_through)
        method = self.channel.unary_stream(SERVICE + "StreamBlockScanDataShort", request_serializer=type(request).SerializeToString, response_deserializer=self._reader(self.pb.BlockScanDataShortResponse))
        call = method(request, timeout=self.timeout + (stop - start + 1) * STREAM_SECONDS_PER_BLOCK)
        try:
            return call, next(call)
        except StopIteration:
            raise SourceError(f"{self.name}: StreamBlockScanDataShort({start}, {stop}) sent no block") from None
        except self.grpc.RpcError as exc:
            call.cancel()
            raise self._error(exc, "StreamBlockScanDataShort") from None

    def blocks(self, start: int, stop: int) -> Iterator[V2Block]:
        """Heights start..stop from the stream (opened again where it broke off, through `retry`).

        Raises:
            ServerError: the server fails after the retries.
            SourceError: a message the checks refuse, or a stream that ends early.
        """
        height = start
        while height <= stop:
            call, message = self.retry.call(self._open, height, stop)
            try:
                while True:
                    yield self._block(message, height)
                    height += 1
                    try:
                        message = next(call)
                    except StopIteration:
                        break
            except self.grpc.RpcError:
                continue  # broken off: opened again from `height`
            finally:
                call.cancel()
            if height <= stop:
                raise SourceError(f"{self.name}: the stream ended after block {height - 1}, before {stop}")

    def _block(self, message, height: int) -> V2Block:
        what = f"{self.name}: block {height}"
        ident = message.block_identifier
        if ident.block_height != height:
            raise SourceError(f"{self.name} sent block {ident.block_height} where {height} was expected")
        if len(ident.block_hash) != 32:
            raise SourceError(f"{what}: its hash is not 32 bytes")
        if len(message.comp_index) > MAX_BLOCK_TXS:
            raise SourceError(f"{what}: {len(message.comp_index):,} transactions, more than a block holds")
        txids, tweaks, shorts = [], [], []
        for item in message.comp_index:
            if len(item.txid) != 32 or len(item.tweak) != 33 or len(item.outputs_short) % 8:
                raise SourceError(f"{what}: a transaction whose txid, tweak or output prefixes have the wrong width")
            txids.append(item.txid[::-1])
            tweaks.append(item.tweak)
            shorts.append([item.outputs_short[j : j + 8] for j in range(0, len(item.outputs_short), 8)])
        if sum(map(len, shorts)) > MAX_BLOCK_OUTPUTS:
            raise SourceError(f"{what}: more taproot outputs than a block holds")
        spent = message.spent_outputs
        if len(spent) % 8 or len(spent) > 8 * MAX_SPENT:
            raise SourceError(f"{what}: {len(spent):,} bytes of spent-output prefixes")
        return V2Block(height, ident.block_hash[::-1], b"".join(tweaks), txids, shorts, frozenset(spent[j : j + 8] for j in range(0, len(spent), 8)), self._full_block)

    def mempool(self) -> BlockTxs | None:
        """None: BlindBit v2 serves no mempool."""
        return None

    proves = False
    """BlindBit gives no transaction, so nothing it lists is proven (`--verify-with` proves it elsewhere)."""

    def work(self, lo: int, hi: int) -> None:
        """None: BlindBit v2 gives no headers."""
        return None

    def close(self) -> None:
        self.channel.close()
