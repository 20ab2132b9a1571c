"""Blocks: the light-client tweaks, the scan and the index data of a raw block and its spent outputs.

`tweaks`, `scan` and `block_index` take a raw block and its spent outputs in
Core's binary form (`spent_bytes`; `sp_scan.formats` reads the others) and
come from the chosen backend (`sp_scan.backend`): the native block loop, or
the Python one in `sp_scan.reference.block`, with the same results and
errors. Parsing lives in `sp_scan.wire`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .backend import block_index, block_scan as scan, block_tweaks as tweaks
from .extract import ScriptType, input_pubkey, script_type, spends_unknown_segwit
from .wire import transactions

__all__ = ["InputReport", "block_index", "classify_inputs", "scan", "tweaks"]


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
    script_type: ScriptType
    pubkey: bytes | None
    tx_excluded: bool


def classify_inputs(block_bytes: bytes, spent_bytes: bytes) -> Iterator[InputReport]:
    """Yield how every non-coinbase input of a block is classified, in block order.

    Raises:
        MalformedBlockError, MalformedDataError, PrevoutsError: as `transactions`.
    """
    for tx in transactions(block_bytes, spent_bytes):
        excluded = spends_unknown_segwit(tx.inputs)
        for vin, i in enumerate(tx.inputs):
            key = None if excluded else input_pubkey(i.prevout_script, i.script_sig, i.witness)
            yield InputReport(tx.txid32, vin, script_type(i.prevout_script), key, excluded)
