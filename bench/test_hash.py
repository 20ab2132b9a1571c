"""Hashing: sp-scan's native SHA256 / tagged hash / HASH160 against hashlib, per call and in a loop.

The loop rows hash the same message LOOP times: natively with `_hash.sha256_loop` /
`_hash.hash160_loop` (bench entry points of the compiled module), and with a Python
`for` loop for hashlib, which has no C loop of its own.
"""

from __future__ import annotations

import hashlib

import pytest

from sp_scan import crypto, native

LOOP = 1000
MSG64 = bytes(range(64))
MSG37 = bytes(range(37))  # ser_P(ecdh) ‖ ser32(k): what t_k hashes
KEY33 = b"\x02" + bytes(range(32))
_TAG = hashlib.sha256(crypto.TAG_SHARED_SECRET.encode()).digest()
_MIDSTATE = hashlib.sha256(_TAG + _TAG)


def hashlib_sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def hashlib_tagged(msg: bytes) -> bytes:
    """The fastest hashlib form: copy a precomputed tag midstate."""
    h = _MIDSTATE.copy()
    h.update(msg)
    return h.digest()


def hashlib_hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


def native_tagged(msg: bytes) -> bytes:
    return native.tagged_hash(crypto.TAG_SHARED_SECRET, msg)


def _loop(fn):
    def run(data: bytes, n: int) -> bytes:
        for _ in range(n):
            out = fn(data)
        return out

    return run


def _native(name: str):
    fn = getattr(native, name, None)
    if fn is None:
        pytest.skip(f"sp_scan.native.{name} not available")
    return fn


def _info(benchmark, row: str, impl: str, per: int = 1) -> None:
    benchmark.extra_info.update(row=row, impl=impl, per=per, unit="ns/hash")


PER_CALL = {
    "sha256 64 B": (MSG64, "sha256", hashlib_sha256),
    "tagged_hash SharedSecret 37 B": (MSG37, None, hashlib_tagged),
    "hash160 33 B": (KEY33, "hash160", hashlib_hash160),
}


@pytest.mark.parametrize("impl", ["native", "hashlib"])
@pytest.mark.parametrize("row", list(PER_CALL))
def test_per_call(benchmark, row, impl):
    data, native_name, peer = PER_CALL[row]
    if impl == "native":
        fn = _native(native_name) if native_name else (_native("tagged_hash") and native_tagged)
        assert fn(data) == peer(data)
    else:
        fn = peer
    _info(benchmark, f"{row}, per call", impl)
    benchmark(fn, data)


def _native_loop(row: str):
    hash_module = getattr(native, "_hash", None)
    if row.startswith("sha256") and hasattr(hash_module, "sha256_loop"):
        return lambda data, n: hash_module.sha256_loop(data, n)
    if row.startswith("hash160") and hasattr(hash_module, "hash160_loop"):
        return lambda data, n: hash_module.hash160_loop(data, n, True)
    if row.startswith("tagged"):
        _native("tagged_hash")
        return _loop(native_tagged)
    pytest.skip("native hash loop not available")


@pytest.mark.parametrize("impl", ["native", "hashlib"])
@pytest.mark.parametrize("row", list(PER_CALL))
def test_in_loop(benchmark, row, impl):
    data, _, peer = PER_CALL[row]
    fn = _native_loop(row) if impl == "native" else _loop(peer)
    assert fn(data, 3) == peer(data)
    _info(benchmark, f"{row}, in loop of {LOOP}", impl, LOOP)
    benchmark(fn, data, LOOP)
