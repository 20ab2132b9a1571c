"""Builders for hand-made inputs and keys used by the regression and misuse tests."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from functools import cache
from pathlib import Path

from bitcoin.segwit_addr import CHARSET, bech32_hrp_expand, bech32_polymod, convertbits
from coincurve import PrivateKey

from sp_scan.crypto import hash160
from sp_scan.extract import NUMS_H
from sp_scan.types import OutPoint, TxInput

BECH32_CONST, BECH32M_CONST = 1, 0x2BC830A3
ROOT = Path(__file__).resolve().parent.parent


@cache
def load_script(relative_path: str, name: str):
    """Import a script of the repository (e.g. a vectors generator) as module `name`, once."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def sample_blocks_generator():
    """vectors/blocks/generate.py as a module: its keys, scripts, signing and SP payments."""
    return load_script("vectors/blocks/generate.py", "sample_blocks_generate")


def secret(n: int) -> bytes:
    """A deterministic 32-byte secret key derived from n."""
    return hashlib.sha256(b"sp-scan test key %d" % n).digest()


def pub(secret32: bytes) -> bytes:
    return PrivateKey(secret32).public_key.format()


def outpoint(n: int, vout: int = 0) -> OutPoint:
    return OutPoint(hashlib.sha256(b"txid %d" % n).digest(), vout)


def push(data: bytes) -> bytes:
    assert len(data) < 0x4C
    return bytes([len(data)]) + data


def p2pkh_input(op: OutPoint, key33: bytes, script_sig: bytes | None = None) -> TxInput:
    spk = b"\x76\xa9\x14" + hash160(key33) + b"\x88\xac"
    sig = push(b"\x30" * 71)
    return TxInput(op, script_sig if script_sig is not None else sig + push(key33), (), spk)


def p2wpkh_input(op: OutPoint, key33: bytes) -> TxInput:
    return TxInput(op, b"", (b"\x30" * 71, key33), b"\x00\x14" + hash160(key33))


def p2tr_input(op: OutPoint, xonly32: bytes, witness: tuple[bytes, ...] = (b"\x01" * 64,)) -> TxInput:
    return TxInput(op, b"", witness, b"\x51\x20" + xonly32)


def script_path_witness(internal32: bytes, annex: bool = False) -> tuple[bytes, ...]:
    leaf = push(b"\x11" * 32) + b"\xac"
    control = b"\xc0" + internal32
    return (b"\x01" * 64, leaf, control) + ((b"\x50\x00",) if annex else ())


NUMS_CONTROL_INTERNAL = NUMS_H


def bech32_string(hrp: str, version: int, payload: bytes, const: int = BECH32M_CONST) -> str:
    """Encode any version and payload with the bech32 (const=1) or bech32m checksum."""
    data = [version] + convertbits(payload, 8, 5)
    polymod = bech32_polymod(bech32_hrp_expand(hrp) + data + [0] * 6) ^ const
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[d] for d in data + checksum)
