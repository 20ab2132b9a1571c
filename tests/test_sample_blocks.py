"""The sample blocks in vectors/blocks: reproducible, really signed, and scanned as the sender paid."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from bitcoin.core import CBlock, CTransaction, b2lx
from bitcoin.core.script import SIGHASH_ALL, SIGVERSION_WITNESS_V0, CScript, SignatureHash
from btclib.script import sig_hash
from btclib.script.engine import verify_transaction
from btclib.script.engine.flags import ScriptFlag
from btclib.tx import Tx, TxOut
from coincurve import PublicKey, PublicKeyXOnly

from helpers import sample_blocks_generator
from sp_scan import block as sp_block
from sp_scan import crypto, extract
from sp_scan.scan import Receiver, scan_tx
from sp_scan.summary import summarize
from sp_scan.types import OutPoint, TxInput
from sp_scan.wire import Reader

BLOCKS = Path(__file__).resolve().parent.parent / "vectors" / "blocks"
CONSENSUS = (
    ScriptFlag.P2SH
    | ScriptFlag.DERSIG
    | ScriptFlag.NULLDUMMY
    | ScriptFlag.CHECKLOCKTIMEVERIFY
    | ScriptFlag.CHECKSEQUENCEVERIFY
    | ScriptFlag.WITNESS
    | ScriptFlag.TAPROOT
)


@dataclass(frozen=True)
class Sample:
    raw: bytes
    raw_spent: bytes
    block: CBlock
    spent: list[list[tuple[int, bytes]]]
    expected: dict


def _parse_spent(data: bytes) -> list[list[tuple[int, bytes]]]:
    r = Reader(data)
    txs = []
    for _ in range(r.compact_size()):
        txs.append([(int.from_bytes(r.read(8), "little", signed=True), r.var_bytes()) for _ in range(r.compact_size())])
    r.end()
    return txs


@cache
def sample(name: str) -> Sample:
    if name == "small":
        block = bytes.fromhex((BLOCKS / "small.hex").read_text())
        spent = bytes.fromhex((BLOCKS / "small.spent.hex").read_text())
    else:
        block, spent = (BLOCKS / f"{name}.bin").read_bytes(), (BLOCKS / f"{name}.spent.bin").read_bytes()
    expected = json.loads((BLOCKS / f"{name}.expected.json").read_text())
    return Sample(block, spent, CBlock.deserialize(block), _parse_spent(spent), expected)


def _inputs(tx: CTransaction, spent: list[tuple[int, bytes]]) -> list[TxInput]:
    witness = [tuple(w.scriptWitness.stack) for w in tx.wit.vtxinwit] if tx.has_witness() else [()] * len(tx.vin)
    return [
        TxInput(OutPoint(txin.prevout.hash, txin.prevout.n), bytes(txin.scriptSig), wit, script)
        for txin, wit, (_, script) in zip(tx.vin, witness, spent, strict=True)
    ]


def _taproot_outputs(tx: CTransaction) -> list[tuple[int, bytes]]:
    return [(n, bytes(o.scriptPubKey[2:])) for n, o in enumerate(tx.vout) if extract.script_type(bytes(o.scriptPubKey)) is extract.ScriptType.P2TR]


def _receiver(s: Sample) -> Receiver:
    wallet = s.expected["wallet"]
    scan_key32 = bytes.fromhex((BLOCKS / wallet["scan_key_file"]).read_text())
    return Receiver(scan_key32, bytes.fromhex(wallet["spend_pubkey"]), tuple(wallet["labels"]))


def _scan_stages(s: Sample, txs) -> tuple[list[dict], list[dict]]:
    """Tweaks and found outputs: python-bitcoinlib's parse, then the summary and scan stages."""
    receiver = _receiver(s)
    tweaks, found = [], []
    for n in txs:
        tx, inputs = s.block.vtx[n], _inputs(s.block.vtx[n], s.spent[n])
        outputs = _taproot_outputs(tx)
        summary = summarize(inputs)
        if summary is None or not outputs:
            continue
        txid = b2lx(tx.GetTxid())
        tweaks.append({"txid": txid, "tweak": summary.tweak33.hex()})
        vouts = {x: n for n, x in outputs}
        hits = sorted((vouts[f.output32], f) for f in scan_tx(inputs, [x for _, x in outputs], receiver))
        found += [{"txid": txid, "vout": v, "amount": tx.vout[v].nValue, "output": f.output32.hex(), "label": f.label} for v, f in hits]
    return tweaks, found


def test_regenerating_the_small_block_reproduces_the_committed_files():
    block, spent, expected = sample_blocks_generator().build_small()
    assert block.hex() + "\n" == (BLOCKS / "small.hex").read_text()
    assert spent.hex() + "\n" == (BLOCKS / "small.spent.hex").read_text()
    assert expected == json.loads((BLOCKS / "small.expected.json").read_text())


def test_the_test_wallet_key_files_hold_the_generators_keys_and_the_documented_public_keys():
    gen = sample_blocks_generator()
    scan_key32, spend_key32 = (bytes.fromhex((BLOCKS / f"test-wallet.{kind}").read_text()) for kind in ("scan", "spend"))
    assert (scan_key32, spend_key32) == (gen.WALLET_SCAN_KEY, gen.WALLET_SPEND_KEY)
    documented = (BLOCKS / "README.md").read_text()
    for key32, row in ((scan_key32, "scan public key"), (spend_key32, "spend public key")):
        assert f"| {row} | `{PublicKey.from_secret(key32).format().hex()}` |" in documented


def test_regenerating_the_mainnet_block_reproduces_the_committed_files():
    block, spent, expected = sample_blocks_generator().build_mainnet()
    s = sample("mainnet")
    assert (block, spent) == (s.raw, s.raw_spent)
    assert expected == s.expected


@pytest.mark.parametrize("name", ["small", "mainnet"])
def test_spent_outputs_have_one_entry_per_input_and_none_for_the_coinbase(name):
    s = sample(name)
    assert [len(x) for x in s.spent] == [0] + [len(tx.vin) for tx in s.block.vtx[1:]]


@pytest.mark.parametrize("name", ["small", "mainnet"])
def test_merkle_root_and_witness_commitment_are_valid(name):
    block = sample(name).block
    assert block.calc_merkle_root() == block.hashMerkleRoot
    commitment = bytes(block.vtx[0].vout[block.get_witness_commitment_index()].scriptPubKey[6:38])
    reserved = block.vtx[0].wit.vtxinwit[0].scriptWitness.stack[0]
    assert commitment == hashlib.sha256(hashlib.sha256(block.calc_witness_merkle_root() + reserved).digest()).digest()


def _verify(s: Sample, n: int) -> None:
    tx = Tx.parse(s.block.vtx[n].serialize())
    verify_transaction([TxOut(v, script) for v, script in s.spent[n]], tx, CONSENSUS)


@pytest.mark.parametrize("name", ["small", "mainnet"])
def test_every_input_passes_consensus_script_verification(name):
    s = sample(name)
    for n in range(1, len(s.block.vtx)):
        _verify(s, n)


def test_small_block_covers_every_input_kind():
    kinds = {k for t in sample("small").expected["transactions"] for k in t["inputs"]}
    gen = sample_blocks_generator()
    assert kinds == gen.ELIGIBLE_KINDS | gen.INELIGIBLE_KINDS


def test_worst_case_script_sig_is_exactly_10000_bytes_with_291_dummies_before_the_key():
    s = sample("small")
    n = next(i for i, t in enumerate(s.expected["transactions"], 1) if t["name"] == "worst-case-p2pkh")
    script_sig = bytes(s.block.vtx[n].vin[0].scriptSig)
    items = extract.pushes(script_sig)
    assert len(script_sig) == 10_000
    assert items[:291] == [b"\x02" * 33] * 291 and len(items) == 293


@pytest.mark.parametrize("kind", ["p2wpkh", "p2tr-key"])
def test_a_flipped_signature_bit_fails_verification(kind):
    s = sample("small")
    n, k = next((i, t["inputs"].index(kind)) for i, t in enumerate(s.expected["transactions"], 1) if kind in t["inputs"])
    sig = s.block.vtx[n].wit.vtxinwit[k].scriptWitness.stack[0]
    raw = s.block.vtx[n].serialize()
    at = raw.index(sig) + 10
    tampered = raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]
    with pytest.raises(Exception):
        verify_transaction([TxOut(v, script) for v, script in s.spent[n]], Tx.parse(tampered), CONSENSUS)


def test_ecdsa_and_schnorr_signatures_verify_with_coincurve_on_their_sighash():
    """Signed-ness checked a second way: coincurve on python-bitcoinlib's and btclib's sighashes."""
    s = sample("small")
    checked = {"ecdsa": 0, "schnorr": 0}
    for n, info in enumerate(s.expected["transactions"], 1):
        tx, spent = s.block.vtx[n], s.spent[n]
        prevouts = [TxOut(v, script) for v, script in spent]
        for k, kind in enumerate(info["inputs"]):
            value, script = spent[k]
            wit = tuple(tx.wit.vtxinwit[k].scriptWitness.stack) if tx.has_witness() else ()
            if kind in ("p2wpkh", "p2sh-p2wpkh"):
                sig, pub = wit
                code = CScript(b"\x76\xa9\x14" + crypto.hash160(pub) + b"\x88\xac")
                digest = SignatureHash(code, tx, k, SIGHASH_ALL, value, SIGVERSION_WITNESS_V0)
            elif kind.startswith("p2pkh") and kind != "p2pkh-uncompressed":
                items = extract.pushes(bytes(tx.vin[k].scriptSig))
                pub = extract.input_pubkey(script, bytes(tx.vin[k].scriptSig), ())
                sig = items[items.index(pub) - 1]
                digest = SignatureHash(CScript(script), tx, k, SIGHASH_ALL)
            elif kind in ("p2tr-key", "p2tr-key-annex"):
                annex = wit[-1] if kind.endswith("annex") else None
                digest = sig_hash.taproot(Tx.parse(tx.serialize()), k, prevouts, 0, 0, annex or b"", b"")
                assert PublicKeyXOnly(script[2:]).verify(wit[0], digest)
                checked["schnorr"] += 1
                continue
            else:
                continue
            assert sig[-1] == SIGHASH_ALL
            assert PublicKey(pub).verify(sig[:-1], digest, hasher=None)
            checked["ecdsa"] += 1
    assert checked["ecdsa"] >= 8 and checked["schnorr"] >= 4


def test_small_block_scan_finds_exactly_what_the_sender_paid():
    s = sample("small")
    tweaks, found = _scan_stages(s, list(range(1, len(s.block.vtx))))
    assert tweaks == s.expected["tweaks"]
    assert found == s.expected["found"]
    assert {f["label"] for f in found} == {None, 0, 1, 7}


def test_small_block_segwit_v2_spend_skips_the_whole_tx_and_its_decoy_output():
    s = sample("small")
    n = next(i for i, t in enumerate(s.expected["transactions"], 1) if t["name"] == "segwit-v2-spend")
    inputs = _inputs(s.block.vtx[n], s.spent[n])
    assert summarize(inputs) is None
    eligible_only = [i for i in inputs if extract.script_type(i.prevout_script) is not extract.ScriptType.WITNESS_UNKNOWN]
    wallet = s.expected["wallet"]
    receiver = Receiver(bytes.fromhex((BLOCKS / "test-wallet.scan").read_text()), bytes.fromhex(wallet["spend_pubkey"]))
    # The decoy is a real payment if the v2 input were absent: proves the skip is what hides it.
    assert scan_tx(eligible_only, [x for _, x in _taproot_outputs(s.block.vtx[n])], receiver)


def test_mainnet_block_scan_finds_exactly_what_the_sender_paid():
    s = sample("mainnet")
    tweaks, found = _scan_stages(s, list(range(1, len(s.block.vtx))))
    assert tweaks == s.expected["tweaks"]
    assert found == s.expected["found"]


@pytest.mark.parametrize("name", ["small", "mainnet"])
def test_block_module_tweaks_and_scan_match_the_sender(name):
    s = sample(name)
    tweaks = [{"txid": t.txid32[::-1].hex(), "tweak": t.tweak33.hex()} for t in sp_block.tweaks(s.raw, s.raw_spent)]
    found = [
        {"txid": m.txid32[::-1].hex(), "vout": m.vout, "amount": m.amount, "output": m.found.output32.hex(), "label": m.found.label}
        for m in sp_block.scan(s.raw, s.raw_spent, _receiver(s))
    ]
    assert tweaks == s.expected["tweaks"]
    assert found == s.expected["found"]
