"""Each documented error: wrong widths, invalid points, bad addresses."""

from __future__ import annotations

import pytest
from bitcoin.segwit_addr import CHARSET, bech32_hrp_expand, bech32_polymod, convertbits

from helpers import BECH32_CONST, bech32_string, outpoint, pub, secret
from sp_scan import address, network, scan, send
from sp_scan.crypto import N
from sp_scan.errors import InvalidAddressError, InvalidKeyError, MalformedDataError, SendError, SpendError, SPError
from sp_scan.types import OutPoint

SCAN, SPEND = secret(1), secret(2)
SCAN_PUB, SPEND_PUB = pub(SCAN), pub(SPEND)
OFF_CURVE = b"\x02" + b"\xff" * 32
V0 = address.encode(SCAN_PUB, SPEND_PUB)


def test_errors_share_one_base_and_refine_value_error():
    for cls in (InvalidKeyError, InvalidAddressError, MalformedDataError, SendError, SpendError):
        assert issubclass(cls, SPError) and issubclass(cls, ValueError)


@pytest.mark.parametrize(
    ("scan_key", "spend_pub"),
    [
        (SCAN[:31], SPEND_PUB),
        (SCAN + b"\x00", SPEND_PUB),
        (b"\x00" * 32, SPEND_PUB),
        (N.to_bytes(32, "big"), SPEND_PUB),
        (SCAN, SPEND_PUB[1:]),
        (SCAN, OFF_CURVE),
        (SCAN, b"\x04" + SPEND_PUB[1:]),
        ("00" * 32, SPEND_PUB),
    ],
    ids=["scan-31", "scan-33", "scan-zero", "scan-n", "spend-32", "spend-off-curve", "spend-bad-prefix", "scan-str"],
)
def test_receiver_rejects_bad_keys(scan_key, spend_pub):
    with pytest.raises(InvalidKeyError):
        scan.Receiver(scan_key, spend_pub)


@pytest.mark.parametrize("m", [-1, 2**32, 1.5], ids=["negative", "too-big", "float"])
def test_receiver_rejects_bad_labels(m):
    with pytest.raises(InvalidKeyError):
        scan.Receiver(SCAN, SPEND_PUB, (m,))


def test_receiver_repr_hides_the_scan_key():
    assert SCAN.hex() not in repr(scan.Receiver(SCAN, SPEND_PUB)) and repr(SCAN) not in repr(scan.Receiver(SCAN, SPEND_PUB))


def test_scan_rejects_outputs_of_the_wrong_width():
    with pytest.raises(InvalidKeyError):
        scan.scan_tweak(SPEND_PUB, [b"\x01" * 33], scan.Receiver(SCAN, SPEND_PUB))


def test_scan_skips_outputs_whose_x_is_not_on_the_curve():
    assert scan.scan_tweak(SPEND_PUB, [b"\xff" * 32], scan.Receiver(SCAN, SPEND_PUB)) == []


@pytest.mark.parametrize("tweak", [SPEND_PUB[:32], OFF_CURVE], ids=["short", "off-curve"])
def test_scan_tweak_rejects_an_invalid_tweak(tweak):
    with pytest.raises(InvalidKeyError):
        scan.scan_tweak(tweak, [], scan.Receiver(SCAN, SPEND_PUB))


def test_outpoint_rejects_wrong_widths():
    with pytest.raises(InvalidKeyError):
        OutPoint(b"\x00" * 31, 0)
    with pytest.raises(InvalidKeyError):
        OutPoint(b"\x00" * 32, 2**32)
    with pytest.raises(MalformedDataError):
        OutPoint.from_bytes(b"\x00" * 37)
    with pytest.raises(MalformedDataError):
        OutPoint.from_display("zz" * 32, 0)


def test_send_rejects_bad_private_keys_and_empty_lists():
    op = [outpoint(1)]
    rec = [address.decode(V0)]
    with pytest.raises(InvalidKeyError):
        send.create_outputs(op, [send.InputKey(b"\x00" * 32, False)], rec)
    with pytest.raises(InvalidKeyError):
        send.create_outputs(op, [send.InputKey(secret(3)[:31], False)], rec)
    with pytest.raises(SendError):
        send.create_outputs(op, [], rec)
    with pytest.raises(SendError):
        send.create_outputs(op, [send.InputKey(secret(3), False)], [])


def test_input_key_repr_hides_the_private_key():
    assert secret(3).hex() not in repr(send.InputKey(secret(3), True)) and repr(secret(3)) not in repr(send.InputKey(secret(3), True))


def test_address_round_trips_on_every_network():
    for hrp in ("sp", "tsp", "sprt"):
        decoded = address.decode(address.encode(SCAN_PUB, SPEND_PUB, hrp))
        assert (decoded.hrp, decoded.version, decoded.scan_pubkey33, decoded.spend_pubkey33) == (hrp, 0, SCAN_PUB, SPEND_PUB)
    assert len(V0) == 116 and len(address.encode(SCAN_PUB, SPEND_PUB, "tsp")) == 117


def test_regtest_addresses_are_sprt_as_rust_silentpayments_spdk_and_drongo_write_them():
    assert [network.get(name).hrp for name in ("main", "test", "testnet4", "signet", "regtest")] == ["sp", "tsp", "tsp", "tsp", "sprt"]
    regtest = address.encode(SCAN_PUB, SPEND_PUB, "sprt")
    assert regtest.startswith("sprt1q") and address.decode(regtest).hrp == "sprt"
    assert address.decode(regtest, hrp="sprt").spend_pubkey33 == SPEND_PUB
    with pytest.raises(InvalidAddressError, match="unexpected hrp 'sprt'"):
        address.decode(regtest, hrp="tsp")


def test_future_versions_read_the_first_66_bytes():
    payload = SCAN_PUB + SPEND_PUB + b"\xab" * 40
    for version in (1, 16, 30):
        decoded = address.decode(bech32_string("sp", version, payload))
        assert (decoded.version, decoded.scan_pubkey33, decoded.spend_pubkey33) == (version, SCAN_PUB, SPEND_PUB)


def test_uppercase_address_decodes():
    assert address.decode(V0.upper()).spend_pubkey33 == SPEND_PUB


BAD_ADDRESSES = {
    "bech32-checksum": bech32_string("sp", 0, SCAN_PUB + SPEND_PUB, BECH32_CONST),
    "version-31": bech32_string("sp", 31, SCAN_PUB + SPEND_PUB),
    "v0-67-bytes": bech32_string("sp", 0, SCAN_PUB + SPEND_PUB + b"\x00"),
    "v0-65-bytes": bech32_string("sp", 0, SCAN_PUB + SPEND_PUB[:32]),
    "v1-65-bytes": bech32_string("sp", 1, SCAN_PUB + SPEND_PUB[:32]),
    "wrong-hrp": bech32_string("bc", 0, SCAN_PUB + SPEND_PUB),
    "invalid-point": bech32_string("sp", 0, SCAN_PUB + OFF_CURVE),
    "uncompressed-prefix": bech32_string("sp", 0, b"\x04" + SCAN_PUB[1:] + SPEND_PUB),
    "mixed-case": V0[:10] + V0[10:].upper(),
    "typo": V0[:-1] + ("q" if V0[-1] != "q" else "p"),
    "too-long": bech32_string("sp", 1, SCAN_PUB + SPEND_PUB + b"\x00" * 600),
    "no-separator": V0.replace("1", "b", 1),
    "bad-char": V0[:20] + "b" + V0[21:],
    "empty": "",
}


@pytest.mark.parametrize("bad", BAD_ADDRESSES.values(), ids=BAD_ADDRESSES.keys())
def test_bad_addresses_are_rejected(bad):
    with pytest.raises(InvalidAddressError):
        address.decode(bad)


def test_decode_checks_the_expected_hrp():
    with pytest.raises(InvalidAddressError):
        address.decode(V0, hrp="tsp")


def test_encode_rejects_a_bad_hrp_and_bad_keys():
    with pytest.raises(InvalidAddressError):
        address.encode(SCAN_PUB, SPEND_PUB, "bc")
    with pytest.raises(InvalidKeyError):
        address.encode(SCAN_PUB, OFF_CURVE)


def test_padding_must_be_zero_and_short():
    # 66 bytes -> 106 five-bit groups (530 bits, 2 padding bits); flip a padding bit.
    data = [0] + convertbits(SCAN_PUB + SPEND_PUB, 8, 5)
    data[-1] |= 1
    polymod = bech32_polymod(bech32_hrp_expand("sp") + data + [0] * 6) ^ 0x2BC830A3
    addr = "sp1" + "".join(CHARSET[d] for d in data + [(polymod >> 5 * (5 - i)) & 31 for i in range(6)])
    with pytest.raises(InvalidAddressError):
        address.decode(addr)
