"""Bitcoin serialization: transactions, blocks, and Core's spent outputs in binary.

A raw block cannot be scanned alone: input types come from the outputs the
inputs spend. Core's REST `/rest/spenttxouts/<hash>.bin` (Core 30+) gives them
as a compact-size tx count including the coinbase (which has 0 entries), then
per tx a compact-size input count and that many CTxOut (int64 LE value,
compact-size script length, script); `join_prevouts` pairs them with the
block's inputs. Core's undo data (`rev*.dat`) holds the same outputs compressed;
`spent_from_undo` turns it into that form. Every parser refuses truncation and
trailing bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from . import crypto
from .errors import MalformedBlockError, MalformedDataError, PrevoutsError
from .types import OutPoint, TxInput

MAX_MONEY = 21_000_000 * 100_000_000
"""The largest valid amount in satoshis."""

HEADER_BYTES = 80
"""The size of a block header."""
MAX_TX_WEIGHT = 4_000_000
"""A block's weight limit, so also a transaction's (BIP141 weight units)."""
MAX_WITNESS_ITEMS = 1003
"""The most items a valid witness holds: 1000 stack items (MAX_STACK_SIZE), a script, a control block, an annex."""
_MIN_TX, _MIN_TXIN, _MIN_TXOUT = 10, 41, 9
_NULL_OUTPOINT = b"\x00" * 32 + b"\xff" * 4


class Reader:
    """A cursor over bytes that raises `error` (a MalformedDataError) on truncation.

    Args:
        data: the bytes to read.
        error: the exception class raised on any problem.
        what: a prefix naming the data in messages, e.g. "block".
    """

    __slots__ = ("data", "pos", "error", "what")

    def __init__(self, data: bytes, pos: int = 0, error: type[MalformedDataError] = MalformedDataError, what: str = "data") -> None:
        self.data = data
        self.pos = pos
        self.error = error
        self.what = what

    def fail(self, message: str) -> MalformedDataError:
        """Return the error to raise, prefixed with what is being read."""
        return self.error(f"{self.what}: {message}")

    def read(self, n: int) -> bytes:
        """Return the next n bytes."""
        end = self.pos + n
        if end > len(self.data):
            raise self.fail(f"truncated: need {n} bytes at offset {self.pos}")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def skip(self, n: int) -> None:
        """Pass over the next n bytes without copying them."""
        if self.pos + n > len(self.data):
            raise self.fail(f"truncated: need {n} bytes at offset {self.pos}")
        self.pos += n

    def compact_size(self) -> int:
        """Read a canonical compact size."""
        first = self.read(1)[0]
        if first < 0xFD:
            return first
        width, floor = {0xFD: (2, 0xFD), 0xFE: (4, 0x10000), 0xFF: (8, 0x100000000)}[first]
        value = int.from_bytes(self.read(width), "little")
        if value < floor:
            raise self.fail(f"non-canonical compact size at offset {self.pos - width - 1}")
        return value

    def count(self, min_size: int) -> int:
        """Read a compact-size item count; raise if that many items of min_size bytes cannot fit."""
        n = self.compact_size()
        if n * min_size > len(self.data) - self.pos:
            raise self.fail(f"truncated: count {n} exceeds the remaining {len(self.data) - self.pos} bytes")
        return n

    def var_bytes(self) -> bytes:
        """Read a compact-size length, then that many bytes."""
        return self.read(self.compact_size())

    def end(self) -> None:
        """Raise unless every byte was read."""
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} trailing bytes")


def parse_witness(data: bytes, max_items: int | None = None) -> tuple[bytes, ...]:
    """Parse a serialized witness stack (count, then length-prefixed items); b"" is no witness.

    Raises:
        MalformedDataError: truncated, trailing bytes, or more than `max_items` items (when given).
    """
    if not data:
        return ()
    r = Reader(data, what="witness")
    count = r.count(1)
    if max_items is not None and count > max_items:
        raise r.fail(f"{count} items, more than a valid witness holds ({max_items})")
    items = tuple(r.var_bytes() for _ in range(count))
    r.end()
    return items


def compact_size(n: int) -> bytes:
    """Serialize n as a canonical compact size."""
    if n < 0xFD:
        return bytes([n])
    for prefix, width in ((0xFD, 2), (0xFE, 4), (0xFF, 8)):
        if n < 1 << (8 * width):
            return bytes([prefix]) + n.to_bytes(width, "little")
    raise ValueError("compact size out of range")


def sha256d(data: bytes) -> bytes:
    """Return SHA256(SHA256(data)), 32 bytes."""
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


@dataclass(frozen=True, slots=True)
class TxOut:
    """A transaction output.

    Attributes:
        amount: value in satoshis, 0..MAX_MONEY.
        script: the scriptPubKey.
    """

    amount: int
    script: bytes

    def to_bytes(self) -> bytes:
        """Return Core's CTxOut serialization: int64 LE amount, compact-size script length, script."""
        return self.amount.to_bytes(8, "little") + compact_size(len(self.script)) + self.script


@dataclass(frozen=True, slots=True)
class RawInput:
    """A transaction input as serialized (its prevout script is not in the block).

    Attributes:
        outpoint: the output it spends.
        script_sig: the scriptSig.
        witness: the witness stack, one bytes per item.
    """

    outpoint: OutPoint
    script_sig: bytes
    witness: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class RawTx:
    """A parsed transaction.

    Attributes:
        txid32: the txid in internal byte order (reverse for display).
        inputs: its inputs, in order.
        outputs: its outputs, in vout order.
    """

    txid32: bytes
    inputs: tuple[RawInput, ...]
    outputs: tuple[TxOut, ...]


@dataclass(frozen=True, slots=True)
class Block:
    """A parsed block.

    Attributes:
        header80: the 80-byte header.
        txs: its transactions; txs[0] is the coinbase.
    """

    header80: bytes
    txs: tuple[RawTx, ...]

    @property
    def hash32(self) -> bytes:
        """The block hash in internal byte order (reverse for display)."""
        return sha256d(self.header80)


@dataclass(frozen=True, slots=True)
class SpentTx:
    """A non-coinbase transaction joined with the prevouts of its inputs.

    Attributes:
        txid32: the txid in internal byte order.
        inputs: every input with its prevout scriptPubKey, ready for `summarize`.
        outputs: the transaction's outputs, in vout order.
    """

    txid32: bytes
    inputs: tuple[TxInput, ...]
    outputs: tuple[TxOut, ...]


def _txout(r: Reader) -> TxOut:
    amount = int.from_bytes(r.read(8), "little", signed=True)
    if not 0 <= amount <= MAX_MONEY:
        raise r.fail(f"amount {amount} out of range")
    return TxOut(amount, r.var_bytes())


def _tx_head(r: Reader) -> tuple[int, bytes, int, int, bool]:
    """Read a transaction's version and input count: (start, version, body offset, inputs, segwit)."""
    start = r.pos
    version = r.read(4)
    body = r.pos
    n_in = r.count(_MIN_TXIN)
    segwit = n_in == 0
    if segwit:
        if r.read(1) != b"\x01":
            raise r.fail(f"transaction at offset {start}: unknown optional data (flag is not 1)")
        body = r.pos
        n_in = r.count(_MIN_TXIN)
        if n_in == 0:
            raise r.fail(f"transaction at offset {start} has no inputs")
    return start, version, body, n_in, segwit


def _tx(r: Reader) -> RawTx:
    start, version, body, n_in, segwit = _tx_head(r)
    raw_inputs = [(r.read(36), r.var_bytes(), r.read(4)) for _ in range(n_in)]
    outputs = tuple(_txout(r) for _ in range(r.count(_MIN_TXOUT)))
    body_end = r.pos
    if segwit:
        witnesses = [tuple(r.var_bytes() for _ in range(r.count(1))) for _ in range(n_in)]
        if not any(witnesses):
            raise r.fail(f"transaction at offset {start}: superfluous witness record")
    else:
        witnesses = [()] * n_in
    locktime = r.read(4)
    txid32 = sha256d(version + r.data[body:body_end] + locktime)
    inputs = tuple(RawInput(OutPoint.from_bytes(op), sig, wit) for (op, sig, _), wit in zip(raw_inputs, witnesses))
    return RawTx(txid32, inputs, outputs)


def parse_tx(tx_bytes: bytes) -> RawTx:
    """Parse one serialized transaction (with or without witness data).

    Raises:
        MalformedDataError: truncated, trailing bytes, non-canonical compact size, bad amount.
    """
    return _whole(tx_bytes, "transaction", _tx)


def tx_output(tx_bytes: bytes, vout: int) -> tuple[bytes, TxOut | None]:
    """The txid of one serialized transaction and its output `vout` (None past its outputs).

    The transaction is checked as `parse_tx` checks it, but read without building its inputs,
    outputs and witnesses: the memory it takes does not grow with the transaction.

    Raises:
        MalformedDataError: as `parse_tx`.
    """
    r = Reader(bytes(tx_bytes), what="transaction")
    start, version, body, n_in, segwit = _tx_head(r)
    for _ in range(n_in):
        r.skip(36)
        r.skip(r.compact_size())
        r.skip(4)
    wanted = None
    for i in range(r.count(_MIN_TXOUT)):
        out = _txout(r)
        wanted = out if i == vout else wanted
    body_end = r.pos
    items = 0
    for _ in range(n_in if segwit else 0):
        for _ in range(r.count(1)):
            items += 1
            r.skip(r.compact_size())
    if segwit and not items:
        raise r.fail(f"transaction at offset {start}: superfluous witness record")
    locktime = r.read(4)
    r.end()
    digest = hashlib.sha256(version)
    digest.update(memoryview(r.data)[body:body_end])
    digest.update(locktime)
    return hashlib.sha256(digest.digest()).digest(), wanted


def parse_txout(txout_bytes: bytes) -> TxOut:
    """Parse Core's CTxOut serialization (amount, compact-size script length, script).

    Raises:
        MalformedDataError: truncated, trailing bytes, or an amount out of range.
    """
    return _whole(txout_bytes, "output", _txout)


def _whole(data: bytes, what: str, read):
    r = Reader(bytes(data), what=what)
    value = read(r)
    r.end()
    return value


def parse_block(block_bytes: bytes) -> Block:
    """Parse a raw block in segwit serialization.

    Raises:
        MalformedBlockError: truncated, trailing bytes, non-canonical compact
            size, a bad segwit marker, no transactions, or a first
            transaction that is not a coinbase.
    """
    r = Reader(bytes(block_bytes), error=MalformedBlockError, what="block")
    header80 = r.read(HEADER_BYTES)
    txs = tuple(_tx(r) for _ in range(r.count(_MIN_TX)))
    r.end()
    if not txs:
        raise r.fail("no transactions")
    first = txs[0].inputs
    if len(first) != 1 or first[0].outpoint.to_bytes() != _NULL_OUTPOINT:
        raise r.fail("the first transaction is not a coinbase")
    return Block(header80, txs)


def bip34_height(block_bytes: bytes) -> int:
    """Return the height a block's coinbase states (BIP34: its scriptSig's first push).

    Heights 1..16 are OP_1..OP_16, 0 is OP_0, others a minimal little-endian push.

    Raises:
        MalformedBlockError: the block's start does not parse, or the coinbase states no height.
    """
    r = Reader(bytes(block_bytes), error=MalformedBlockError, what="block")
    r.read(HEADER_BYTES)
    if r.count(_MIN_TX) == 0:
        raise r.fail("no transactions")
    coinbase = _tx(r)
    script = coinbase.inputs[0].script_sig if len(coinbase.inputs) == 1 else b""
    op = script[:1]
    if op == b"\x00":
        return 0
    if op and 0x51 <= op[0] <= 0x60:
        return op[0] - 0x50
    if op and 1 <= op[0] <= 8 and len(script) > op[0] and not script[op[0]] & 0x80:
        return int.from_bytes(script[1 : 1 + op[0]], "little")
    raise r.fail("the coinbase does not state a height (BIP34)")


def parse_spent(spent_bytes: bytes) -> list[list[TxOut]]:
    """Parse Core's REST spent-outputs binary form: per tx, the outputs its inputs spend.

    Raises:
        MalformedDataError: truncated, trailing bytes, non-canonical compact size, bad amount.
    """
    r = Reader(bytes(spent_bytes), what="spent outputs")
    spent = [[_txout(r) for _ in range(r.count(_MIN_TXOUT))] for _ in range(r.count(1))]
    r.end()
    return spent


def parse_getutxos(reply_bytes: bytes, n: int) -> list[TxOut | None]:
    """Parse Core's `/rest/getutxos/….bin` reply to `n` outpoints: each one's output, or None when
    the bitmap says it is not in the UTXO set.

    The reply is int32 chain height, tip hash32, the bitmap (compact-size length, bit i = outpoint
    i, least significant first), then one CCoin per hit: u32 0, u32 height, CTxOut.

    Raises:
        MalformedDataError: truncated, trailing bytes, a bitmap of another length, or a number of
            outputs other than the bitmap's hits.
    """
    r = Reader(bytes(reply_bytes), what="getutxos reply")
    r.read(4 + 32)
    bitmap = r.var_bytes()
    if len(bitmap) != (n + 7) // 8:
        raise r.fail(f"a bitmap of {len(bitmap)} bytes for {n} outpoints")
    hits = [bool(bitmap[i >> 3] >> (i & 7) & 1) for i in range(n)]
    if r.count(_MIN_TXOUT + 8) != sum(hits):
        raise r.fail(f"the outputs do not match the bitmap's {sum(hits)} hits")
    found = []
    for hit in hits:
        if hit:
            r.read(8)  # the version placeholder and the coin's height
        found.append(_txout(r) if hit else None)
    r.end()
    return found


def serialize_spent(spent: Sequence[Sequence[TxOut]]) -> bytes:
    """Serialize per-tx prevouts in Core's REST spent-outputs binary form (coinbase entry included)."""
    parts = [compact_size(len(spent))]
    for prevouts in spent:
        parts.append(compact_size(len(prevouts)))
        parts.extend(o.to_bytes() for o in prevouts)
    return b"".join(parts)


def join_prevouts(block: Block, spent: Sequence[Sequence[TxOut]]) -> list[SpentTx]:
    """Join each non-coinbase transaction of a block with its prevouts.

    Raises:
        PrevoutsError: the spent data covers a different number of
            transactions, gives the coinbase entries, or gives a
            transaction a different number of prevouts than it has inputs.
    """
    if len(spent) != len(block.txs):
        raise PrevoutsError(f"spent outputs cover {len(spent)} transactions, the block has {len(block.txs)}")
    if spent[0]:
        raise PrevoutsError("spent outputs give the coinbase prevouts; it has none")
    out = []
    for n, (tx, prevouts) in enumerate(zip(block.txs[1:], spent[1:]), start=1):
        if len(prevouts) != len(tx.inputs):
            raise PrevoutsError(
                f"transaction {n} ({tx.txid32[::-1].hex()}) has {len(tx.inputs)} inputs but {len(prevouts)} spent outputs"
            )
        inputs = tuple(TxInput(i.outpoint, i.script_sig, i.witness, p.script) for i, p in zip(tx.inputs, prevouts))
        out.append(SpentTx(tx.txid32, inputs, tx.outputs))
    return out


def transactions(block_bytes: bytes, spent_bytes: bytes) -> list[SpentTx]:
    """Parse a block and its spent outputs and join them; the coinbase is left out.

    Raises:
        MalformedBlockError: the block does not parse.
        MalformedDataError: the spent outputs do not parse.
        PrevoutsError: they do not match the block's inputs.
    """
    return join_prevouts(parse_block(block_bytes), parse_spent(spent_bytes))


def merkle_root(hashes32: Sequence[bytes]) -> bytes:
    """Core's ComputeMerkleRoot: pairs hashed with SHA256d, an odd level's last hash paired with itself."""
    level = list(hashes32)
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [sha256d(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


_COMMITMENT = bytes.fromhex("6a24aa21a9ed")
"""OP_RETURN, a 36-byte push, then BIP141's commitment header: the start of a witness commitment output."""


def tx_spans(block_bytes: bytes) -> list[tuple[int, int]]:
    """(start, end) offsets of each transaction of a block, witness included.

    Raises:
        MalformedBlockError: as `parse_block`.
    """
    r = Reader(bytes(block_bytes), error=MalformedBlockError, what="block", pos=HEADER_BYTES)
    spans = []
    for _ in range(r.count(_MIN_TX)):
        start = r.pos
        _tx(r)
        spans.append((start, r.pos))
    r.end()
    return spans


def block_commits(block_bytes: bytes) -> bool:
    """True when a block's header commits to its transactions: the merkle root of the txids, and when a
    transaction has a witness, the coinbase's BIP141 commitment to the wtxids (its last output starting
    6a24aa21a9ed; the coinbase witness one 32-byte item). False for a block that does not parse."""
    try:
        block = parse_block(block_bytes)
    except MalformedBlockError:
        return False
    wtxids = [sha256d(block_bytes[start:end]) for start, end in tx_spans(block_bytes)]
    if merkle_root([tx.txid32 for tx in block.txs]) != block.header80[36:68]:
        return False
    commitments = [o.script for o in block.txs[0].outputs if len(o.script) >= 38 and o.script[:6] == _COMMITMENT]
    if not commitments:
        return not any(i.witness for tx in block.txs for i in tx.inputs)
    reserved = block.txs[0].inputs[0].witness
    if len(reserved) != 1 or len(reserved[0]) != 32:
        return False
    return sha256d(merkle_root([bytes(32), *wtxids[1:]]) + reserved[0]) == commitments[-1][6:38]


def unxor(data: bytes, key8: bytes, offset: int) -> bytes:
    """`data` read at `offset` of a block file Core obfuscated with `key8` (xor.dat, Core 28+), in the clear.

    Raises:
        MalformedDataError: key8 is not 8 bytes.
    """
    if len(key8) != 8:
        raise MalformedDataError(f"key8: {len(key8)} bytes, not 8")
    turn = offset % 8
    stream = (key8[turn:] + key8[:turn]) * (len(data) // 8 + 1)
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream[: len(data)], "little")).to_bytes(len(data), "little")


MAX_SCRIPT_SIZE = 10_000
"""Core's script size limit: undo data stores a longer (unspendable) script as OP_RETURN."""
_SPECIAL_SCRIPTS = 6
_U32, _U64 = (1 << 32) - 1, (1 << 64) - 1


def _varint(r: Reader, limit: int) -> int:
    """Read Core's VARINT (serialize.h): base-128 digits, most significant first, each continuation adding one."""
    n = 0
    while True:
        byte = r.read(1)[0]
        if n > limit >> 7:
            raise r.fail(f"VARINT too large at offset {r.pos - 1}")
        n = n << 7 | byte & 0x7F
        if not byte & 0x80:
            return n
        if n == limit:
            raise r.fail(f"VARINT too large at offset {r.pos - 1}")
        n += 1


def _decompress_amount(x: int) -> int:
    """Core's DecompressAmount (compressor.cpp): 0, or 1 + 10·(9·n + d − 1) + e, or 1 + 10·(n − 1) + 9."""
    if x == 0:
        return 0
    x -= 1
    e, x = x % 10, x // 10
    n = x // 9 * 10 + x % 9 + 1 if e < 9 else x + 1
    return n * 10**e


def _decompress_script(r: Reader) -> bytes:
    """Core's ScriptCompression: P2PKH (0), P2SH (1), P2PK compressed (2, 3) or uncompressed (4, 5; b"" when
    the x-coordinate is not on the curve, as Core leaves it), else the script's length + 6 then the script."""
    size = _varint(r, _U32)
    if size in (0, 1):
        hash20 = r.read(20)
        return b"\x76\xa9\x14" + hash20 + b"\x88\xac" if size == 0 else b"\xa9\x14" + hash20 + b"\x87"
    if size < _SPECIAL_SCRIPTS:
        x32 = r.read(32)
        if size < 4:
            return b"\x21" + bytes([size]) + x32 + b"\xac"
        point = crypto.point(bytes([size - 2]) + x32)
        return b"" if point is None else b"\x41" + point.format(compressed=False) + b"\xac"
    size -= _SPECIAL_SCRIPTS
    if size > MAX_SCRIPT_SIZE:
        r.skip(size)
        return b"\x6a"
    return r.read(size)


def spent_from_undo(undo_bytes: bytes) -> bytes:
    """Turn Core's undo data of a block (a CBlockUndo as `rev*.dat` stores it: per non-coinbase tx, each
    input's spent coin with its height, compressed amount and script) into the REST spent-outputs form.

    Raises:
        MalformedDataError: truncated, trailing bytes, a non-canonical count, a VARINT out of range, or an
            amount above MAX_MONEY.
    """
    r = Reader(bytes(undo_bytes), what="undo data")
    n_tx = r.count(1)
    parts = [compact_size(n_tx + 1), b"\x00"]
    for _ in range(n_tx):
        n_in = r.count(1)
        parts.append(compact_size(n_in))
        for _ in range(n_in):
            if _varint(r, _U32) >> 1:  # the coin's height; above 0 a dummy version follows
                _varint(r, _U32)
            amount = _decompress_amount(_varint(r, _U64))
            if amount > MAX_MONEY:
                raise r.fail(f"amount {amount} out of range at offset {r.pos}")
            parts.append(TxOut(amount, _decompress_script(r)).to_bytes())
    r.end()
    return b"".join(parts)
