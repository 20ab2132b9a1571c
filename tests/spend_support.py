"""Test support for spending: Core's script interpreter on every input, mining a spend on a kernel chain,
addresses of every kind, and silent-payment coins made from a known spend key."""

from __future__ import annotations

import hashlib

import pbk
from bitcoin import base58
from bitcoin.core import CMutableTransaction
from bitcoin.segwit_addr import encode as segwit_encode
from coincurve import PrivateKey

import kernelchain as kc
from sp_scan import crypto
from sp_scan.address import bech32m_encode
from sp_scan.wallet import WalletOutput
from sp_scan.wire import TxOut, sha256d


def kernel_verifies(raw_tx: bytes, spent: list[TxOut]) -> list[bool]:
    """Whether libbitcoinkernel's script interpreter accepts each input (every consensus flag, taproot included)."""
    tx = pbk.Transaction(raw_tx)
    outputs = [pbk.TransactionOutput(pbk.ScriptPubkey(o.script), o.amount) for o in spent]
    data = pbk.script.PrecomputedTransactionData(tx, outputs)
    return [bool(pbk.ScriptPubkey(o.script).verify(o.amount, tx, data, i, pbk.ScriptVerificationFlags.ALL)) for i, o in enumerate(spent)]


def tx_vsize(raw_tx: bytes) -> int:
    """The vsize of a serialized transaction, from its two serializations (BIP141)."""
    tx = CMutableTransaction.deserialize(raw_tx)
    stripped = len(CMutableTransaction(tx.vin, tx.vout, tx.nLockTime, tx.nVersion).serialize())
    return (3 * stripped + len(raw_tx) + 3) // 4


def mine(chain: kc.KernelChain, raw_tx: bytes, inputs36: list[bytes], fee: int) -> kc.BlockRecord:
    """Mine a block holding the transaction; the kernel validates it (raises BlockRejected otherwise)."""
    tx = CMutableTransaction.deserialize(raw_tx)
    record = kc.TxRecord("spend", tx, ("p2tr-key",) * len(inputs36), tuple(inputs36), fee, None, ())
    return chain.mine([record])


def p2wpkh_address(seed: bytes, hrp: str = "bcrt") -> tuple[str, bytes]:
    """(address, script) of a P2WPKH output."""
    program = hashlib.sha256(seed).digest()[:20]
    return segwit_encode(hrp, 0, program), b"\x00\x14" + program


def p2tr_address(seed: bytes, hrp: str = "bcrt") -> tuple[str, bytes]:
    """(bech32m address, script) of a P2TR output."""
    key = PrivateKey(hashlib.sha256(seed).digest()).public_key.format()[1:]
    return bech32m_encode(hrp, 1, key), b"\x51\x20" + key


def p2pkh_address(seed: bytes, version: int = 0x6F) -> tuple[str, bytes]:
    """(base58 address, script) of a P2PKH output (0x6f: the test networks)."""
    key_hash = crypto.hash160(PrivateKey(hashlib.sha256(seed).digest()).public_key.format())
    payload = bytes([version]) + key_hash
    return base58.encode(payload + sha256d(payload)[:4]), b"\x76\xa9\x14" + key_hash + b"\x88\xac"


def sp_coin(spend_key32: bytes, n: int, amount: int) -> WalletOutput:
    """A confirmed silent-payment coin of the spend key: a random-looking tweak, its output key, a made-up outpoint."""
    tweak32 = hashlib.sha256(b"spend test tweak %d" % n).digest()
    d = PrivateKey(spend_key32).add(tweak32)
    return WalletOutput(100, hashlib.sha256(b"spend test txid %d" % n).digest(), n % 3, amount, d.public_key.format()[1:], tweak32, None)
