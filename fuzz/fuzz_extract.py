"""Fuzz extraction: native == reference for input keys, tx keys and the prevouts summary.

    python fuzz/fuzz_extract.py -max_total_time=300

Input format (so the BIP352 vectors can seed it): a sequence of inputs, each
`kind:u8 | u16-LE length + scriptPubKey | u16-LE length + scriptSig | u16-LE length + serialized witness`.
kind % 4 == 1 replaces the scriptPubKey with a P2PKH committing to 33 bytes of the scriptSig (at
offset 3 * (kind >> 2)), kind % 4 == 2 with a P2WPKH of the last witness item, so matches are reachable.
"""

import hashlib
import json
import struct

import atheris
from _harness import ROOT, run

with atheris.instrument_imports(include=["sp_scan"]):
    from sp_scan import crypto, extract, native, reference, summary
    from sp_scan.wire import parse_witness
    from sp_scan.errors import MalformedDataError
    from sp_scan.types import OutPoint, TxInput


def _field(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 2 > len(data):
        return b"", len(data)
    n = struct.unpack_from("<H", data, pos)[0]
    return data[pos + 2 : pos + 2 + n], min(len(data), pos + 2 + n)


def _inputs(data: bytes) -> list[TxInput]:
    inputs, pos = [], 0
    while pos < len(data) and len(inputs) < 8:
        kind = data[pos]
        spk, pos = _field(data, pos + 1)
        sig, pos = _field(data, pos)
        wit_bytes, pos = _field(data, pos)
        try:
            wit = parse_witness(wit_bytes)
        except MalformedDataError:
            wit = (wit_bytes,)
        if kind % 4 == 1 and len(sig) >= 33:
            # P2PKH committing to the 33 bytes at offset (kind >> 2) * 3 of the scriptSig
            off = min((kind >> 2) * 3, len(sig) - 33)
            spk = b"\x76\xa9\x14" + crypto.hash160(sig[off : off + 33]) + b"\x88\xac"
        elif kind % 4 == 2 and wit:
            spk = b"\x00\x14" + crypto.hash160(wit[-1])
        op = OutPoint(hashlib.sha256(bytes([len(inputs), kind])).digest(), len(inputs))
        inputs.append(TxInput(op, sig, wit, spk))
    return inputs


def test_one(data: bytes) -> None:
    inputs = _inputs(data)
    for i in inputs:
        expected = reference.extract.input_pubkey(i.prevout_script, i.script_sig, i.witness)
        assert extract.input_pubkey(i.prevout_script, i.script_sig, i.witness) == expected
    assert extract.tx_pubkeys(inputs) == reference.extract.tx_pubkeys(inputs)
    if inputs:
        assert summary.summarize(inputs) == reference.summary.summarize(inputs)


def encode(vin: list[dict]) -> bytes:
    """A vector's vin list in this target's input format."""
    out = b""
    for v in vin:
        out += b"\x00"
        for hex_ in (v["prevout"]["scriptPubKey"]["hex"], v["scriptSig"], v["txinwitness"]):
            raw = bytes.fromhex(hex_)
            out += struct.pack("<H", len(raw)) + raw
    return out


def seeds() -> list[bytes]:
    cases = json.loads((ROOT / "vectors" / "bip352" / "send_and_receive_test_vectors.json").read_text())
    return [encode(r["given"]["vin"]) for c in cases for r in c["receiving"]]


if __name__ == "__main__":
    assert native.ENABLED, "build the extension first: python setup.py build_ext --inplace"
    run("extract", test_one, seeds())
