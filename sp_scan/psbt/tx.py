"""The transaction a PSBT version 2 describes (BIP370): its fields, BIP341 key-path sighashes, weight, extraction.

`unsigned_tx` reads the version, the lock time BIP370 determines, the inputs' outpoints and
sequences and the outputs; `taproot_sighash` is BIP341's signature hash of a key-path spend
(SIGHASH_DEFAULT or SIGHASH_ALL, no annex) over every input's prevout from the PSBT; `extract`
is the Transaction Extractor: the network serialization of a finalized PSBT.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from .. import crypto
from ..errors import PSBTError
from ..wire import TxOut, compact_size, parse_txout, sha256d, tx_output
from .codec import Psbt
from .fields import (
    GLOBAL_FALLBACK_LOCKTIME, GLOBAL_TX_VERSION, IN_FINAL_SCRIPTSIG, IN_FINAL_SCRIPTWITNESS, IN_NON_WITNESS_UTXO,
    IN_OUTPUT_INDEX, IN_PREVIOUS_TXID, IN_REQUIRED_HEIGHT_LOCKTIME, IN_REQUIRED_TIME_LOCKTIME, IN_SEQUENCE,
    IN_WITNESS_UTXO, OUT_AMOUNT, OUT_SCRIPT, SIGHASH_ALL, SIGHASH_DEFAULT, SP_SPEND, STRUCTURE, field_key,
)  # fmt: skip

TAG_SIGHASH = "TapSighash"
DEFAULT_SEQUENCE = 0xFFFFFFFF
"""An input's nSequence when PSBT_IN_SEQUENCE is absent (BIP370)."""
KEY_PATH_WITNESS = {SIGHASH_DEFAULT: 1 + 1 + 64, SIGHASH_ALL: 1 + 1 + 65}
"""Bytes of a P2TR key-path witness (item count, length, signature) by sighash type."""


@dataclass(frozen=True, slots=True)
class UnsignedTx:
    """A transaction without its scriptSigs and witnesses.

    Attributes:
        version: nVersion.
        locktime: nLockTime.
        outpoints36: each input's outpoint (txid32 ‖ vout LE32), in input order.
        sequences: each input's nSequence.
        outputs: the outputs, in order.
    """

    version: int
    locktime: int
    outpoints36: tuple[bytes, ...]
    sequences: tuple[int, ...]
    outputs: tuple[TxOut, ...]

    def serialize(self, script_sigs: Sequence[bytes] | None = None, witnesses: Sequence[bytes] | None = None) -> bytes:
        """The network serialization.

        Args:
            script_sigs: each input's scriptSig (default: empty).
            witnesses: each input's serialized witness (item count, then items), b"" for none;
                None or all empty gives the serialization without witness data.
        """
        sigs = script_sigs or [b""] * len(self.outpoints36)
        wits = [w or b"\x00" for w in witnesses] if witnesses and any(witnesses) else None
        out = [struct.pack("<i", self.version), b"\x00\x01" if wits else b"", compact_size(len(self.outpoints36))]
        for op, sig, seq in zip(self.outpoints36, sigs, self.sequences):
            out += [op, compact_size(len(sig)), sig, struct.pack("<I", seq)]
        out.append(compact_size(len(self.outputs)))
        out += [o.to_bytes() for o in self.outputs]
        out += wits or []
        out.append(struct.pack("<I", self.locktime))
        return b"".join(out)

    @property
    def txid32(self) -> bytes:
        """The txid, internal byte order (witness data does not change it)."""
        return sha256d(self.serialize())

    def weight(self, witnesses: Sequence[bytes]) -> int:
        """BIP141 weight with these serialized witnesses (and empty scriptSigs)."""
        base = len(self.serialize())
        return 3 * base + len(self.serialize(witnesses=witnesses))


def vsize(weight: int) -> int:
    """Virtual size in vbytes: weight / 4 rounded up."""
    return (weight + 3) // 4


def locktime(p: Psbt) -> int:
    """nLockTime as BIP370 determines it: the fallback (default 0) when no input requires a lock time,
    else the largest required value of the one kind every such input allows (height when both do).

    Raises:
        PSBTError: (rule "psbt structure") the inputs require lock times of different kinds.
    """
    heights, times, only_time, only_height = [], [], False, False
    for m in p.inputs:
        h, t = m.get(field_key(IN_REQUIRED_HEIGHT_LOCKTIME)), m.get(field_key(IN_REQUIRED_TIME_LOCKTIME))
        if h is not None:
            heights.append(int.from_bytes(h, "little"))
        if t is not None:
            times.append(int.from_bytes(t, "little"))
        only_time |= t is not None and h is None
        only_height |= h is not None and t is None
    if not heights and not times:
        fallback = p.global_map.get(field_key(GLOBAL_FALLBACK_LOCKTIME))
        return int.from_bytes(fallback, "little") if fallback is not None else 0
    if only_time and only_height:
        raise PSBTError(STRUCTURE, "some inputs require a height lock time and others a time lock time: no lock time satisfies both")
    return max(times) if only_time else max(heights)


def unsigned_tx(p: Psbt) -> UnsignedTx:
    """The transaction the PSBT describes.

    Raises:
        PSBTError: (rule "psbt structure") lock times that conflict, or an output without PSBT_OUT_SCRIPT
            (a silent-payment output not computed yet).
    """
    missing = [i for i, m in enumerate(p.outputs) if field_key(OUT_SCRIPT) not in m]
    if missing:
        raise PSBTError(STRUCTURE, f"output {missing[0]} has no PSBT_OUT_SCRIPT yet (its silent-payment script is computed once the ECDH shares cover the inputs)")
    outpoints = tuple(m[field_key(IN_PREVIOUS_TXID)] + m[field_key(IN_OUTPUT_INDEX)] for m in p.inputs)
    sequences = tuple(int.from_bytes(m.get(field_key(IN_SEQUENCE), struct.pack("<I", DEFAULT_SEQUENCE)), "little") for m in p.inputs)
    outputs = tuple(TxOut(int.from_bytes(m[field_key(OUT_AMOUNT)], "little"), m[field_key(OUT_SCRIPT)]) for m in p.outputs)
    version = struct.unpack("<i", p.global_map[field_key(GLOBAL_TX_VERSION)])[0]
    return UnsignedTx(version, locktime(p), outpoints, sequences, outputs)


def prevouts(p: Psbt) -> list[TxOut]:
    """The output each input spends, from PSBT_IN_WITNESS_UTXO or PSBT_IN_NON_WITNESS_UTXO.

    Raises:
        PSBTError: (rule "sp spend") an input has neither.
    """
    out = []
    for i, m in enumerate(p.inputs):
        utxo, full = m.get(field_key(IN_WITNESS_UTXO)), m.get(field_key(IN_NON_WITNESS_UTXO))
        if utxo is not None:
            out.append(parse_txout(utxo))
        elif full is not None:
            out.append(tx_output(full, int.from_bytes(m[field_key(IN_OUTPUT_INDEX)], "little"))[1])
        else:
            raise PSBTError(SP_SPEND, f"input {i} has no PSBT_IN_WITNESS_UTXO: a taproot signature commits to every input's amount and script")
    return out


def _sha256(parts) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.digest()


def taproot_sighash(tx: UnsignedTx, spent: Sequence[TxOut], index: int, hash_type: int = SIGHASH_DEFAULT) -> bytes:
    """BIP341's signature hash of a key-path spend of input `index` (no annex), 32 bytes.

    Args:
        spent: the output each input spends, in input order.
        hash_type: SIGHASH_DEFAULT (0) or SIGHASH_ALL (1).

    Raises:
        PSBTError: (rule "sp spend") another hash type, or `spent` does not match the inputs.
    """
    if hash_type not in (SIGHASH_DEFAULT, SIGHASH_ALL):
        raise PSBTError(SP_SPEND, f"input {index}: sighash type {hash_type}; sp-scan signs SIGHASH_DEFAULT or SIGHASH_ALL only")
    if len(spent) != len(tx.outpoints36) or not 0 <= index < len(spent):
        raise PSBTError(SP_SPEND, "the spent outputs do not match the inputs")
    msg = b"".join(
        [
            b"\x00",  # epoch
            bytes([hash_type]),
            struct.pack("<iI", tx.version, tx.locktime),
            _sha256(tx.outpoints36),
            _sha256(o.amount.to_bytes(8, "little") for o in spent),
            _sha256(compact_size(len(o.script)) + o.script for o in spent),
            _sha256(struct.pack("<I", s) for s in tx.sequences),
            _sha256(o.to_bytes() for o in tx.outputs),
            b"\x00",  # spend type: key path, no annex
            struct.pack("<I", index),
        ]
    )
    return crypto.tagged_hash(TAG_SIGHASH, msg)


def extract(p: Psbt) -> bytes:
    """BIP174's Transaction Extractor: the network serialization of a PSBT whose inputs are all finalized.

    Raises:
        PSBTError: (rule "psbt structure") an input is not finalized, or as `unsigned_tx`.
    """
    tx = unsigned_tx(p)
    for i, m in enumerate(p.inputs):
        if field_key(IN_FINAL_SCRIPTSIG) not in m and field_key(IN_FINAL_SCRIPTWITNESS) not in m:
            raise PSBTError(STRUCTURE, f"input {i} is not finalized (no PSBT_IN_FINAL_SCRIPTWITNESS or PSBT_IN_FINAL_SCRIPTSIG): sign it first")
    sigs = [m.get(field_key(IN_FINAL_SCRIPTSIG), b"") for m in p.inputs]
    wits = [m.get(field_key(IN_FINAL_SCRIPTWITNESS), b"") for m in p.inputs]
    return tx.serialize(sigs, wits)
