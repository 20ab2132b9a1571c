"""What users would pick instead of sp-scan, wrapped to take the same inputs.

- `window_pubkey`: the BIP reference's P2PKH search (a 33-byte window slid backwards
  over the raw scriptSig, HASH160 per window).
- `wallet_pubkey` / `wallet_scan_tx`: btclib-wallet's `pub_key_from_input` and
  `scan_transaction_outputs` (which delegates the curve work to libsecp256k1).
- `libsecp_scan_tx`: libsecp256k1 0.8's silentpayments module through btclib-secp256k1
  (`prevouts_summary` + `scan_outputs`), fed by the same extraction as ours.
- `libsecp_scan_tweak`: a light client's scan of one tweak on libsecp256k1's public API
  through coincurve (the 0.8 module has no entry point that takes a tweak).
- `libsecp_module_scan_key`: libsecp256k1 0.8's silentpayments module on a one-input tx whose
  key is the tweak point: the module's own per-tx work (summary, (b_scan·input_hash)·A, t_k·G,
  labels) on the same points, the nearest it comes to scanning a tweak.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from btclib.script.witness import Witness
from btclib.tx.out_point import OutPoint as WalletOutPoint
from btclib_secp256k1 import silentpayments as libsecp
from coincurve import PublicKey
from btclib_wallet import silent_payments as wallet
from ecc.curves import bytes_from_point, secp256k1

from sp_scan import crypto
from sp_scan.extract import ScriptType, script_type
from sp_scan.types import TxInput


def window_pubkey(prevout_script: bytes, script_sig: bytes) -> bytes | None:
    """The BIP reference's P2PKH rule: last 33-byte window (from the end) whose HASH160 matches."""
    key_hash = prevout_script[3:23]
    sha256, new = hashlib.sha256, hashlib.new
    for end in range(len(script_sig), 32, -1):
        window = script_sig[end - 33 : end]
        if new("ripemd160", sha256(window).digest()).digest() == key_hash and crypto.point(window) is not None:
            return window
    return None


@dataclass(frozen=True)
class WalletInput:
    """An input in btclib's types, built once outside the timed region."""

    prevout_script: bytes
    script_sig: bytes
    witness: Witness
    outpoint: WalletOutPoint


def wallet_input(txin: TxInput) -> WalletInput:
    op = WalletOutPoint(txin.outpoint.txid32[::-1], txin.outpoint.vout)
    return WalletInput(txin.prevout_script, txin.script_sig, Witness(list(txin.witness)), op)


def wallet_pubkey(w: WalletInput) -> bytes | None:
    """btclib-wallet's extraction, serialized like ours (x-only for P2TR, else compressed)."""
    point = wallet.pub_key_from_input(w.prevout_script, w.script_sig, w.witness)
    if point is None:
        return None
    data = bytes_from_point(point, secp256k1)
    return data[1:] if script_type(w.prevout_script) is ScriptType.P2TR else data


def wallet_scan_tx(
    inputs: Sequence[WalletInput], outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """btclib-wallet's full-node scan: its own extraction, then `scan_transaction_outputs`.

    Returns the found x-only outputs. The segwit v2+ rule is the caller's in btclib-wallet,
    so it is applied here the way a wallet would.
    """
    if any(script_type(w.prevout_script) is ScriptType.WITNESS_UNKNOWN for w in inputs):
        return []
    pub_keys = []
    for w in inputs:
        point = wallet.pub_key_from_input(w.prevout_script, w.script_sig, w.witness)
        if point is not None:
            pub_keys.append((point, w.prevout_script))
    if not pub_keys:
        return []
    found = wallet.scan_transaction_outputs(
        scan_key32, spend33, [w.outpoint for w in inputs], pub_keys, outputs32, labels
    )
    return [f.pub_key for f in found]


def libsecp_scan_tx(
    tx_pubkeys: Callable[[Sequence[TxInput]], list[bytes] | None],
    inputs: Sequence[TxInput], outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """libsecp256k1 0.8 via btclib-secp256k1, with `tx_pubkeys` (ours) doing the extraction.

    Returns the found x-only outputs.
    """
    keys = tx_pubkeys(inputs)
    if not keys:
        return []
    smallest36 = min(i.outpoint.to_bytes() for i in inputs)
    try:
        summary = libsecp.prevouts_summary(
            smallest36, [k for k in keys if len(k) == 32], [k for k in keys if len(k) == 33]
        )
    except ValueError:  # keys sum to infinity: not an SP transaction
        return []
    return [out for out, _tweak, _label in libsecp.scan_outputs(outputs32, scan_key32, summary, spend33, labels)]


_SHARED_SECRET_TAG = hashlib.sha256(crypto.TAG_SHARED_SECRET.encode()).digest()
_SHARED_SECRET_MIDSTATE = hashlib.sha256(_SHARED_SECRET_TAG + _SHARED_SECRET_TAG)


def libsecp_scan_tweak(
    tweak33: bytes, outputs32: Sequence[bytes], scan_key32: bytes, spend: PublicKey, change: PublicKey
) -> list[bytes]:
    """One tweak scanned with one libsecp256k1 call per step: b_scan·T (constant time), per k
    t_k (hashlib, tag midstate copied), B_spend + t_k·G (constant-time t_k·G, then a sum), and
    P_k + L_0 for the change label. Returns the found x-only outputs (k order)."""
    ecdh33 = PublicKey(tweak33).multiply(scan_key32).format()
    todo = set(outputs32)
    found = []
    for k in range(2323):
        if not todo:
            break
        h = _SHARED_SECRET_MIDSTATE.copy()
        h.update(ecdh33 + k.to_bytes(4, "big"))
        p_k = PublicKey.combine_keys([spend, PublicKey.from_secret(h.digest())])
        x = p_k.format()[1:]
        if x not in todo:
            x = PublicKey.combine_keys([p_k, change]).format()[1:]
            if x not in todo:
                break
        todo.discard(x)
        found.append(x)
    return found


def libsecp_module_scan_key(
    outpoint36: bytes, key33: bytes, outputs32: Sequence[bytes], scan_key32: bytes, spend33: bytes,
    labels: Mapping[bytes, bytes],
) -> list[bytes]:
    """libsecp256k1 0.8's module on a tx with one input key `key33`: the found x-only outputs."""
    summary = libsecp.prevouts_summary(outpoint36, [], [key33])
    return [out for out, _tweak, _label in libsecp.scan_outputs(outputs32, scan_key32, summary, spend33, labels)]
