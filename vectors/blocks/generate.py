"""Build the sample blocks in this folder, deterministically.

Every transaction is really signed (ECDSA for legacy and BIP143 inputs,
BIP340 over the BIP341 SigMsg for taproot) and spends invented "funding"
outputs, which are written in Bitcoin Core's REST spent-outputs format.
Outputs pay the test wallet of README.md; the expected files record what
the sender side paid it and the tweak input_hash·A of every silent-payments
transaction, both computed from the private keys.

Usage (from the repository root):
    python vectors/blocks/generate.py            # small and mainnet
    python vectors/blocks/generate.py --small    # small only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bitcoin.core import (
    COutPoint,
    CBlock,
    CMutableTransaction,
    CMutableTxIn,
    CTxInWitness,
    CTxOut,
    CTxWitness,
    b2lx,
)
from bitcoin.core.script import (
    OP_0,
    OP_1,
    OP_2,
    OP_3,
    OP_CHECKMULTISIG,
    OP_CHECKSIG,
    OP_DROP,
    OP_DUP,
    OP_ELSE,
    OP_ENDIF,
    OP_EQUAL,
    OP_EQUALVERIFY,
    OP_HASH160,
    OP_IF,
    OP_RETURN,
    SIGHASH_ALL,
    SIGVERSION_WITNESS_V0,
    CScript,
    CScriptWitness,
    SignatureHash,
)
from coincurve import PrivateKey, PublicKey

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from sp_scan.address import SPAddress, labelled_spend_pubkey  # noqa: E402
from sp_scan.send import InputKey, create_outputs  # noqa: E402
from sp_scan.types import OutPoint  # noqa: E402

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
NUMS_H = bytes.fromhex("50929b74c1a04954b78b4b6035e97a5e078a5a0f28ec96d547bfee9ace803ac0")
SCHNORR_AUX = hashlib.sha256(b"sp-scan sample blocks aux").digest()
TAPLEAF_VERSION = 0xC0
SEQUENCE = 0xFFFFFFFD
WORST_CASE_DUMMIES = 291
MAX_SCRIPT_SIZE = 10_000

# The test wallet: test-only keys, derived from fixed strings.
WALLET_SCAN_KEY = hashlib.sha256(b"sp-scan test wallet: scan key").digest()
WALLET_SPEND_KEY = hashlib.sha256(b"sp-scan test wallet: spend key").digest()
WALLET_LABELS = (1, 7)
WALLET_SCAN_PUBKEY = PublicKey.from_secret(WALLET_SCAN_KEY).format()
WALLET_SPEND_PUBKEY = PublicKey.from_secret(WALLET_SPEND_KEY).format()
# Another receiver, so that some SP outputs are not ours.
OTHER_SCAN_KEY = hashlib.sha256(b"sp-scan sample blocks: other wallet scan key").digest()
OTHER_SPEND_KEY = hashlib.sha256(b"sp-scan sample blocks: other wallet spend key").digest()


def tagged_hash(tag: str, msg: bytes) -> bytes:
    t = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(t + t + msg).digest()


def hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


def compact_size(n: int) -> bytes:
    if n < 0xFD:
        return bytes([n])
    if n <= 0xFFFF:
        return b"\xfd" + struct.pack("<H", n)
    if n <= 0xFFFFFFFF:
        return b"\xfe" + struct.pack("<I", n)
    return b"\xff" + struct.pack("<Q", n)


class Drbg:
    """SHA256 in counter mode: the same bytes on every platform and Python version."""

    def __init__(self, seed: str) -> None:
        self._seed = hashlib.sha256(seed.encode()).digest()
        self._counter = 0

    def bytes(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
        return out[:n]

    def below(self, n: int) -> int:
        return int.from_bytes(self.bytes(8), "big") % n

    def between(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def weighted(self, table: dict):
        pick = self.below(sum(table.values()))
        for item, weight in table.items():
            pick -= weight
            if pick < 0:
                return item
        raise AssertionError

    def shuffle(self, items: list) -> None:
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]

    def key(self) -> PrivateKey:
        while True:
            secret = self.bytes(32)
            if 0 < int.from_bytes(secret, "big") < N:
                return PrivateKey(secret)


# --- scripts --------------------------------------------------------------------


def p2pkh_script(pub: bytes) -> CScript:
    return CScript([OP_DUP, OP_HASH160, hash160(pub), OP_EQUALVERIFY, OP_CHECKSIG])


def p2wpkh_script(pub: bytes) -> CScript:
    return CScript([OP_0, hash160(pub)])


def p2sh_script(redeem: bytes) -> CScript:
    return CScript([OP_HASH160, hash160(redeem), OP_EQUAL])


def p2wsh_script(witness_script: bytes) -> CScript:
    return CScript([OP_0, hashlib.sha256(witness_script).digest()])


def p2tr_script(x32: bytes) -> CScript:
    return CScript([OP_1, x32])


def ecdsa(key: PrivateKey, sighash: bytes) -> bytes:
    """DER, low-S (libsecp256k1 normalizes), plus SIGHASH_ALL."""
    return key.sign(sighash, hasher=None) + bytes([SIGHASH_ALL])


# --- BIP341 ---------------------------------------------------------------------


def taproot_sighash(tx: CMutableTransaction, index: int, spent: list[CTxOut], annex: bytes | None = None, leaf_hash: bytes | None = None) -> bytes:
    """BIP341 signature hash for SIGHASH_DEFAULT, key path or (with leaf_hash) BIP342 script path."""
    sha = lambda b: hashlib.sha256(b).digest()  # noqa: E731
    msg = bytes([0x00, 0x00])  # epoch, hash_type SIGHASH_DEFAULT
    msg += struct.pack("<iI", tx.nVersion, tx.nLockTime)
    msg += sha(b"".join(i.prevout.serialize() for i in tx.vin))
    msg += sha(b"".join(struct.pack("<q", o.nValue) for o in spent))
    msg += sha(b"".join(compact_size(len(o.scriptPubKey)) + bytes(o.scriptPubKey) for o in spent))
    msg += sha(b"".join(struct.pack("<I", i.nSequence) for i in tx.vin))
    msg += sha(b"".join(o.serialize() for o in tx.vout))
    msg += bytes([(2 if leaf_hash else 0) + (1 if annex else 0)]) + struct.pack("<I", index)
    if annex:
        msg += sha(compact_size(len(annex)) + annex)
    if leaf_hash:
        msg += leaf_hash + b"\x00" + b"\xff\xff\xff\xff"
    return tagged_hash("TapSighash", msg)


def tapleaf_hash(script: bytes) -> bytes:
    return tagged_hash("TapLeaf", bytes([TAPLEAF_VERSION]) + compact_size(len(script)) + script)


def tapbranch_hash(a: bytes, b: bytes) -> bytes:
    return tagged_hash("TapBranch", min(a, b) + max(a, b))


def taproot_output(internal_x32: bytes, merkle_root: bytes) -> tuple[bytes, int, bytes]:
    """Return (output x-only key, its Y parity, tweak t) for an internal key and tree root."""
    tweak = tagged_hash("TapTweak", internal_x32 + merkle_root)
    q = PublicKey(b"\x02" + internal_x32).add(tweak).format()
    return q[1:], q[0] & 1, tweak


def taproot_private_key(internal: PrivateKey, tweak: bytes) -> bytes:
    d = internal.to_int()
    if internal.public_key.format()[0] == 3:
        d = N - d
    return ((d + int.from_bytes(tweak, "big")) % N).to_bytes(32, "big")


# --- inputs ---------------------------------------------------------------------

ELIGIBLE_KINDS = {
    "p2pkh",
    "p2pkh-malleated-if",
    "p2pkh-malleated-drop",
    "p2pkh-worst-case",
    "p2sh-p2wpkh",
    "p2wpkh",
    "p2tr-key",
    "p2tr-key-annex",
    "p2tr-script",
    "p2tr-script-inscription",
}
INELIGIBLE_KINDS = {
    "p2tr-script-nums",
    "p2tr-script-nums-annex",
    "p2wsh",
    "p2sh-multisig",
    "p2pk",
    "bare-multisig",
    "p2pkh-uncompressed",
    "segwit-v2",
}


@dataclass
class Spend:
    """One input: the funding output it spends, and how to sign it."""

    kind: str
    outpoint: COutPoint
    prevout: CTxOut
    sp_key: InputKey | None  # the sender's BIP352 key, None when ineligible
    keys: list[PrivateKey] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def inscription_envelope(rng: Drbg, size: int) -> bytes:
    """An ordinals-style `OP_0 OP_IF "ord" ... OP_ENDIF` envelope carrying `size` bytes in 520-byte pushes."""
    data = rng.bytes(size)
    chunks = [data[i : i + 520] for i in range(0, size, 520)]
    return bytes(CScript([OP_0, OP_IF, b"ord", b"\x01", b"text/plain;charset=utf-8", OP_0, *chunks, OP_ENDIF]))


def make_spend(rng: Drbg, kind: str, value: int, txid32: bytes | None = None, inscription_size: int = 1_000) -> Spend:
    """Invent a funding output of `kind` worth `value` and the keys to spend it."""
    outpoint = COutPoint(txid32 or rng.bytes(32), rng.below(4))
    k = rng.key()
    pub = k.public_key.format()
    extra: dict = {}
    keys = [k]
    sp_key: InputKey | None = None
    if kind.startswith("p2pkh") and kind != "p2pkh-uncompressed":
        script, sp_key = p2pkh_script(pub), InputKey(k.secret, False)
        if kind.startswith("p2pkh-malleated"):
            extra["other"] = rng.key().public_key.format()
    elif kind == "p2pkh-uncompressed":
        script = p2pkh_script(k.public_key.format(compressed=False))
    elif kind == "p2wpkh":
        script, sp_key = p2wpkh_script(pub), InputKey(k.secret, False)
    elif kind == "p2sh-p2wpkh":
        script, sp_key = p2sh_script(p2wpkh_script(pub)), InputKey(k.secret, False)
    elif kind in ("p2tr-key", "p2tr-key-annex"):
        x, _, tweak = taproot_output(pub[1:], b"")
        script, sp_key = p2tr_script(x), InputKey(taproot_private_key(k, tweak), True)
        extra["tweaked"] = PrivateKey(taproot_private_key(k, tweak))
        if kind.endswith("annex"):
            extra["annex"] = b"\x50" + rng.bytes(rng.between(1, 40))
    elif kind.startswith("p2tr-script"):
        leaf_key = rng.key()
        leaf = bytes(CScript([leaf_key.public_key.format()[1:], OP_CHECKSIG]))
        if kind == "p2tr-script-inscription":
            leaf += inscription_envelope(rng, inscription_size)
        leaf_h = tapleaf_hash(leaf)
        if kind == "p2tr-script-inscription":
            internal_x, path, root = pub[1:], b"", leaf_h
        elif kind == "p2tr-script":
            sibling = tapleaf_hash(bytes(CScript([rng.key().public_key.format()[1:], OP_CHECKSIG])))
            internal_x, path, root = pub[1:], sibling, tapbranch_hash(leaf_h, sibling)
        else:
            internal_x, path, root = NUMS_H, b"", leaf_h
        x, parity, tweak = taproot_output(internal_x, root)
        script = p2tr_script(x)
        if kind in ("p2tr-script", "p2tr-script-inscription"):
            sp_key = InputKey(taproot_private_key(k, tweak), True)
        extra.update(leaf=leaf, leaf_hash=leaf_h, control=bytes([TAPLEAF_VERSION | parity]) + internal_x + path, leaf_key=leaf_key)
        if kind.endswith("annex"):
            extra["annex"] = b"\x50" + rng.bytes(rng.between(1, 40))
    elif kind == "p2wsh":
        keys = [k, rng.key()]
        ws = CScript([OP_2, *(x.public_key.format() for x in keys), OP_2, OP_CHECKMULTISIG])
        script, extra["witness_script"] = p2wsh_script(ws), ws
    elif kind == "p2sh-multisig":
        keys = [k, rng.key(), rng.key()]
        redeem = CScript([OP_2, *(x.public_key.format() for x in keys), OP_3, OP_CHECKMULTISIG])
        script, extra["redeem"] = p2sh_script(redeem), redeem
    elif kind == "p2pk":
        script = CScript([pub, OP_CHECKSIG])
    elif kind == "bare-multisig":
        keys = [k, rng.key()]
        script = CScript([OP_1, *(x.public_key.format() for x in keys), OP_2, OP_CHECKMULTISIG])
    elif kind == "segwit-v2":
        script = CScript([OP_2, rng.bytes(32)])
        extra["witness"] = [rng.bytes(64)]
    else:
        raise ValueError(kind)
    return Spend(kind, outpoint, CTxOut(value, script), sp_key, keys, extra)


def sign_input(tx: CMutableTransaction, i: int, spends: list[Spend]) -> tuple[CScript, list[bytes]]:
    """Return (scriptSig, witness stack) for input i."""
    s = spends[i]
    spent = [x.prevout for x in spends]
    k, e, spk, value = s.keys[0], s.extra, s.prevout.scriptPubKey, s.prevout.nValue
    pub = k.public_key.format()
    legacy = lambda code: SignatureHash(code, tx, i, SIGHASH_ALL)  # noqa: E731
    bip143 = lambda code: SignatureHash(code, tx, i, SIGHASH_ALL, value, SIGVERSION_WITNESS_V0)  # noqa: E731
    if s.kind == "p2pkh":
        return CScript([ecdsa(k, legacy(spk)), pub]), []
    if s.kind == "p2pkh-malleated-if":
        # The executed branch pushes our key; the last 33-byte push is another key.
        sig = ecdsa(k, legacy(spk))
        return CScript([OP_1, OP_IF, sig, pub, OP_ELSE, sig, e["other"], OP_ENDIF]), []
    if s.kind == "p2pkh-malleated-drop":
        return CScript([ecdsa(k, legacy(spk)), pub, e["other"], OP_DROP]), []
    if s.kind == "p2pkh-worst-case":
        sig = ecdsa(k, legacy(spk))
        script = CScript([b"\x02" * 33] * WORST_CASE_DUMMIES + [sig, pub])
        return script, []
    if s.kind == "p2pkh-uncompressed":
        return CScript([ecdsa(k, legacy(spk)), k.public_key.format(compressed=False)]), []
    if s.kind == "p2wpkh":
        return CScript(), [ecdsa(k, bip143(p2pkh_script(pub))), pub]
    if s.kind == "p2sh-p2wpkh":
        return CScript([p2wpkh_script(pub)]), [ecdsa(k, bip143(p2pkh_script(pub))), pub]
    if s.kind in ("p2tr-key", "p2tr-key-annex"):
        annex = e.get("annex")
        sig = e["tweaked"].sign_schnorr(taproot_sighash(tx, i, spent, annex), SCHNORR_AUX)
        return CScript(), [sig] + ([annex] if annex else [])
    if s.kind.startswith("p2tr-script"):
        annex = e.get("annex")
        sig = e["leaf_key"].sign_schnorr(taproot_sighash(tx, i, spent, annex, e["leaf_hash"]), SCHNORR_AUX)
        return CScript(), [sig, e["leaf"], e["control"]] + ([annex] if annex else [])
    if s.kind == "p2wsh":
        ws = e["witness_script"]
        return CScript(), [b"", *(ecdsa(x, bip143(ws)) for x in s.keys), bytes(ws)]
    if s.kind == "p2sh-multisig":
        redeem = e["redeem"]
        return CScript([OP_0, *(ecdsa(x, legacy(redeem)) for x in s.keys[:2]), redeem]), []
    if s.kind == "p2pk":
        return CScript([ecdsa(k, legacy(spk))]), []
    if s.kind == "bare-multisig":
        return CScript([OP_0, ecdsa(k, legacy(spk))]), []
    if s.kind == "segwit-v2":
        return CScript(), list(e["witness"])  # an unknown witness version: anything is valid
    raise ValueError(s.kind)


# --- outputs and transactions -----------------------------------------------------


@dataclass
class Pay:
    """An output to create: an SP recipient (wallet label or another wallet) or a plain script."""

    value: int
    script: CScript | None = None
    sp: str | None = None  # "wallet" or "other"
    label: int | None = None  # for "wallet": None (unlabelled) or m


def wallet_address(label: int | None) -> SPAddress:
    spend = WALLET_SPEND_PUBKEY if label is None else labelled_spend_pubkey(WALLET_SCAN_KEY, WALLET_SPEND_PUBKEY, label)
    return SPAddress("sp", 0, WALLET_SCAN_PUBKEY, spend)


def other_address() -> SPAddress:
    return SPAddress("sp", 0, PublicKey.from_secret(OTHER_SCAN_KEY).format(), PublicKey.from_secret(OTHER_SPEND_KEY).format())


def sender_tweak(spends: list[Spend]) -> bytes | None:
    """input_hash·A computed from the private keys: the sender's view of the tweak."""
    a = 0
    for s in spends:
        if s.sp_key is None:
            continue
        d = int.from_bytes(s.sp_key.private_key32, "big")
        if s.sp_key.is_taproot and PrivateKey(s.sp_key.private_key32).public_key.format()[0] == 3:
            d = N - d
        a = (a + d) % N
    if a == 0:
        return None
    a_pub = PrivateKey.from_int(a).public_key.format()
    smallest = min(s.outpoint.serialize() for s in spends)
    input_hash = tagged_hash("BIP0352/Inputs", smallest + a_pub)
    return PrivateKey.from_int(a * int.from_bytes(input_hash, "big") % N).public_key.format()


@dataclass
class BuiltTx:
    name: str
    tx: CMutableTransaction
    spends: list[Spend]
    paid: list[dict]  # outputs paying the wallet: vout, amount, output, label
    tweak: bytes | None  # None when the tx is not an SP tx (or has no taproot output)


def build_tx(rng: Drbg, name: str, spends: list[Spend], pays: list[Pay], decoy: bool = False) -> BuiltTx:
    """Create, order and sign one transaction.

    SP outputs are derived from the eligible inputs' keys with
    sp_scan.send.create_outputs. With decoy=True (the segwit v2 case) they are
    derived although the tx is not eligible, so a scanner must not find them.
    """
    outpoints = [OutPoint(s.outpoint.hash, s.outpoint.n) for s in spends]
    input_keys = [s.sp_key for s in spends if s.sp_key is not None]
    sp_pays = [p for p in pays if p.sp]
    if sp_pays:
        recipients = [wallet_address(p.label) if p.sp == "wallet" else other_address() for p in sp_pays]
        for p, x in zip(sp_pays, create_outputs(outpoints, input_keys, recipients)):
            p.script = p2tr_script(x)
    order = list(range(len(pays)))
    rng.shuffle(order)
    pays = [pays[j] for j in order]
    tx = CMutableTransaction(
        [CMutableTxIn(s.outpoint, nSequence=SEQUENCE) for s in spends],
        [CTxOut(p.value, p.script) for p in pays],
        nLockTime=0,
        nVersion=2,
    )
    worst = [i for i, s in enumerate(spends) if s.kind == "p2pkh-worst-case"]
    while True:
        scripts = [sign_input(tx, i, spends) for i in range(len(spends))]
        # Grind nLockTime until the worst-case scriptSig is exactly MAX_SCRIPT_SIZE.
        if all(len(scripts[i][0]) == MAX_SCRIPT_SIZE for i in worst):
            break
        tx.nLockTime += 1
    for txin, (script_sig, _) in zip(tx.vin, scripts):
        txin.scriptSig = script_sig
    if any(w for _, w in scripts):
        tx.wit = CTxWitness([CTxInWitness(CScriptWitness(w)) for _, w in scripts])
    has_taproot = any(len(o.scriptPubKey) == 34 and o.scriptPubKey[:2] == b"\x51\x20" for o in tx.vout)
    ineligible = any(s.kind == "segwit-v2" for s in spends) or not has_taproot
    tweak = None if ineligible else sender_tweak(spends)
    paid = []
    if not ineligible and not decoy:
        for vout, p in enumerate(pays):
            if p.sp == "wallet":
                paid.append({"vout": vout, "amount": p.value, "output": bytes(p.script[2:]).hex(), "label": p.label})
    return BuiltTx(name, tx, spends, paid, tweak)


def plain_script(rng: Drbg, kind: str) -> CScript:
    if kind == "p2wpkh":
        return p2wpkh_script(rng.key().public_key.format())
    if kind == "p2tr":
        return p2tr_script(rng.key().public_key.format()[1:])
    if kind == "p2pkh":
        return p2pkh_script(rng.key().public_key.format())
    if kind == "p2sh":
        return p2sh_script(rng.bytes(22))
    if kind == "p2wsh":
        return CScript([OP_0, rng.bytes(32)])
    if kind == "op_return":
        return CScript([OP_RETURN, rng.bytes(rng.between(8, 80))])
    raise ValueError(kind)


DUST = 600


def split(rng: Drbg, total: int, parts: int) -> list[int]:
    """Split `total` satoshis into `parts` amounts of at least DUST each."""
    spare = total - DUST * parts
    cuts = sorted(rng.between(0, spare) for _ in range(parts - 1))
    edges = [0, *cuts, spare]
    return [DUST + b - a for a, b in zip(edges, edges[1:])]


def make_pays(rng: Drbg, total: int, outs: list[tuple]) -> list[Pay]:
    """Pay `total` less a random fee to `outs`: ("wallet", m|None), ("other",), ("op_return",) or (plain kind,)."""
    fee = rng.between(500, 20_000)
    values = split(rng, total - fee, len(outs))
    pays = []
    for value, out in zip(values, outs):
        if out[0] == "op_return":
            pays.append(Pay(0, plain_script(rng, "op_return")))
            continue
        if out[0] == "wallet":
            pays.append(Pay(value, sp="wallet", label=out[1]))
        elif out[0] == "other":
            pays.append(Pay(value, sp="other"))
        else:
            pays.append(Pay(value, plain_script(rng, out[0])))
    return pays


def spend_and_pay(
    rng: Drbg, name: str, kinds: list[str], outs: list[tuple], decoy: bool = False, txids: dict | None = None, inscription_size: int = 1_000
) -> BuiltTx:
    """Spend one invented funding output per kind and pay `outs` (as `make_pays`)."""
    spends = [
        make_spend(rng, kind, rng.between(100_000, 5_000_000), (txids or {}).get(i), inscription_size) for i, kind in enumerate(kinds)
    ]
    return build_tx(rng, name, spends, make_pays(rng, sum(s.prevout.nValue for s in spends), outs), decoy)


# --- blocks -----------------------------------------------------------------------

SUBSIDY = 312_500_000


def coinbase(rng: Drbg, height: int, fees: int) -> CMutableTransaction:
    script_sig = CScript([height]) + rng.bytes(12)
    tx = CMutableTransaction(
        [CMutableTxIn(COutPoint(), script_sig, 0xFFFFFFFF)],
        [CTxOut(SUBSIDY + fees, p2wpkh_script(rng.key().public_key.format()))],
        nVersion=2,
    )
    tx.wit = CTxWitness([CTxInWitness(CScriptWitness([b"\x00" * 32]))])
    return tx


def assemble(rng: Drbg, height: int, txs: list[BuiltTx]) -> tuple[bytes, bytes]:
    """Return (serialized block, spent outputs in Core's REST format)."""
    fees = sum(sum(s.prevout.nValue for s in t.spends) - sum(o.nValue for o in t.tx.vout) for t in txs)
    cb = coinbase(rng, height, fees)
    vtx = [cb] + [t.tx for t in txs]
    witness_root = CBlock.build_witness_merkle_tree_from_txs(vtx)[-1]
    commitment = hashlib.sha256(hashlib.sha256(witness_root + b"\x00" * 32).digest()).digest()
    cb.vout.append(CTxOut(0, CScript([OP_RETURN, bytes.fromhex("aa21a9ed") + commitment])))
    block = CBlock(nVersion=0x20000000, hashPrevBlock=rng.bytes(32), nTime=1_767_225_600 + height, nBits=0x17023A04, nNonce=0, vtx=vtx)
    spent = compact_size(len(vtx)) + compact_size(0)
    for t in txs:
        spent += compact_size(len(t.spends)) + b"".join(s.prevout.serialize() for s in t.spends)
    return block.serialize(), spent


def expected(block: bytes, height: int, txs: list[BuiltTx], with_kinds: bool) -> dict:
    out: dict = {
        "block_hash": b2lx(hashlib.sha256(hashlib.sha256(block[:80]).digest()).digest()),
        "height": height,
        "wallet": {"scan_key_file": "test-wallet.scan", "spend_pubkey": WALLET_SPEND_PUBKEY.hex(), "labels": list(WALLET_LABELS)},
        "found": [{"txid": b2lx(t.tx.GetTxid()), **p} for t in txs for p in sorted(t.paid, key=lambda p: p["vout"])],
        "tweaks": [{"txid": b2lx(t.tx.GetTxid()), "tweak": t.tweak.hex()} for t in txs if t.tweak is not None],
    }
    if with_kinds:
        out["transactions"] = [
            {"txid": b2lx(t.tx.GetTxid()), "name": t.name, "inputs": [s.kind for s in t.spends], "sp": t.tweak is not None} for t in txs
        ]
    else:
        counts: dict[str, int] = {}
        for t in txs:
            for s in t.spends:
                counts[s.kind] = counts.get(s.kind, 0) + 1
        out["input_kinds"] = dict(sorted(counts.items()))
    return out


SMALL_HEIGHT = 900_000


def small_txs(rng: Drbg) -> list[BuiltTx]:
    """A handful of transactions, one per case of the README table."""
    low = {0: b"\x00" + rng.bytes(31)}  # gives the ineligible first input the smallest outpoint
    return [
        spend_and_pay(rng, "p2pkh", ["p2pkh"], [("wallet", None), ("p2wpkh",)]),
        spend_and_pay(rng, "malleated-p2pkh", ["p2pkh-malleated-if", "p2pkh-malleated-drop"], [("wallet", 1), ("p2tr",)]),
        spend_and_pay(rng, "worst-case-p2pkh", ["p2pkh-worst-case"], [("wallet", None)]),
        spend_and_pay(rng, "p2sh-p2wpkh", ["p2sh-p2wpkh", "p2wpkh"], [("wallet", 7), ("op_return",), ("p2wpkh",)]),
        spend_and_pay(rng, "p2tr-key-path", ["p2tr-key", "p2tr-key"], [("wallet", None), ("wallet", None), ("wallet", 0), ("p2tr",)]),
        spend_and_pay(rng, "p2tr-script-path", ["p2tr-script"], [("wallet", 1), ("wallet", 7)]),
        spend_and_pay(rng, "nums-script-path", ["p2tr-script-nums", "p2wpkh"], [("wallet", None), ("p2wpkh",)]),
        spend_and_pay(rng, "annex", ["p2tr-key-annex", "p2tr-script-nums-annex"], [("wallet", 0)]),
        spend_and_pay(
            rng, "ineligible-mixed", ["p2pk", "p2wsh", "p2sh-multisig", "bare-multisig", "p2wpkh"], [("wallet", None), ("other",), ("p2pkh",)], txids=low
        ),
        spend_and_pay(rng, "ineligible-only", ["p2wsh", "p2pk", "bare-multisig", "p2pkh-uncompressed"], [("p2tr",), ("p2wpkh",)]),
        spend_and_pay(rng, "segwit-v2-spend", ["p2wpkh", "segwit-v2"], [("wallet", None), ("p2wpkh",)], decoy=True),
        spend_and_pay(rng, "no-taproot-output", ["p2wpkh"], [("p2wpkh",), ("op_return",)]),
        spend_and_pay(rng, "unrelated", ["p2tr-key", "p2pkh"], [("p2tr",), ("p2wpkh",)]),
        spend_and_pay(rng, "other-wallet", ["p2wpkh"], [("other",), ("p2tr",)]),
        spend_and_pay(rng, "inscription", ["p2tr-script-inscription"], [("wallet", None)], inscription_size=1_200),
    ]


def build_small() -> tuple[bytes, bytes, dict]:
    """Return (block, spent outputs, expected) for small.hex."""
    rng = Drbg("sp-scan sample block: small")
    txs = small_txs(rng)
    block, spent = assemble(rng, SMALL_HEIGHT, txs)
    return block, spent, expected(block, SMALL_HEIGHT, txs, with_kinds=True)


MAINNET_HEIGHT = 930_000
MAINNET_TXS = 3_000
INPUT_KINDS = {
    "p2wpkh": 440,
    "p2tr-key": 250,
    "p2pkh": 40,
    "p2sh-p2wpkh": 80,
    "p2wsh": 60,
    "p2sh-multisig": 10,
    "p2tr-script": 30,
    "p2tr-script-nums": 6,
    "p2pkh-malleated-drop": 2,
    "p2pkh-malleated-if": 2,
    "p2tr-key-annex": 2,
    "p2pk": 3,
    "bare-multisig": 3,
    "p2pkh-uncompressed": 3,
}
OUTPUT_KINDS = {"p2wpkh": 45, "p2tr": 27, "p2pkh": 10, "p2sh": 10, "p2wsh": 6, "op_return": 2}
INPUT_COUNTS = {1: 62, 2: 20, 3: 7, 4: 4, 5: 3, 8: 2, 15: 1, 30: 1}
OUTPUT_COUNTS = {1: 25, 2: 62, 3: 7, 5: 3, 10: 2, 25: 1}
WALLET_TXS = 40
WORST_CASE_TXS = 4
SEGWIT_V2_TXS = 3
INSCRIPTION_TXS = 30


def mainnet_txs(rng: Drbg) -> list[BuiltTx]:
    """About 3,000 transactions of a realistic mix; a few dozen pay the wallet."""
    slots = ["plain"] * (MAINNET_TXS - WALLET_TXS - WORST_CASE_TXS - SEGWIT_V2_TXS - INSCRIPTION_TXS)
    slots += ["wallet"] * WALLET_TXS + ["worst"] * WORST_CASE_TXS + ["v2"] * SEGWIT_V2_TXS + ["inscription"] * INSCRIPTION_TXS
    rng.shuffle(slots)
    txs = []
    for n, slot in enumerate(slots):
        kinds = [rng.weighted(INPUT_KINDS) for _ in range(rng.weighted(INPUT_COUNTS))]
        outs = [(rng.weighted(OUTPUT_KINDS),) for _ in range(rng.weighted(OUTPUT_COUNTS))]
        if slot == "worst":
            kinds = ["p2pkh-worst-case"]
        elif slot == "inscription":
            kinds, outs = ["p2tr-script-inscription"], [("p2tr",)]
        elif slot == "v2":
            kinds = ["segwit-v2", *kinds]
        if slot == "wallet":
            if not any(k in ELIGIBLE_KINDS for k in kinds):
                kinds[0] = "p2wpkh"
            labels = [None, None, 1, 7, 0]
            outs[: rng.between(1, 3)] = [("wallet", labels[rng.below(len(labels))]) for _ in range(rng.between(1, 3))]
        elif slot in ("worst", "v2") or rng.below(100) < 2:
            outs[0] = ("other",)
        if slot != "wallet" and rng.below(100) < 2:
            outs.append(("other",))
        if outs[0][0] == "op_return":
            outs[0] = ("p2tr",)
        if any(o[0] in ("wallet", "other") for o in outs) and not any(k in ELIGIBLE_KINDS for k in kinds):
            kinds[-1] = "p2wpkh"
        size = rng.between(2_000, 40_000) if slot == "inscription" else 0
        txs.append(spend_and_pay(rng, f"tx{n}-{slot}", kinds, outs, decoy=slot == "v2", inscription_size=size))
    return txs


def build_mainnet() -> tuple[bytes, bytes, dict]:
    """Return (block, spent outputs, expected) for mainnet.bin."""
    rng = Drbg("sp-scan sample block: mainnet")
    txs = mainnet_txs(rng)
    block, spent = assemble(rng, MAINNET_HEIGHT, txs)
    return block, spent, expected(block, MAINNET_HEIGHT, txs, with_kinds=False)


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only regenerate the small block")
    args = parser.parse_args()
    block, spent, exp = build_small()
    (HERE / "small.hex").write_text(block.hex() + "\n")
    (HERE / "small.spent.hex").write_text(spent.hex() + "\n")
    write_json(HERE / "small.expected.json", exp)
    (HERE / "test-wallet.scan").write_text(WALLET_SCAN_KEY.hex() + "\n")
    (HERE / "test-wallet.spend").write_text(WALLET_SPEND_KEY.hex() + "\n")
    print(f"small: {len(block)} bytes, {len(exp['tweaks'])} SP txs, {len(exp['found'])} outputs to the wallet")
    if args.small:
        return
    block, spent, exp = build_mainnet()
    (HERE / "mainnet.bin").write_bytes(block)
    (HERE / "mainnet.spent.bin").write_bytes(spent)
    write_json(HERE / "mainnet.expected.json", exp)
    weight = CBlock.deserialize(block).GetWeight()
    print(f"mainnet: {len(block)} bytes, weight {weight}, {len(exp['tweaks'])} SP txs, {len(exp['found'])} outputs to the wallet")


if __name__ == "__main__":
    main()
