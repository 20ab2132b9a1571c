"""Blocks and their prevouts: Bitcoin serialization, Core's spent outputs, getblock JSON.

A raw block cannot be scanned alone: input types come from the outputs the
inputs spend. Bitcoin Core serves them two ways, both read here:

- REST `/rest/spenttxouts/<hash>.bin|.hex|.json` (Core 30+): a compact-size
  tx count including the coinbase (which has 0 entries), then per tx a
  compact-size input count and that many CTxOut (int64 LE value, compact-size
  script length, script). The JSON form is an array of arrays of
  `{"value": BTC, "scriptPubKey": {"hex": ...}}`, coinbase first as `[]`.
- RPC `getblock <hash> 3`: each non-coinbase vin carries `prevout`.

`tweaks` and `scan` take a raw block and its spent outputs in the binary
form (`spent_bytes`); the helpers below turn the other forms into it.
The Python block loop here runs on the reference stages and stays
reachable as `tweaks_reference` / `scan_reference`; with the C extension,
`tweaks` and `scan` are the native block loop (same results and errors).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from coincurve import PublicKey

from . import extract, native
from .errors import MalformedBlockError, MalformedDataError, PrevoutsError
from .scan import Receiver
from .scan import scan_tx_reference as scan_tx
from .summary import summarize_reference as summarize
from .types import BlockData, BlockMatch, OutPoint, TxInput, TxTweak

MAX_MONEY = 21_000_000 * 100_000_000
"""The largest valid amount in satoshis."""

COIN = 100_000_000
_HEADER = 80
_MIN_TX, _MIN_TXIN, _MIN_TXOUT = 10, 41, 9
_NULL_OUTPOINT = b"\x00" * 32 + b"\xff" * 4

SpentFormat = Literal["bin", "hex", "json"]


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


def parse_witness(data: bytes) -> tuple[bytes, ...]:
    """Parse a serialized witness stack (count, then length-prefixed items); b"" is no witness.

    Raises:
        MalformedDataError: truncated or trailing bytes.
    """
    if not data:
        return ()
    r = Reader(data, what="witness")
    items = tuple(r.var_bytes() for _ in range(r.count(1)))
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


@dataclass(frozen=True, slots=True)
class InputReport:
    """How BIP352 classifies one input.

    Attributes:
        txid32: the spending txid, internal byte order.
        vin: the input's index.
        script_type: the type of the spent output.
        pubkey: the key it contributes (33-byte compressed or 32-byte x-only), or None.
        tx_excluded: True when the whole tx is skipped because an input spends segwit v2..16.
    """

    txid32: bytes
    vin: int
    script_type: extract.ScriptType
    pubkey: bytes | None
    tx_excluded: bool


def _txout(r: Reader) -> TxOut:
    amount = int.from_bytes(r.read(8), "little", signed=True)
    if not 0 <= amount <= MAX_MONEY:
        raise r.fail(f"amount {amount} out of range")
    return TxOut(amount, r.var_bytes())


def _tx(r: Reader) -> RawTx:
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
    header80 = r.read(_HEADER)
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
    r.read(_HEADER)
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


def spent_taproot_prefixes(spent_bytes: bytes) -> bytes:
    """The first 8 bytes of the x-only key of every P2TR output a block's inputs spend, tx then vin
    order (BlindBit v2's short spent outputs), from Core's REST spent-outputs binary form.

    Expects data `parse_spent` (or `block_index`) has accepted: it only walks it.

    Raises:
        MalformedDataError: truncated data.
    """
    data, out = bytes(spent_bytes), []
    pos, n_tx = _walk_size(data, 0)
    try:
        for _ in range(n_tx):
            pos, n_in = _walk_size(data, pos)
            for _ in range(n_in):
                length = data[pos + 8]  # after the amount
                if length < 0xFD:
                    pos += 9
                else:
                    pos, length = _walk_size(data, pos + 8)
                if length == 34 and data[pos] == 0x51 and data[pos + 1] == 0x20:
                    out.append(data[pos + 2 : pos + 10])
                pos += length
    except IndexError:
        raise MalformedDataError("spent outputs: truncated") from None
    if pos != len(data):
        raise MalformedDataError("spent outputs: truncated or trailing bytes")
    return b"".join(out)


def _walk_size(data: bytes, pos: int) -> tuple[int, int]:
    """(position after, value) of the compact size at `pos`."""
    first = data[pos]
    if first < 0xFD:
        return pos + 1, first
    width = 2 if first == 0xFD else 4 if first == 0xFE else 8
    return pos + 1 + width, int.from_bytes(data[pos + 1 : pos + 1 + width], "little")


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


def _is_taproot(script: bytes) -> bool:
    return extract.script_type(script) is extract.ScriptType.P2TR


def tweaks(block_bytes: bytes, spent_bytes: bytes) -> list[TxTweak]:
    """Return the light-client tweak (input_hash·A) of every eligible transaction, in block order.

    A transaction is listed when it has at least one P2TR output and
    `summarize` gives it a summary (BIP352's scanning conditions).

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    out = []
    for tx in transactions(block_bytes, spent_bytes):
        if not any(_is_taproot(o.script) for o in tx.outputs):
            continue
        summary = summarize(tx.inputs)
        if summary is not None:
            out.append(TxTweak(tx.txid32, summary.tweak33))
    return out


def scan(block_bytes: bytes, spent_bytes: bytes, receiver: Receiver) -> list[BlockMatch]:
    """Return the outputs of a block that pay `receiver`, in block order, then vout order.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    out = []
    for tx in transactions(block_bytes, spent_bytes):
        taproot = [(vout, o) for vout, o in enumerate(tx.outputs) if _is_taproot(o.script)]
        if not taproot:
            continue
        found = scan_tx(tx.inputs, [o.script[2:] for _, o in taproot], receiver)
        matches = []
        for f in found:
            # Identical outputs are matched once each, lowest vout first.
            i = next(i for i, (_, o) in enumerate(taproot) if o.script[2:] == f.output32)
            vout, o = taproot.pop(i)
            matches.append(BlockMatch(tx.txid32, vout, o.amount, f))
        out.extend(sorted(matches, key=lambda m: m.vout))
    return out


def block_index(block_bytes: bytes, spent_bytes: bytes) -> BlockData:
    """Return what the tweak index keeps of a block (see `BlockData`), in one pass.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    parsed = parse_block(block_bytes)
    spent_txs = join_prevouts(parsed, parse_spent(spent_bytes))
    cols: dict[str, list[bytes]] = {k: [] for k in ("txids", "tweaks33", "tweaks64", "counts", "vouts", "keys", "values", "max")}
    for tx in spent_txs:
        taproot = [(vout, o) for vout, o in enumerate(tx.outputs) if _is_taproot(o.script)]
        summary = summarize(tx.inputs) if taproot else None
        if summary is None:
            continue
        cols["txids"].append(tx.txid32)
        cols["tweaks33"].append(summary.tweak33)
        cols["tweaks64"].append(PublicKey(summary.tweak33).format(compressed=False)[1:])
        cols["counts"].append(struct.pack("<I", len(taproot)))
        cols["max"].append(struct.pack("<Q", max(o.amount for _, o in taproot)))
        for vout, o in taproot:
            cols["vouts"].append(struct.pack("<I", vout))
            cols["keys"].append(o.script[2:])
            cols["values"].append(struct.pack("<Q", o.amount))
    header = parsed.header80
    return BlockData(
        hash32=parsed.hash32,
        prev32=header[4:36],
        time=int.from_bytes(header[68:72], "little"),
        block_txs=len(parsed.txs),
        txids=b"".join(cols["txids"]),
        tweaks33=b"".join(cols["tweaks33"]),
        tweaks64=b"".join(cols["tweaks64"]),
        out_counts=b"".join(cols["counts"]),
        out_vouts=b"".join(cols["vouts"]),
        out_keys=b"".join(cols["keys"]),
        out_values=b"".join(cols["values"]),
        max_values=b"".join(cols["max"]),
        taproot_keys=b"".join(o.script[2:] for tx in parsed.txs for o in tx.outputs if _is_taproot(o.script)),
        spent_outpoints=b"".join(
            i.outpoint.to_bytes() for tx in spent_txs for i in tx.inputs if _is_taproot(i.prevout_script)
        ),
    )


def classify_inputs(block_bytes: bytes, spent_bytes: bytes) -> Iterator[InputReport]:
    """Yield how every non-coinbase input of a block is classified, in block order.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    for tx in transactions(block_bytes, spent_bytes):
        excluded = extract.spends_unknown_segwit(tx.inputs)
        for vin, i in enumerate(tx.inputs):
            key = None if excluded else extract.input_pubkey(i.prevout_script, i.script_sig, i.witness)
            yield InputReport(tx.txid32, vin, extract.script_type(i.prevout_script), key, excluded)


# --- text forms: hex, Core's spent-outputs JSON, getblock verbosity 3 ---


_HEX_DIGITS = b"0123456789abcdefABCDEF"
_HEX_DIGITS_SET = {_HEX_DIGITS[i : i + 1] for i in range(len(_HEX_DIGITS))}


def from_hex(text: str | bytes, what: str) -> bytes:
    """Decode hex; whitespace around it is allowed (Core's REST ends hex with a newline).

    Raises:
        MalformedDataError: not an even number of hex digits; the message names `what`.
    """
    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    body = data.strip()
    if len(body) % 2 or body.translate(None, _HEX_DIGITS):
        raise MalformedDataError(f"{what}: not hex")
    return bytes.fromhex(body.decode("ascii"))


def _is_text(data: bytes) -> bool:
    return not data.translate(None, bytes(range(32, 127)) + b"\t\r\n")


def _sniff(data: bytes, what: str) -> tuple[SpentFormat | None, object]:
    # Returns (format, parsed JSON or None); format None is text that is neither hex nor JSON.
    head = data.lstrip()[:1]
    if head in (b"[", b"{") and _is_text(data):
        return "json", load_json(data, what)
    if not _is_text(data):
        return "bin", None
    # Text starting with a hex digit is meant as hex; from_hex then checks all of it.
    return ("hex" if data.strip()[:1] in _HEX_DIGITS_SET else None), None


def detect_format(data: bytes) -> SpentFormat | None:
    """Tell Core's binary form from its hex and JSON forms.

    Text starting with `[` or `{` is JSON, other text starting with a hex
    digit is hex (whitespace around allowed), any other bytes are binary.

    Returns:
        "bin", "hex", "json", or None for text that is none of them.

    Raises:
        MalformedDataError: text that starts like JSON but does not parse.
    """
    return _sniff(data, "data")[0]


def load_json(data: bytes, what: str) -> object:
    """Parse JSON with exact decimals (amounts stay exact).

    Raises:
        MalformedDataError: not JSON; the message names `what`.
    """
    try:
        return json.loads(data, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedDataError(f"{what}: not JSON ({exc})") from None


def sats(value: object) -> int:
    """Convert a JSON BTC amount (Decimal, int or float) exactly to satoshis.

    Raises:
        MalformedDataError: not a number, more than 8 decimals, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise MalformedDataError(f"amount {value!r} is not a number")
    try:
        amount = Decimal(str(value)) * COIN
    except InvalidOperation:
        raise MalformedDataError(f"amount {value!r} is not a number") from None
    if not amount.is_finite() or amount != amount.to_integral_value() or not 0 <= amount <= MAX_MONEY:
        raise MalformedDataError(f"amount {value} is not a valid BTC amount")
    return int(amount)


def _json_txout(obj: object, where: str) -> TxOut:
    try:
        script = obj["scriptPubKey"]["hex"]  # type: ignore[index]
        value = obj["value"]  # type: ignore[index]
    except (TypeError, KeyError):
        raise MalformedDataError(f"{where}: expected {{value, scriptPubKey: {{hex}}}}") from None
    return TxOut(sats(value), _json_hex(script, f"{where} scriptPubKey.hex"))


def spent_from_json(obj: object) -> bytes:
    """Convert Core's `/rest/spenttxouts/<hash>.json` array to the binary form.

    Raises:
        MalformedDataError: not an array of arrays of {value, scriptPubKey: {hex}}.
    """
    if not isinstance(obj, list) or not all(isinstance(tx, list) for tx in obj):
        raise MalformedDataError("spent outputs JSON: expected an array of arrays")
    return serialize_spent(
        [[_json_txout(o, f"spent outputs JSON tx {n} input {i}") for i, o in enumerate(tx)] for n, tx in enumerate(obj)]
    )


def _getblock(obj: object) -> dict:
    if isinstance(obj, dict) and "result" in obj and "tx" not in obj:
        obj = obj["result"]  # a saved JSON-RPC reply
    if not isinstance(obj, dict) or not isinstance(obj.get("tx"), list):
        raise MalformedDataError("getblock JSON: expected an object with a `tx` array")
    if obj["tx"] and isinstance(obj["tx"][0], str):
        raise PrevoutsError("getblock JSON has txids only; use verbosity 3 (getblock <hash> 3)")
    if not all(isinstance(tx, dict) for tx in obj["tx"]):
        raise MalformedDataError("getblock JSON: `tx` must be an array of objects")
    return obj


def _json_hex(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedDataError(f"{what}: expected a hex string")
    return from_hex(value, what)


def spent_from_getblock(obj: object) -> bytes:
    """Build the spent-outputs binary form from `getblock <hash> 3` JSON.

    Each non-coinbase vin must carry `prevout` {value, scriptPubKey: {hex}};
    a coinbase vin (key `coinbase`) has none.

    Raises:
        PrevoutsError: a vin has no prevout (verbosity below 3).
        MalformedDataError: any other shape problem.
    """
    block = _getblock(obj)
    spent = []
    for n, tx in enumerate(block["tx"]):
        vins = tx.get("vin")
        if not isinstance(vins, list):
            raise MalformedDataError(f"getblock JSON tx {n}: no vin array")
        prevouts = []
        for i, vin in enumerate(vins):
            if not isinstance(vin, dict):
                raise MalformedDataError(f"getblock JSON tx {n} vin {i}: not an object")
            if "coinbase" in vin:
                continue
            if "prevout" not in vin:
                raise PrevoutsError(f"getblock JSON tx {n} vin {i} has no prevout; use verbosity 3 (getblock <hash> 3)")
            prevouts.append(_json_txout(vin["prevout"], f"getblock JSON tx {n} vin {i} prevout"))
        spent.append(prevouts)
    return serialize_spent(spent)


def block_from_getblock(obj: object) -> bytes:
    """Rebuild the raw block from `getblock <hash> 2` or `3` JSON (header fields and each tx's hex).

    The rebuilt header must hash to the JSON's `hash`.

    Raises:
        MalformedDataError: a field is missing or not of its type, or the hash does not match.
    """
    block = _getblock(obj)
    try:
        fields = [block["version"], block["time"], block["nonce"], block["merkleroot"], block["bits"], block["hash"]]
    except KeyError as exc:
        raise MalformedDataError(f"getblock JSON: no {exc.args[0]!r} field") from None
    version, time, nonce, merkleroot, bits, expected = fields
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (version, time, nonce)):
        raise MalformedDataError("getblock JSON: version, time and nonce must be integers")
    if not -(2**31) <= version < 2**31 or not 0 <= time < 2**32 or not 0 <= nonce < 2**32:
        raise MalformedDataError("getblock JSON: version, time or nonce out of range")
    header = (
        version.to_bytes(4, "little", signed=True)
        + _json_hex(block.get("previousblockhash", "00" * 32), "previousblockhash")[::-1]
        + _json_hex(merkleroot, "merkleroot")[::-1]
        + time.to_bytes(4, "little")
        + _json_hex(bits, "bits")[::-1]
        + nonce.to_bytes(4, "little")
    )
    txs = [_json_hex(tx.get("hex"), f"getblock JSON tx {n} hex") for n, tx in enumerate(block["tx"])]
    if len(header) != _HEADER or sha256d(header)[::-1].hex() != expected:
        raise MalformedDataError("getblock JSON: the header fields do not hash to `hash`")
    return header + compact_size(len(txs)) + b"".join(txs)


def load_spent(data: bytes) -> bytes:
    """Read spent outputs in any of Core's forms (format detected) and return the binary form.

    Args:
        data: a file's bytes: binary, hex, spenttxouts JSON or getblock-3 JSON.

    Raises:
        MalformedDataError: bad hex or JSON, or text that is neither.
        PrevoutsError: getblock JSON without prevouts.
    """
    fmt, obj = _sniff(data, "spent outputs")
    if fmt == "json":
        return spent_from_getblock(obj) if isinstance(obj, dict) else spent_from_json(obj)
    if fmt == "hex":
        return from_hex(data, "spent outputs")
    if fmt is None:
        raise MalformedDataError("spent outputs: unknown format (expected binary, hex or JSON)")
    return bytes(data)


def load_block(data: bytes) -> tuple[bytes, bytes | None]:
    """Read a block file: raw binary, hex, or getblock-3 JSON (which also gives the prevouts).

    Returns:
        (block_bytes, spent_bytes or None when the file has no prevouts).

    Raises:
        MalformedDataError: bad hex or JSON, or text that is neither.
        PrevoutsError: getblock JSON without prevouts (verbosity below 3).
    """
    fmt, obj = _sniff(data, "block")
    if fmt == "json":
        return block_from_getblock(obj), spent_from_getblock(obj)
    if fmt == "hex":
        return from_hex(data, "block"), None
    if fmt is None:
        raise MalformedDataError("block: unknown format (expected binary, hex or getblock JSON)")
    return bytes(data), None


# ---- backend: the pure-Python block loop stays reachable as *_reference ----
tweaks_reference, scan_reference, block_index_reference = tweaks, scan, block_index
if native.ENABLED:
    tweaks, scan, block_index = native.block_tweaks, native.block_scan, native.block_index  # type: ignore[assignment]
