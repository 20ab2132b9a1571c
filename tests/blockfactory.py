"""Small test blocks built with python-bitcoinlib from the official vectors' receiving cases.

Each non-coinbase transaction takes a vector's `vin` (outpoints, scriptSigs,
witnesses) and pays its taproot `outputs` (plus one P2WPKH output, so that
vouts are not just taproot); its prevouts are the vector's prevout scripts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from decimal import Decimal

from bitcoin.core import COutPoint, CBlock, CMutableTransaction, CScript, CScriptWitness, CTxIn, CTxInWitness, CTxOut, CTxWitness, lx

from conftest import CASES, RECEIVING
from sp_scan.wire import TxOut, parse_witness, serialize_spent

P2WPKH_FILLER = bytes.fromhex("0014") + hashlib.sha256(b"filler").digest()[:20]
P2TR_G = bytes.fromhex("5120" "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")  # pays the generator's x


@dataclass
class TestBlock:
    """A block, its spent outputs and what the vectors say about each transaction."""

    raw: bytes
    spent: list[list[TxOut]]
    txs: list[CMutableTransaction]
    cases: list[dict] = field(default_factory=list)  # receiving object per non-coinbase tx
    header: CBlock | None = None

    @property
    def spent_bytes(self) -> bytes:
        return serialize_spent(self.spent)

    @property
    def hash_hex(self) -> str:
        return self.header.GetHash()[::-1].hex()


def amount(n: int, vout: int) -> int:
    return 1000 * (n + 1) + vout


def coinbase(height: int) -> CMutableTransaction:
    script = CScript(bytes([3]) + height.to_bytes(3, "little"))
    tx = CMutableTransaction([CTxIn(COutPoint(), script, 0xFFFFFFFF)], [CTxOut(50 * 10**8, CScript(P2WPKH_FILLER))])
    return tx


def vector_tx(n: int, receiving: dict) -> tuple[CMutableTransaction, list[TxOut]]:
    given = receiving["given"]
    vins, wits, prevouts = [], [], []
    for j, v in enumerate(given["vin"]):
        vins.append(CTxIn(COutPoint(lx(v["txid"]), v["vout"]), CScript(bytes.fromhex(v["scriptSig"])), 0xFFFFFFFD))
        wits.append(CTxInWitness(CScriptWitness(list(parse_witness(bytes.fromhex(v["txinwitness"]))))))
        prevouts.append(TxOut(amount(n, 100 + j), bytes.fromhex(v["prevout"]["scriptPubKey"]["hex"])))
    outs = [CTxOut(amount(n, 0), CScript(P2WPKH_FILLER))]
    outs += [CTxOut(amount(n, k + 1), CScript(b"\x51\x20" + bytes.fromhex(x))) for k, x in enumerate(given["outputs"])]
    tx = CMutableTransaction(vins, outs, nLockTime=0, nVersion=2)
    if any(w.scriptWitness.stack for w in wits):
        tx.wit = CTxWitness(wits)
    return tx, prevouts


def build(receivings: list[dict], height: int = 1, prev: bytes = b"\x00" * 32, nonce: int | None = None) -> TestBlock:
    """A block with a coinbase, then one transaction per receiving object."""
    txs, spent = [], []
    for n, r in enumerate(receivings):
        tx, prevouts = vector_tx(n, r)
        txs.append(tx)
        spent.append(prevouts)
    tb = assemble(txs, spent, height, prev, nonce)
    tb.cases = list(receivings)
    return tb


def assemble(txs: list[CMutableTransaction], spent: list[list[TxOut]], height: int, prev: bytes, nonce: int | None = None) -> TestBlock:
    """A block of a coinbase then `txs` (whose inputs spend `spent`); nonce defaults to the height."""
    txs, spent = [coinbase(height), *txs], [[], *spent]
    nonce = height if nonce is None else nonce
    blk = CBlock(nVersion=0x20000000, hashPrevBlock=prev, nTime=1_700_000_000 + height, nBits=0x207FFFFF, nNonce=nonce, vtx=txs)
    blk = CBlock(nVersion=blk.nVersion, hashPrevBlock=prev, hashMerkleRoot=blk.calc_merkle_root(), nTime=blk.nTime, nBits=blk.nBits, nNonce=blk.nNonce, vtx=txs)
    return TestBlock(blk.serialize(), spent, txs, [], blk)


def taproot_outputs(tb: TestBlock) -> list[tuple[bytes, int, TxOut]]:
    """(txid32, vout, output) of every P2TR output of the block's non-coinbase txs, in block order."""
    return [
        (tx.GetTxid(), vout, TxOut(o.nValue, bytes(o.scriptPubKey)))
        for tx in tb.txs[1:]
        for vout, o in enumerate(tx.vout)
        if bytes(o.scriptPubKey)[:2] == b"\x51\x20" and len(o.scriptPubKey) == 34
    ]


def spend_tx(n: int, prevouts: list[tuple[bytes, int, TxOut]]) -> tuple[CMutableTransaction, list[TxOut]]:
    """A tx spending taproot outputs by key path (dummy signatures), paying one P2WPKH and two P2TR outputs.

    It is eligible (its inputs give keys) and has a taproot output, so an index keeps it.
    """
    vins = [CTxIn(COutPoint(txid32, vout), CScript(), 0xFFFFFFFD) for txid32, vout, _ in prevouts]
    payee = prevouts[0][2].script  # any valid x-only key will do: pay back to the first spent output's key
    outs = [CTxOut(amount(n, 0), CScript(P2WPKH_FILLER)), CTxOut(amount(n, 1), CScript(payee)), CTxOut(amount(n, 2), CScript(P2TR_G))]
    tx = CMutableTransaction(vins, outs, nLockTime=n, nVersion=2)
    tx.wit = CTxWitness([CTxInWitness(CScriptWitness([bytes([n % 256]) * 64])) for _ in prevouts])
    return tx, [o for _, _, o in prevouts]


def receiving_cases(exclude_kmax: bool = True) -> list[dict]:
    """Every receiving object of the vectors, optionally without case 27 (2324 outputs)."""
    return [r for n, r in RECEIVING if not (exclude_kmax and "n_outputs" in r["expected"])]


def wallet_cases() -> list[dict]:
    """Receiving objects that share one key set (cases 0..), for scanning a whole block with one wallet."""
    first = CASES[0]["receiving"][0]["given"]["key_material"]
    return [r for r in receiving_cases() if r["given"]["key_material"] == first and not r["given"]["labels"]]


def getblock3(tb: TestBlock, height: int = 1) -> dict:
    """The `getblock <hash> 3` JSON Core would return for this block (fields sp-scan reads, plus a few)."""
    return block_json(tb.raw, tb.spent, height)


def block_json(raw: bytes, spent: list[list[TxOut]], height: int) -> dict:
    """`getblock <hash> 3` JSON for a raw block and its spent outputs (coinbase first, with none)."""
    blk = CBlock.deserialize(raw)
    txs = []
    for n, tx in enumerate(blk.vtx):
        vins = []
        for j, txin in enumerate(tx.vin):
            if n == 0:
                vins.append({"coinbase": bytes(txin.scriptSig).hex(), "sequence": txin.nSequence})
                continue
            p = spent[n][j]
            vins.append(
                {
                    "txid": txin.prevout.hash[::-1].hex(),
                    "vout": txin.prevout.n,
                    "scriptSig": {"asm": "", "hex": bytes(txin.scriptSig).hex()},
                    "prevout": {"generated": False, "height": 1, "value": btc(p.amount), "scriptPubKey": {"asm": "", "hex": p.script.hex(), "type": "x"}},
                    "sequence": txin.nSequence,
                }
            )
        txs.append({"txid": tx.GetTxid()[::-1].hex(), "hex": tx.serialize().hex(), "vin": vins, "vout": []})
    out = {
        "hash": blk.GetHash()[::-1].hex(),
        "height": height,
        "version": blk.nVersion,
        "versionHex": f"{blk.nVersion:08x}",
        "merkleroot": blk.hashMerkleRoot[::-1].hex(),
        "time": blk.nTime,
        "nonce": blk.nNonce,
        "bits": f"{blk.nBits:08x}",
        "previousblockhash": blk.hashPrevBlock[::-1].hex(),
        "nTx": len(txs),
        "tx": txs,
    }
    if height == 0:
        del out["previousblockhash"]  # Core has none for genesis
    return out


def btc(sats: int) -> Decimal:
    return Decimal(sats) / 10**8


def dumps(obj: object) -> str:
    """JSON as Core writes it: amounts as plain decimal numbers."""
    if isinstance(obj, Decimal):
        return format(obj, "f")
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    return json.dumps(obj)


def spenttxouts_json(spent: list[list[TxOut]]) -> str:
    """Core's `/rest/spenttxouts/<hash>.json` body for a block's spent outputs (coinbase first, with none)."""
    return dumps([[{"value": btc(o.amount), "scriptPubKey": {"asm": "", "hex": o.script.hex(), "type": "x"}} for o in tx] for tx in spent]) + "\n"
