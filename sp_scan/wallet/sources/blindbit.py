"""`--blindbit URL`: a BlindBit Oracle v1 HTTP server as a wallet's source, used as spdk's
`backend-blindbit-v1` uses it (the routes: docs/serving.md, "BlindBit Oracle v1").

Per block, many blocks in flight: the tweaks (`/tweak-index/:h`, or `/tweaks/:h` with cut-through,
with `dustLimit`) and both filters (`/filter/new-utxos/:h`, `/filter/spent/:h`); the block hash is
the filters' `block_hash` (both must name the same one); the last `REORG_WINDOW` blocks below the
server's tip, where a reorg may replace a block between two answers (the tweaks name no block), are
read one at a time between two /block-hash answers that must agree with the filters. The sync loop hands the block the k = 0
keys of every tweak for the address and each label; only when one is in the new-UTXO filter are
the block's outputs fetched (`/utxos/:h`), and the loop pairs each tx with the tweak whose key it
holds and runs the full k loop. The wallet's unspent outpoints are hashed with the block hash and
tested against the spent filter; a hit is confirmed with `/spent-index/:h`. `/block-hash/:h` is
asked only to find forks.

Nothing an answer says is trusted beyond its shape: every body is bounded (`MAX_BODY`, gzip
included), parsed strictly (hex widths, counts, types), and checked against the rest: the filters
must name the height asked for and one hash; /utxos and /spent-index must name that hash, hold only
taproot outputs, and every key and spent hash they list must be in their filter (a filter that hides
what its data shows is refused). Refusals raise `SourceError`; an unreachable server or an error
status raises `ServerError`, tried again `retry.attempts` times with doubling waits first.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sp_scan.errors import MalformedDataError, ServerError, SourceError
from sp_scan.filters import matches, spent_hashes
from sp_scan.network import NETWORKS
from sp_scan.proto import blindbit_v1
from sp_scan.retry import Retry, time_left
from sp_scan.workers import AheadPool

from .base import MAX_BLOCK_OUTPUTS, MAX_BLOCK_TXS, MAX_MONEY, RETRY, BlockTxs, Closes, Keys0, Spend, hex_bytes, integer, json_field, json_list

MAX_BODY = 64 << 20
"""The largest answer read (after gunzip): a mainnet block's /utxos is a few MB."""
AHEAD = 64
"""Blocks whose tweaks and filters are asked for ahead of the one being scanned."""
CONNECTIONS = 16
"""Requests in flight at once (one kept-alive connection each)."""
TIMEOUT = 60.0
MAX_SPENT = 200_000
"""More spent-index hashes than a block has inputs."""
REORG_WINDOW = 6
"""Blocks this close to the server's tip are read between two /block-hash answers (see `_stable`)."""
_STABLE_TRIES = 3

class _Client:
    """GETs of JSON over kept-alive connections (one per thread), gzip accepted, bodies bounded, retried."""

    def __init__(self, url: str, retry: Retry, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServerError("a BlindBit URL must look like http://host:port")
        self.url = url.rstrip("/")
        self.scheme, self.host, self.port, self.base = parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/")
        self.retry, self.timeout = retry, timeout
        self.received = 0
        self._local = threading.local()
        self._lock = threading.Lock()

    def _once(self, path: str) -> bytes:
        """One GET; the body (gunzipped). ServerError naming the request on a failed connection, a wait past the
        deadline (`time_left`), or a status other than 200."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.timeout = time_left(self.timeout)
            if conn.sock is not None:
                conn.sock.settimeout(conn.timeout)
            conn.request("GET", self.base + path, headers={"Accept-Encoding": "gzip", "Accept": "application/json"})
            reply = conn.getresponse()
            body = self._body(conn, reply)
            if len(body) > MAX_BODY:
                conn.close()
                self._local.conn = None
                raise SourceError(f"{self.url}{path}: an answer of more than {MAX_BODY:,} bytes")
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            self._local.conn = None
            raise ServerError(f"cannot reach BlindBit at {self.url} (GET {path}): {exc or type(exc).__name__}") from None
        with self._lock:
            self.received += len(body)
        if reply.getheader("Content-Encoding", "").lower() == "gzip":
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                body = inflate.decompress(body, MAX_BODY + 1)
            except zlib.error:
                raise SourceError(f"{self.url}{path}: a gzip body that does not inflate") from None
            if len(body) > MAX_BODY or inflate.unconsumed_tail:
                raise SourceError(f"{self.url}{path}: an answer of more than {MAX_BODY:,} bytes")
        if reply.status != 200:
            detail = body[:200].decode("utf-8", "replace").strip().splitlines()
            raise ServerError(f"BlindBit {path}: HTTP {reply.status} {detail[0] if detail else ''}".rstrip())
        return body

    def _body(self, conn: http.client.HTTPConnection, reply: http.client.HTTPResponse) -> bytes:
        """The reply's body, at most MAX_BODY + 1 bytes, read a receive at a time with the time left before each
        (a server that sends part of an answer and stalls is given up on at the deadline)."""
        parts, size = [], 0
        while size <= MAX_BODY:
            if conn.sock is not None:
                conn.sock.settimeout(time_left(self.timeout))
            chunk = reply.read1(min(1 << 16, MAX_BODY + 1 - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        if size <= MAX_BODY:
            reply.read()  # marks the reply read to its end, so the connection takes the next request
        return b"".join(parts)

    def get(self, path: str, stop: threading.Event | None = None) -> object:
        """The JSON of GET path, retried on ServerError (given up at once when `stop` is set).

        Raises:
            ServerError: unreachable or an error status after the retries.
            SourceError: an oversized body, or not JSON.
        """
        body = self.retry.call(self._once, path, cancel=stop)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise SourceError(f"BlindBit {path}: not JSON") from None


@dataclass
class BlindBitBlock:
    """One block as BlindBit serves it (a `SourceBlock`): tweaks and filters; outputs and spends on a hit."""

    height: int
    hash32: bytes
    tweaks33: bytes
    new_filter: bytes
    spent_filter: bytes
    client: _Client = field(repr=False)
    prev32: bytes | None = None
    header80: bytes | None = None
    wants_keys0: bool = True
    proven: bool = False

    def _named(self, body: object, what: str) -> None:
        if hex_bytes(json_field(body, "block_hash", what), 32, f"{what}: block_hash")[::-1] != self.hash32:
            raise SourceError(f"{what}: block_hash is not the filters' {self.hash32[::-1].hex()}")

    def txs(self, keys0: Keys0 | None) -> BlockTxs:
        """Nothing unless a k = 0 key is in the new-UTXO filter; then the block's taproot outputs from
        /utxos, grouped by tx (unpaired: /utxos does not say which tweak is whose).

        Raises:
            SourceError: a malformed /utxos, or one listing an output its filter does not hold.
        """
        if keys0 is None or not keys0.keys32 or not self._hit(self.new_filter, keys0.keys32, 32):
            return BlockTxs()
        what = f"BlindBit /utxos/{self.height}"
        rows = json_list(self.client.get(f"/utxos/{self.height}"), MAX_BLOCK_OUTPUTS, what)
        txs: dict[bytes, list[tuple[int, bytes, int]]] = {}
        seen: set[tuple[bytes, int]] = set()
        for row in rows:
            self._named(row, what)
            script = hex_bytes(json_field(row, "scriptpubkey", what), 34, f"{what}: scriptpubkey")
            if script[:2] != b"\x51\x20":
                raise SourceError(f"{what}: an output that is not taproot")
            txid32 = hex_bytes(json_field(row, "txid", what), 32, f"{what}: txid")[::-1]
            vout = integer(json_field(row, "vout", what), 0, 2**32 - 1, f"{what}: vout")
            value = integer(json_field(row, "value", what), 0, MAX_MONEY, f"{what}: value")
            if (txid32, vout) in seen:
                raise SourceError(f"{what}: an output listed twice")
            seen.add((txid32, vout))
            txs.setdefault(txid32, []).append((vout, script[2:], value))
        keys = b"".join(o[1] for outs in txs.values() for o in outs)
        if len(self._matches(self.new_filter, keys, 32)) != len(keys) // 32:
            raise SourceError(f"BlindBit's new-UTXO filter of block {self.height} does not hold an output its /utxos lists")
        return BlockTxs.of((txid32, None, sorted(outs)) for txid32, outs in txs.items())

    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes] = ()) -> list[Spend]:
        """Of the wallet's outpoints, those whose spent-index hash is in the spent filter and in /spent-index.

        Raises:
            SourceError: a malformed /spent-index, or one listing a hash its filter does not hold.
        """
        hashes = spent_hashes(self.hash32, outpoints36)
        if not self._hit(self.spent_filter, b"".join(hashes), 8):
            return []
        what = f"BlindBit /spent-index/{self.height}"
        body = self.client.get(f"/spent-index/{self.height}")
        self._named(body, what)
        listed = [hex_bytes(h, 8, f"{what}: data") for h in json_list(json_field(body, "data", what), MAX_SPENT, what)]
        if len(self._matches(self.spent_filter, b"".join(listed), 8)) != len(listed):
            raise SourceError(f"BlindBit's spent filter of block {self.height} does not hold a hash its /spent-index lists")
        spent = set(listed)
        return [Spend(op) for op, h in zip(outpoints36, hashes) if h in spent]

    def _matches(self, filter_bytes: bytes, items: bytes, width: int) -> list[int]:
        try:
            return matches(self.hash32, filter_bytes, items, width)
        except MalformedDataError as exc:
            raise SourceError(f"BlindBit's filter of block {self.height}: {exc}") from None

    def _hit(self, filter_bytes: bytes, items: bytes, width: int) -> bool:
        return bool(items) and bool(self._matches(filter_bytes, items, width))


class BlindBitSource(Closes):
    """A BlindBit Oracle v1 server as a wallet's source.

    Args:
        url: the server's base URL, e.g. http://127.0.0.1:8000.
        dust_limit: ask for txs whose largest taproot output is >= this many sats only.
        cut_through: ask for the cut-through index (/tweaks): txs whose taproot outputs are all spent
            are left out, so the wallet never lists them.
        retry: how a failing request is tried again.
        ahead: blocks asked for ahead of the one being scanned.
        connections: requests in flight at once.

    Raises:
        ServerError: the URL is not http(s).
    """

    def __init__(
        self, url: str, *, dust_limit: int = 0, cut_through: bool = False, retry: Retry = RETRY, ahead: int = AHEAD,
        connections: int = CONNECTIONS, timeout: float = TIMEOUT,
    ) -> None:  # fmt: skip
        self.client = _Client(url, retry, timeout)
        self.name = f"BlindBit at {self.client.url}"
        self.dust_limit, self.cut_through, self.ahead, self.connections = dust_limit, cut_through, ahead, connections
        self._info: dict | None = None
        self._tip: int | None = None

    @property
    def received(self) -> int:
        """Bytes of answer bodies read off the wire (gzipped as sent)."""
        return self.client.received

    def network(self) -> str:
        """/info's network, with the tweak route this source asks checked to be filled.

        Raises:
            SourceError: /info is malformed, names an unknown network, or says the route is not filled.
        """
        if self._info is None:
            body = self.client.get("/info")
            for key in blindbit_v1.INFO_KEYS:
                json_field(body, key, "BlindBit /info")
            if body["network"] not in NETWORKS:
                raise SourceError(f"BlindBit /info: network {str(body['network'])[:20]!r} is not one of {', '.join(NETWORKS)}")
            flag = blindbit_v1.INFO_FLAGS[(self.dust_limit > 0, self.cut_through)]
            if body[flag] is not True:
                raise SourceError(f"BlindBit /info: {flag} is not true: the server does not serve the tweaks this sync asks for")
            self._info = body
        return self._info["network"]

    def tip_height(self) -> int:
        self._tip = integer(json_field(self.client.get("/block-height"), "block_height", "BlindBit /block-height"), 0, 2**32 - 1, "BlindBit /block-height")
        return self._tip

    def block_hash(self, height: int, stop: threading.Event | None = None) -> bytes:
        body = self.client.get(f"/block-hash/{height}", stop)
        return hex_bytes(json_field(body, "block_hash", f"BlindBit /block-hash/{height}"), 32, f"BlindBit /block-hash/{height}")[::-1]

    def _tweaks(self, height: int, stop: threading.Event | None = None) -> bytes:
        path = blindbit_v1.tweaks_path(height, self.dust_limit, self.cut_through)
        what = f"BlindBit {path.partition('?')[0]}"
        listed = json_list(self.client.get(path, stop), MAX_BLOCK_TXS, what)
        return b"".join(hex_bytes(t, 33, f"{what}: a tweak") for t in listed)

    def _filter(self, height: int, kind: str, stop: threading.Event | None = None) -> tuple[bytes, bytes]:
        """(block hash32, filter bytes) of /filter/<kind>/height."""
        what = f"BlindBit /filter/{kind}/{height}"
        body = self.client.get(f"/filter/{kind}/{height}", stop)
        if json_field(body, "block_height", what) != height:
            raise SourceError(f"{what}: block_height is not {height}")
        return hex_bytes(json_field(body, "block_hash", what), 32, f"{what}: block_hash")[::-1], hex_bytes(json_field(body, "data", what), None, f"{what}: data")

    def _stable(self, height: int, stop: threading.Event) -> tuple[bytes, bytes, bytes, bytes]:
        """(hash32, tweaks, new-UTXO filter, spent filter) of a block near the tip, read one after the other
        between two /block-hash answers; read again while they and the filters do not name one block.

        Raises:
            ServerError: the block kept changing over `_STABLE_TRIES` reads (a reorg in progress).
        """
        for _ in range(_STABLE_TRIES):
            before = self.block_hash(height, stop)
            tweaks = self._tweaks(height, stop)
            (new_hash32, new_filter), (spent_hash32, spent_filter) = self._filter(height, "new-utxos", stop), self._filter(height, "spent", stop)
            if before == new_hash32 == spent_hash32 == self.block_hash(height, stop):
                return before, tweaks, new_filter, spent_filter
        raise ServerError(f"BlindBit's block {height} keeps changing (a reorg in progress)")

    def _parallel(self, height: int, tweaks, new, spent) -> tuple[bytes, bytes, bytes, bytes]:
        (hash32, new_filter), (spent_hash32, spent_filter) = new.result(), spent.result()
        if spent_hash32 != hash32:
            raise SourceError(f"BlindBit's two filters of block {height} name different blocks")
        return hash32, tweaks.result(), new_filter, spent_filter

    def blocks(self, start: int, stop: int) -> Iterator[BlindBitBlock]:
        """Heights start..stop: each one's three answers asked for `ahead` blocks in advance (those of the
        last REORG_WINDOW blocks below the server's tip in one task, `_stable`).

        Raises:
            ServerError: the server fails after the retries, or a block near its tip keeps changing.
            SourceError: an answer the checks refuse.
        """
        near = (self.tip_height() if self._tip is None else self._tip) - REORG_WINDOW
        pool = AheadPool(self.connections, "sp-scan-blindbit")
        ahead: deque = deque()
        heights = iter(range(start, stop + 1))
        try:
            while True:
                for height in heights:
                    if height > near:
                        ahead.append((height, [pool.submit(self._stable, height, pool.stop)]))
                    else:
                        tasks = ((self._tweaks, height), (self._filter, height, "new-utxos"), (self._filter, height, "spent"))
                        ahead.append((height, [pool.submit(*task, pool.stop) for task in tasks]))
                    if len(ahead) >= self.ahead:
                        break
                if not ahead:
                    return
                height, futures = ahead.popleft()
                hash32, tweaks, new_filter, spent_filter = futures[0].result() if len(futures) == 1 else self._parallel(height, *futures)
                yield BlindBitBlock(height, hash32, tweaks, new_filter, spent_filter, self.client)
        finally:
            pool.close()

    def mempool(self) -> BlockTxs | None:
        """None: BlindBit v1 serves no mempool."""
        return None

    proves = False
    """BlindBit gives no transaction, so nothing it lists is proven (`--verify-with` proves it elsewhere)."""

    def work(self, lo: int, hi: int) -> None:
        """None: BlindBit gives no headers."""
        return None

    def close(self) -> None:
        pass
