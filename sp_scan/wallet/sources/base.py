"""What every wallet source shares: the answer types, the interfaces (`WalletSource`, `Prover`, `SourceBlock`) and the
URL parsing; `sp_scan.wallet.sources` describes them.
"""

from __future__ import annotations

import itertools
import struct
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from sp_scan import wire
from sp_scan.errors import SourceError, SourceURLError
from sp_scan.retry import Retry

MAX_BLOCK_TXS = 30_000
"""More eligible txs than a 4 MWU block can hold (the smallest has ~110 vB): a bigger answer is refused."""
MAX_BLOCK_OUTPUTS = 100_000
"""More taproot outputs than a block can hold (43 vB each)."""
MAX_MONEY = 21_000_000 * 100_000_000
"""No output holds more satoshis."""
DEADLINE = 60.0
"""Seconds a request may take with its retries (or a stream go without an answer): the sources' default `Retry`."""
RETRY = Retry(deadline=DEADLINE)


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def hex_bytes(value: object, nbytes: int | None, what: str) -> bytes:
    """The bytes of a hex string, lowercase or uppercase (of nbytes bytes when given); nothing but hex digits
    (bytes.fromhex alone would take spaces).

    Raises:
        SourceError: not a string of hex digits of that width.
    """
    if not isinstance(value, str) or len(value) % 2 or (nbytes is not None and len(value) != 2 * nbytes) or not _HEX_DIGITS.issuperset(value):
        raise SourceError(f"{what} is not {'hex' if nbytes is None else f'{nbytes} bytes of hex'}")
    return bytes.fromhex(value)


def integer(value: object, lo: int, hi: int, what: str) -> int:
    """value when it is an integer from lo to hi (not a bool). Raises SourceError otherwise."""
    if type(value) is not int or not lo <= value <= hi:
        raise SourceError(f"{what} is not an integer from {lo} to {hi}")
    return value


def json_field(body: object, key: str, what: str) -> object:
    """body[key] of a JSON object. Raises SourceError when body is not an object or lacks key."""
    if not isinstance(body, dict) or key not in body:
        raise SourceError(f"{what}: no `{key}`")
    return body[key]


def json_list(body: object, limit: int, what: str) -> list:
    """body when it is a JSON array of at most `limit` items. Raises SourceError otherwise."""
    if not isinstance(body, list):
        raise SourceError(f"{what}: not a JSON array")
    if len(body) > limit:
        raise SourceError(f"{what}: {len(body):,} items, more than a block holds")
    return body


@dataclass(frozen=True, slots=True)
class BlockTxs:
    """Transactions of one block (or of the mempool) with their taproot outputs, packed little-endian.

    n = transactions, Σ = their taproot outputs.

    Attributes:
        txids: n × 32, internal byte order, block order.
        tweaks: n × tweak_width, each tx's tweak (33 compressed, or 64 as x ‖ y); b"" when unpaired.
        tweak_width: 33 or 64; 0 when the source does not say which tweak is whose (BlindBit v1).
        counts: n × u32, taproot outputs per tx.
        outputs32: Σ × 32, x-only keys, tx then vout order.
        vouts: Σ × u32.
        amounts: Σ × u64, satoshis.
    """

    txids: bytes = b""
    tweaks: bytes = b""
    tweak_width: int = 0
    counts: bytes = b""
    outputs32: bytes = b""
    vouts: bytes = b""
    amounts: bytes = b""

    @classmethod
    def of(cls, txs: Iterable[tuple[bytes, bytes | None, Sequence[tuple[int, bytes, int]]]]) -> BlockTxs:
        """Pack (txid32, tweak33 or None, [(vout, output32, amount), …]) per tx; tweaks all given or all None.

        Raises:
            SourceError: some txs have a tweak and others not.
        """
        txs = list(txs)
        paired = {t[1] is not None for t in txs}
        if len(paired) > 1:
            raise SourceError("some transactions come with a tweak and others without")
        outs = [o for t in txs for o in t[2]]
        return cls(
            b"".join(t[0] for t in txs),
            b"".join(t[1] for t in txs if t[1] is not None),
            33 if paired == {True} else 0,
            struct.pack(f"<{len(txs)}I", *(len(t[2]) for t in txs)),
            b"".join(o[1] for o in outs),
            struct.pack(f"<{len(outs)}I", *(o[0] for o in outs)),
            struct.pack(f"<{len(outs)}Q", *(o[2] for o in outs)),
        )

    @property
    def n_tx(self) -> int:
        """The number of transactions."""
        return len(self.txids) // 32

    def firsts(self) -> list[int]:
        """Each tx's first output in the per-output arrays, then Σ (n + 1 values)."""
        return list(itertools.accumulate(memoryview(self.counts).cast("I"), initial=0))

    def check(self, what: str) -> None:
        """Refuse arrays of inconsistent widths or counts, oversized answers, a tx listed twice, impossible amounts
        (an output listed twice within a tx is refused by the loop if it pays the wallet).

        Args:
            what: names the answer in the message ("block 812345 from BlindBit at …").

        Raises:
            SourceError: the first problem found.
        """
        n = len(self.txids) // 32
        if len(self.txids) % 32 or len(self.counts) != 4 * n:
            raise SourceError(f"{what}: {len(self.txids)} bytes of txids for {len(self.counts) // 4} output counts")
        if n > MAX_BLOCK_TXS:
            raise SourceError(f"{what}: {n:,} transactions, more than a block holds")
        if self.tweak_width not in (0, 33, 64) or len(self.tweaks) != self.tweak_width * n:
            raise SourceError(f"{what}: {len(self.tweaks)} bytes of tweaks for {n} transactions")
        total = sum(memoryview(self.counts).cast("I"))
        if total > MAX_BLOCK_OUTPUTS:
            raise SourceError(f"{what}: {total:,} taproot outputs, more than a block holds")
        if len(self.outputs32) != 32 * total or len(self.vouts) != 4 * total or len(self.amounts) != 8 * total:
            raise SourceError(f"{what}: output arrays do not hold {total} outputs")
        if total and max(memoryview(self.amounts).cast("Q")) > MAX_MONEY:
            raise SourceError(f"{what}: an output holds more than 21 million bitcoin")
        if len(set(self.txids[i : i + 32] for i in range(0, len(self.txids), 32))) != n:
            raise SourceError(f"{what}: a transaction is listed twice")


def taproot_outputs(tx: wire.RawTx) -> list[tuple[int, bytes, int]]:
    """(vout, x-only key, amount) of each P2TR output of a transaction."""
    return [(vout, o.script[2:], o.amount) for vout, o in enumerate(tx.outputs) if len(o.script) == 34 and o.script[:2] == b"\x51\x20"]


@dataclass(frozen=True, slots=True)
class Keys0:
    """The k = 0 output keys the wallet would be paid for each tweak: what a filtering source looks for.

    Attributes:
        keys32: per tweak (in `tweaks33` order), `per_tweak` x-only keys: the address's P_0, then
            P_0 + L_m for each label in the receiver's order; 32 zero bytes for the point at infinity.
        per_tweak: 1 + the number of labels (the change label included).
    """

    keys32: bytes
    per_tweak: int

    def of(self, i: int) -> list[bytes]:
        """The keys of tweak number i."""
        base = 32 * self.per_tweak * i
        return [self.keys32[base + 32 * j : base + 32 * j + 32] for j in range(self.per_tweak)]

    def __iter__(self) -> Iterator[bytes]:
        return (self.keys32[i : i + 32] for i in range(0, len(self.keys32), 32))


@dataclass(frozen=True, slots=True)
class Spend:
    """One of the wallet's outputs spent in a block.

    Attributes:
        outpoint36: the spent output (txid32 ‖ vout LE32).
        txid32: the spending tx when the source knows it (a node does; BlindBit's spent index does not), else None.
    """

    outpoint36: bytes
    txid32: bytes | None = None


class SourceBlock(Protocol):
    """What a source says of one height (see the module docstring)."""

    height: int
    hash32: bytes
    prev32: bytes | None
    header80: bytes | None
    tweaks33: bytes
    wants_keys0: bool
    proven: bool

    def txs(self, keys0: Keys0 | None) -> BlockTxs: ...
    def spends(self, outpoints36: Sequence[bytes], outputs32: Sequence[bytes]) -> list[Spend]: ...


class WalletSource(Protocol):
    """A chain the wallet syncs from (see the module docstring)."""

    name: str
    received: int
    proves: bool

    def network(self) -> str: ...
    def tip_height(self) -> int: ...
    def block_hash(self, height: int) -> bytes: ...
    def blocks(self, start: int, stop: int) -> Iterator[SourceBlock]: ...
    def mempool(self) -> BlockTxs | None: ...
    def work(self, lo: int, hi: int) -> int | None: ...
    def close(self) -> None: ...


class Prover(Protocol):
    """A source that proves outputs in their blocks (see the module docstring)."""

    name: str
    complete: bool

    def network(self) -> str: ...
    def tip_height(self) -> int: ...
    def outputs(self, height: int, hash32: bytes, txids32: Sequence[bytes]) -> dict[bytes, list[tuple[int, bytes, int]]] | None: ...
    def close(self) -> None: ...


class Closes:
    """A source as a context manager: `with` closes it."""

    def close(self) -> None:
        """Close the source's connections (and files)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def endpoint(url: str, schemes: Sequence[str], what: str) -> tuple[str, str, int]:
    """(scheme, host, port) of `scheme://HOST:PORT` ([v6] hosts unbracketed).

    Raises:
        SourceURLError: another scheme, no host, or no port in 1..65535.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        port = None
        parts = None
    if parts is None or parts.scheme not in schemes or not parts.hostname or port is None or not 0 < port < 65536:
        raise SourceURLError(f"{what} is named by {' or '.join(s + '://HOST:PORT' for s in schemes)}, not {url[:80]!r}")
    return parts.scheme, parts.hostname, port
