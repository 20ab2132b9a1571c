"""Fuzz the address decoder: any string gives an SPAddress or InvalidAddressError, and re-encodes.

    python fuzz/fuzz_address.py -max_total_time=300
"""

import atheris
from _harness import run

with atheris.instrument_imports(include=["sp_scan", "bitcoin.segwit_addr"]):
    from sp_scan import address
    from sp_scan.errors import InvalidAddressError


def test_one(data: bytes) -> None:
    # First byte even: the rest as Latin-1 (every byte a char); odd: as UTF-8.
    text = data[1:].decode("latin-1") if not data or data[0] % 2 == 0 else data[1:].decode("utf-8", "replace")
    try:
        got = address.decode(text)
    except InvalidAddressError:
        return
    assert isinstance(got, address.SPAddress)
    if got.version == 0:
        assert address.encode(got.scan_pubkey33, got.spend_pubkey33, got.hrp) == text.lower()


G = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
G2 = bytes.fromhex("02c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5")
SEEDS = [b"\x00" + address.encode(G, G2, hrp).encode() for hrp in address.HRPS]

if __name__ == "__main__":
    run("address", test_one, SEEDS)
