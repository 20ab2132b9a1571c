"""Building PSBT version 2 values for tests: a sender's inputs with real keys and a receiver's wallet."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from coincurve import PrivateKey

from sp_scan import address, crypto, psbt
from sp_scan.wire import TxOut, compact_size
from sp_scan.scan import Receiver
from sp_scan.types import OutPoint

RECEIVER_SCAN = hashlib.sha256(b"receiver scan").digest()
RECEIVER_SPEND = hashlib.sha256(b"receiver spend").digest()


def key(kind: int, keydata: bytes = b"") -> bytes:
    return compact_size(kind) + keydata


@dataclass(frozen=True)
class Coin:
    """An input the sender owns: outpoint, prevout and the private key of its output."""

    outpoint: OutPoint
    prevout: TxOut
    private_key32: bytes
    kind: str
    redeem_script: bytes = b""

    def input_map(self) -> dict[bytes, bytes]:
        m = {
            key(psbt.fields.IN_PREVIOUS_TXID): self.outpoint.txid32,
            key(psbt.fields.IN_OUTPUT_INDEX): self.outpoint.vout.to_bytes(4, "little"),
            key(psbt.fields.IN_WITNESS_UTXO): self.prevout.to_bytes(),
        }
        if self.kind == "p2wpkh":
            pub = PrivateKey(self.private_key32).public_key.format()
            m[key(psbt.fields.IN_BIP32_DERIVATION, pub)] = bytes(4)
        if self.redeem_script:
            m[key(psbt.fields.IN_REDEEM_SCRIPT)] = self.redeem_script
        return m


def coin(seed: str, kind: str = "p2wpkh") -> Coin:
    """A coin with a key derived from `seed`: P2WPKH (with its BIP32 derivation key) or P2TR (the output key's own)."""
    secret = hashlib.sha256(seed.encode()).digest()
    pub = PrivateKey(secret).public_key.format()
    script = b"\x00\x14" + crypto.hash160(pub) if kind == "p2wpkh" else b"\x51\x20" + pub[1:]
    return Coin(OutPoint(hashlib.sha256(b"txid" + seed.encode()).digest(), 1), TxOut(100_000, script), secret, kind)


def p2sh_multisig_coin(seed: str) -> Coin:
    """A P2SH 1-of-1 multisig coin (not eligible), with its redeem script in the map."""
    pub = PrivateKey(hashlib.sha256(seed.encode()).digest()).public_key.format()
    redeem = b"\x51\x21" + pub + b"\x51\xae"
    script = b"\xa9\x14" + crypto.hash160(redeem) + b"\x87"
    return Coin(OutPoint(hashlib.sha256(b"txid" + seed.encode()).digest(), 0), TxOut(50_000, script), hashlib.sha256(seed.encode()).digest(), "p2sh", redeem)


def receiver(labels: tuple[int, ...] = (1,)) -> Receiver:
    return Receiver(RECEIVER_SCAN, PrivateKey(RECEIVER_SPEND).public_key.format(), labels)


def receiver_address(label: int | None = None) -> address.SPAddress:
    scan33 = PrivateKey(RECEIVER_SCAN).public_key.format()
    spend33 = PrivateKey(RECEIVER_SPEND).public_key.format()
    if label is not None:
        spend33 = address.labelled_spend_pubkey(RECEIVER_SCAN, spend33, label)
    return address.SPAddress("sp", 0, scan33, spend33)


def build(coins: list[Coin], pays: list[address.SPAddress | bytes], modifiable: int = 0x03) -> psbt.Psbt:
    """A PSBT spending `coins` to silent-payment addresses or plain scripts (bytes), 10,000 sats each."""
    g = {
        key(psbt.fields.GLOBAL_VERSION): (2).to_bytes(4, "little"),
        key(psbt.fields.GLOBAL_TX_VERSION): (2).to_bytes(4, "little"),
        key(psbt.fields.GLOBAL_INPUT_COUNT): compact_size(len(coins)),
        key(psbt.fields.GLOBAL_OUTPUT_COUNT): compact_size(len(pays)),
        key(psbt.fields.GLOBAL_TX_MODIFIABLE): bytes([modifiable]),
    }
    inputs = [c.input_map() for c in coins]
    outputs = []
    for pay in pays:
        m = {key(psbt.fields.OUT_AMOUNT): (10_000).to_bytes(8, "little")}
        if isinstance(pay, bytes):
            m[key(psbt.fields.OUT_SCRIPT)] = pay
        else:
            m[key(psbt.fields.OUT_SP_V0_INFO)] = pay.scan_pubkey33 + pay.spend_pubkey33
        outputs.append(m)
    return psbt.Psbt(g, inputs, outputs)


def input_keys(p: psbt.Psbt) -> list[bytes]:
    """The eligible input keys as an index server sees them (for the receiver's tweak)."""
    return [i.pubkey for i in p.input_info() if i.eligible]
