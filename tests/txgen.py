"""Deterministic random transactions for parity tests: every input type, labels, several outputs each.

`generate(seed, count)` yields `GenTx` values: the inputs (with prevouts), the private
keys of the eligible inputs (for sending), the recipients paid, and the x-only taproot
outputs (the payments plus unrelated, sometimes off-curve, keys) in shuffled order.
Signatures are dummies: nothing here is verified, only classified.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from coincurve import PrivateKey

from sp_scan.address import SPAddress, labelled_spend_pubkey
from sp_scan.crypto import hash160
from sp_scan.errors import SendError
from sp_scan.extract import NUMS_H
from sp_scan.scan import Receiver
from sp_scan.reference.send import create_outputs
from sp_scan.types import InputKey
from sp_scan.types import OutPoint, TxInput

SIG71, SIG64 = b"\x30" * 71, b"\x01" * 64


@dataclass(frozen=True)
class Wallet:
    """A receiver and the spend key its addresses use."""

    receiver: Receiver
    scan_pubkey33: bytes

    def address(self, m: int | None) -> SPAddress:
        spend = self.receiver.spend_pubkey33
        if m is not None:
            spend = labelled_spend_pubkey(self.receiver.scan_key32, spend, m)
        return SPAddress("sp", 0, self.scan_pubkey33, spend)


@dataclass(frozen=True)
class GenTx:
    inputs: list[TxInput]
    input_keys: list[InputKey]
    recipients: list[SPAddress]
    outputs32: list[bytes]
    kind: list[str]


def wallets(seed: int = 352) -> list[Wallet]:
    """Three receivers: no labels, a few labels, and 40 labels (so both label strategies are picked)."""
    rng = random.Random(seed)
    out = []
    for labels in ((), (1, 2, 1001337), tuple(range(1, 41))):
        scan_key, spend_key = PrivateKey(rng.randbytes(32)), PrivateKey(rng.randbytes(32))
        receiver = Receiver(scan_key.secret, spend_key.public_key.format(), labels)
        out.append(Wallet(receiver, scan_key.public_key.format()))
    return out


def _push(data: bytes, rng: random.Random) -> bytes:
    if len(data) < 0x4C and rng.random() < 0.8:
        return bytes([len(data)]) + data
    if rng.random() < 0.5:
        return b"\x4c" + bytes([len(data)]) + data
    return b"\x4d" + len(data).to_bytes(2, "little") + data


def _key(rng: random.Random) -> PrivateKey:
    return PrivateKey(rng.randbytes(32))


def _input(kind: str, rng: random.Random) -> tuple[TxInput, InputKey | None]:
    """One input of `kind`; the InputKey when the input is eligible."""
    op = OutPoint(rng.randbytes(32), rng.choice([0, 1, 2, 256, rng.randrange(2**32)]))
    k = _key(rng)
    pk33, pk65 = k.public_key.format(), k.public_key.format(compressed=False)
    other33 = _key(rng).public_key.format()
    if kind == "p2pkh":
        return TxInput(op, _push(SIG71, rng) + _push(pk33, rng), (), b"\x76\xa9\x14" + hash160(pk33) + b"\x88\xac"), InputKey(k.secret, False)
    if kind == "p2pkh_malleated":
        sig = _push(SIG71, rng)
        variants = [
            b"\x51\x63" + sig + _push(pk33, rng) + b"\x67" + sig + _push(other33, rng) + b"\x68",
            _push(other33, rng) + b"\x75" + sig + _push(pk33, rng),
            sig + _push(pk33, rng) + _push(other33, rng) + b"\x75",
        ]
        return TxInput(op, rng.choice(variants), (), b"\x76\xa9\x14" + hash160(pk33) + b"\x88\xac"), InputKey(k.secret, False)
    if kind == "p2pkh_uncompressed":
        return TxInput(op, _push(SIG71, rng) + _push(pk65, rng), (), b"\x76\xa9\x14" + hash160(pk65) + b"\x88\xac"), None
    if kind == "p2pkh_truncated":
        cut = rng.choice([b"\x4c\x05\x00", b"\x4d\x01", b"\x4e\x00\x00", b"\x4c"])  # data or length field
        script_sig = _push(SIG71, rng) + _push(pk33, rng) + cut
        return TxInput(op, script_sig, (), b"\x76\xa9\x14" + hash160(pk33) + b"\x88\xac"), None
    if kind == "p2sh_p2wpkh":
        redeem = b"\x00\x14" + hash160(pk33)
        spk = b"\xa9\x14" + hash160(redeem) + b"\x87"
        return TxInput(op, b"\x16" + redeem, (SIG71, pk33), spk), InputKey(k.secret, False)
    if kind == "p2sh_multisig":
        redeem = b"\x51\x21" + pk33 + b"\x51\xae"
        spk = b"\xa9\x14" + hash160(redeem) + b"\x87"
        return TxInput(op, b"\x00" + _push(SIG71, rng) + _push(redeem, rng), (), spk), None
    if kind == "p2wpkh":
        return TxInput(op, b"", (SIG71, pk33), b"\x00\x14" + hash160(pk33)), InputKey(k.secret, False)
    if kind == "p2wpkh_uncompressed":
        return TxInput(op, b"", (SIG71, pk65), b"\x00\x14" + hash160(pk65)), None
    x32 = pk33[1:]
    spk = b"\x51\x20" + x32
    internal = _key(rng).public_key.format()[1:]
    control = bytes([0xC0 | (pk33[0] & 1)]) + internal + rng.randbytes(32 * rng.randrange(3))
    annex = [b"\x50" + rng.randbytes(rng.randrange(4))]
    if kind == "p2tr_key":
        return TxInput(op, b"", (SIG64,), spk), InputKey(k.secret, True)
    if kind == "p2tr_key_annex":
        return TxInput(op, b"", (SIG64, *annex), spk), InputKey(k.secret, True)
    if kind == "p2tr_script":
        return TxInput(op, b"", (SIG64, b"\x20" + rng.randbytes(32) + b"\xac", control), spk), InputKey(k.secret, True)
    if kind == "p2tr_script_annex":
        return TxInput(op, b"", (SIG64, b"\x51", control, *annex), spk), InputKey(k.secret, True)
    if kind == "p2tr_nums":
        nums_control = b"\xc0" + NUMS_H + rng.randbytes(32 * rng.randrange(2))
        return TxInput(op, b"", (SIG64, b"\x51", nums_control, *annex[: rng.randrange(2)]), spk), None
    if kind == "p2tr_bad_control":
        return TxInput(op, b"", (SIG64, b"\x51", control + b"\x00"), spk), None
    if kind == "p2tr_empty":
        return TxInput(op, b"", (), spk), None
    if kind == "p2wsh":
        return TxInput(op, b"", (b"\x51",), b"\x00\x20" + rng.randbytes(32)), None
    if kind == "p2pk":
        return TxInput(op, _push(SIG71, rng), (), b"\x21" + pk33 + b"\xac"), None
    if kind == "segwit_v2":
        return TxInput(op, b"", (SIG64,), b"\x52\x20" + rng.randbytes(32)), None
    raise ValueError(kind)


KINDS = {
    "p2pkh": 10, "p2pkh_malleated": 4, "p2pkh_uncompressed": 2, "p2pkh_truncated": 1, "p2sh_p2wpkh": 6,
    "p2sh_multisig": 2, "p2wpkh": 10, "p2wpkh_uncompressed": 1, "p2tr_key": 10, "p2tr_key_annex": 2,
    "p2tr_script": 3, "p2tr_script_annex": 2, "p2tr_nums": 2, "p2tr_bad_control": 1, "p2tr_empty": 1,
    "p2wsh": 2, "p2pk": 2, "segwit_v2": 0.4,
}  # fmt: skip


def _unrelated(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return rng.randbytes(32)  # about half of these are off the curve
    return _key(rng).public_key.format()[1:]


def generate(seed: int, count: int, paying: list[Wallet]) -> list[GenTx]:
    """`count` transactions, each with 1-5 inputs of random kinds, paying 1-3 recipients of `paying`."""
    rng = random.Random(seed)
    names, weights = list(KINDS), list(KINDS.values())
    txs = []
    for _ in range(count):
        kinds = rng.choices(names, weights, k=rng.randint(1, 5))
        pairs = [_input(kind, rng) for kind in kinds]
        inputs = [i for i, _ in pairs]
        keys = [k for _, k in pairs if k is not None]
        recipients = []
        for _ in range(rng.randint(1, 3)):
            wallet = rng.choice(paying)
            labels = wallet.receiver.labels
            m = rng.choice((None, None, *labels)) if len(labels) > 1 else rng.choice((None, 0))
            recipients += [wallet.address(m)] * rng.randint(1, 3)
        try:
            paid = create_outputs([i.outpoint for i in inputs], keys, recipients)
        except SendError:  # no eligible key: the tx pays only unrelated outputs
            paid = []
        outputs = paid + [_unrelated(rng) for _ in range(rng.randint(0, 3))]
        rng.shuffle(outputs)
        if not outputs:
            outputs = [_unrelated(rng)]
        txs.append(GenTx(inputs, keys, recipients, outputs, kinds))
    return txs
