"""Frozen value types passed between the stages (both backends take and return these)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from coincurve import PublicKey

from . import crypto
from .errors import InvalidKeyError, MalformedDataError

CHANGE_LABEL = 0
"""The label m = 0, reserved for change; every `Receiver` scans it."""


@dataclass(frozen=True, slots=True, order=True)
class OutPoint:
    """A transaction outpoint; ordering is BIP352's bytewise order of `to_bytes()`.

    Attributes:
        txid32: the txid in internal byte order (display hex reversed).
        vout: output index, 0 <= vout < 2**32.
    """

    txid32: bytes
    vout: int

    def __post_init__(self) -> None:
        if not isinstance(self.txid32, bytes) or len(self.txid32) != 32:
            raise InvalidKeyError("txid32 must be 32 bytes")
        if not 0 <= self.vout < 2**32:
            raise InvalidKeyError("vout must fit in 4 bytes")

    def to_bytes(self) -> bytes:
        """Return the 36-byte serialization: txid32 ‖ vout as 4-byte little-endian."""
        return self.txid32 + struct.pack("<I", self.vout)

    @classmethod
    def from_bytes(cls, data36: bytes) -> OutPoint:
        """Parse the 36-byte serialization; raises `MalformedDataError` on any other length."""
        if len(data36) != 36:
            raise MalformedDataError("an outpoint is 36 bytes")
        return cls(bytes(data36[:32]), struct.unpack("<I", data36[32:])[0])

    @classmethod
    def from_display(cls, txid_hex: str, vout: int) -> OutPoint:
        """Build from a display (big-endian) txid hex string, as RPC and explorers show it."""
        try:
            txid = bytes.fromhex(txid_hex)
        except ValueError as exc:
            raise MalformedDataError(f"txid is not hex: {exc}") from None
        return cls(txid[::-1], vout)


@dataclass(frozen=True, slots=True)
class TxInput:
    """One transaction input with the scriptPubKey of the output it spends.

    Attributes:
        outpoint: the output being spent.
        script_sig: the input's scriptSig.
        witness: the witness stack, one bytes per item (empty for none).
        prevout_script: the scriptPubKey of the spent output.
    """

    outpoint: OutPoint
    script_sig: bytes
    witness: tuple[bytes, ...]
    prevout_script: bytes


@dataclass(frozen=True, slots=True)
class Summary:
    """What the inputs of an SP transaction contribute (BIP352 "prevouts summary").

    Attributes:
        outpoint_smallest36: the smallest outpoint over all inputs, serialized.
        pubkey_sum33: A, the sum of the eligible input keys, compressed.
        input_hash32: hash_BIP0352/Inputs(outpoint_L ‖ A).
        tweak33: input_hash·A, compressed: the value an index serves to light clients.
    """

    outpoint_smallest36: bytes
    pubkey_sum33: bytes
    input_hash32: bytes
    tweak33: bytes


@dataclass(frozen=True, slots=True)
class FoundOutput:
    """An output that pays the receiver.

    Attributes:
        output32: the x-only taproot output key.
        tweak32: t_k plus the label tweak, mod n: the spend key is b_spend + tweak32.
        label: the label m the output was paid to, or None for the unlabelled address.
    """

    output32: bytes
    tweak32: bytes
    label: int | None


@dataclass(frozen=True, slots=True)
class TxTweak:
    """The light-client data of one eligible transaction.

    Attributes:
        txid32: the txid in internal byte order (reverse for display).
        tweak33: input_hash·A, compressed.
    """

    txid32: bytes
    tweak33: bytes


@dataclass(frozen=True, slots=True)
class BlockMatch:
    """A found output located in a block.

    Attributes:
        txid32: the paying transaction's txid, internal byte order.
        vout: the output's index in that transaction.
        amount: its value in satoshis.
        found: the output key, tweak and label.
    """

    txid32: bytes
    vout: int
    amount: int
    found: FoundOutput


@dataclass(frozen=True, slots=True)
class BlockData:
    """What the tweak index keeps of one block: header fields and packed little-endian arrays.

    A transaction is eligible when it has a P2TR output and a BIP352 summary
    (the transactions `block.tweaks` lists); n is their number, Σ the number
    of their taproot outputs.

    Attributes:
        hash32: the block hash, internal byte order.
        prev32: the previous block's hash, internal byte order.
        time: the header's timestamp.
        block_txs: transactions in the block, coinbase included.
        txids: n × 32, the eligible txids in block order.
        tweaks33: n × 33, input_hash·A compressed.
        tweaks64: n × 64, the same point uncompressed (x ‖ y, no prefix byte).
        out_counts: n × u32, taproot outputs per eligible tx.
        out_vouts: Σ × u32, each taproot output's vout.
        out_keys: Σ × 32, its x-only key.
        out_values: Σ × u64, its value in satoshis.
        max_values: n × u64, the largest taproot output value per eligible tx (the dust rule).
        taproot_keys: k × 32, the key of every P2TR output in the block (coinbase and ineligible
            txs included), block then vout order.
        spent_outpoints: m × 36, the outpoint of every input that spends a P2TR output, tx then vin order.
        spent_key_prefixes: m × 8, the first 8 bytes of the x-only key of the output each of those inputs
            spends, in the same order (BlindBit v2's short spent outputs).
    """

    hash32: bytes
    prev32: bytes
    time: int
    block_txs: int
    txids: bytes
    tweaks33: bytes
    tweaks64: bytes
    out_counts: bytes
    out_vouts: bytes
    out_keys: bytes
    out_values: bytes
    max_values: bytes
    taproot_keys: bytes
    spent_outpoints: bytes
    spent_key_prefixes: bytes

    @property
    def n_tx(self) -> int:
        """The number of eligible transactions."""
        return len(self.txids) // 32


@dataclass(frozen=True, slots=True)
class Utxo:
    """A taproot output of an eligible transaction, as an index serves it.

    Attributes:
        txid32: the transaction's txid, internal byte order.
        vout: the output's index.
        value: its value in satoshis.
        output32: its x-only key.
        spent: True once an indexed block spent it.
    """

    txid32: bytes
    vout: int
    value: int
    output32: bytes
    spent: bool


@dataclass(frozen=True, slots=True)
class IndexMatch:
    """An output paying the receiver, found by scanning an index.

    Attributes:
        height: the block's height; None for a transaction still in the node's mempool.
        txid32: the paying transaction's txid, internal byte order.
        vout: the output's index in that transaction.
        amount: its value in satoshis.
        found: the output key, tweak and label.
        spent: True when an indexed block spent it (never for a mempool transaction's output).
    """

    height: int | None
    txid32: bytes
    vout: int
    amount: int
    found: FoundOutput
    spent: bool


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Receiver:
    """A receiver's scanning keys: scan secret, spend public key and labels.

    The change label m = 0 is always scanned, whether listed or not. The
    scan key never appears in `repr`.

    Attributes:
        scan_key32: b_scan, 32 bytes.
        spend_pubkey33: B_spend, compressed.
        labels: the labels m in use (0 is added).
        label_table: ser_P(ℓ_m·G) -> (m, ℓ_m) for every label, built once.

    Raises:
        InvalidKeyError: a key of the wrong width, not a valid key, or a label out of range.
    """

    scan_key32: bytes = field(repr=False)
    spend_pubkey33: bytes
    labels: tuple[int, ...] = ()
    label_table: dict[bytes, tuple[int, bytes]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        crypto.scalar(self.scan_key32, "scan_key32")
        crypto.pubkey(self.spend_pubkey33, "spend_pubkey33")
        labels = tuple(dict.fromkeys((CHANGE_LABEL, *self.labels)))
        table = {}
        for m in labels:
            tweak32 = crypto.label_tweak(self.scan_key32, m)
            table[PublicKey.from_secret(tweak32).format()] = (m, tweak32)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "label_table", table)


@dataclass(frozen=True, slots=True)
class InputKey:
    """The private key of one eligible input, for sending.

    Attributes:
        private_key32: the input's secret key (never shown in repr).
        is_taproot: True for a P2TR input, whose key counts with even Y.
    """

    private_key32: bytes = field(repr=False)
    is_taproot: bool


@dataclass(frozen=True, slots=True)
class MempoolTx:
    """An eligible transaction of the node's mempool, as `index sync --mempool` keeps it beside the index.

    Attributes:
        txid32: the txid, internal byte order.
        tweak33: input_hash·A compressed (a light client's or a Frigate height-0 entry's tweak).
        outputs: its taproot outputs as (vout, output32 x-only key, value in satoshis), vout order.
    """

    txid32: bytes
    tweak33: bytes
    outputs: tuple[tuple[int, bytes, int], ...]


@dataclass(frozen=True, slots=True)
class MempoolView:
    """The index's mempool table read at one moment (see `Index.mempool_tweaks`).

    Attributes:
        version: changes whenever the answer may have changed; equal versions mean equal txs.
            0 when no sync keeps the table (its rows, if any, are not trusted and not given).
        tip_height: the index's tip when it was read (None while empty): the txs are those
            unconfirmed on top of it.
        txs: the eligible mempool txs, oldest first (the order the sync added them); each txid once.
    """

    version: int
    tip_height: int | None
    txs: tuple[MempoolTx, ...]
