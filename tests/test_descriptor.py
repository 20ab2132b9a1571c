"""sp() descriptors: BIP392's examples (with real keys where the BIP elides them), BIP393's annotation
examples, BIP380's checksum vectors, BIP32 derivation against BIP32's vector 1, and refusals."""

from __future__ import annotations

import hashlib
import re

import pytest
from bitcoin import base58
from coincurve import PrivateKey

from sp_scan import address, descriptor
from sp_scan.errors import DescriptorError

WIF = "L4rK1yDtCWekvXuE6oXD9jCYfFNV2cWRpVuPLBcCU2z8TrisoyY1"
WIF_UNCOMPRESSED = "5KYZdUEo39z3FPrtuX2QbbwGnNP5zTd7yyr2SC1j299sBCnWjss"
PUB = "0260b2003c386519fc9eadf2b5cf124dd8eea4c4e68d5e154050a9346ea98ce600"
XPRV = "xprvA1RpRA33e1JQ7ifknakTFpgNXPmW2YvmhqLQYMmrj4xJXXWYpDPS3xz7iAxn8L39njGVyuoseXzU6rcxFLJ8HFsTjSyQbLYnMpCqE2VbFWc"
XPUB = "xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL"
SCAN32 = hashlib.sha256(b"scan").digest()
SPEND32 = hashlib.sha256(b"spend").digest()
SPSCAN = str(descriptor.from_keys(SCAN32, PrivateKey(SPEND32).public_key.format()).scan)
SPSPEND = str(descriptor.from_keys(SCAN32, SPEND32).scan)
TSPSCAN = str(descriptor.from_keys(SCAN32, PrivateKey(SPEND32).public_key.format(), network="test").scan)

# BIP32 test vector 1 (bip-0032.mediawiki at 7fe0b034).
BIP32_MASTER = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
BIP32_M0H = "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw"
BIP32_M0H1 = "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ"
BIP32_LAST = "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy"


def _base58check(payload: bytes) -> str:
    return base58.encode(payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4])


TPUB = _base58check(bytes.fromhex("043587cf") + base58.decode(XPUB)[4:78])


def _xpub_key(xpub: str) -> bytes:
    return base58.decode(xpub)[45:78]


# BIP392's valid examples; "..." keys replaced by real ones of the same kind. The xprv/xpub example
# derives the spend key unhardened (/0): hardened derivation from an xpub does not exist.
VALID_BIP392 = {
    "spscan (watch-only)": f"sp({SPSCAN})",
    "with key origin": f"sp([deadbeef/352h/0h/0h]{SPSCAN})",
    "spspend (full wallet)": f"sp({SPSPEND})",
    "WIF scan key with compressed public spend key": f"sp({WIF},{PUB})",
    "xprv scan key with xpub spend key": f"sp([deadbeef/352h/0h/0h]{XPRV}/0h,{XPUB}/0)",
    "xprv scan and spend keys": f"sp([deadbeef/352h/0h/0h]{XPRV}/0h,{XPRV}/0h)",
    "testnet spscan with annotations": f"sp({TSPSCAN})?bh=840000&ml=5",
}


@pytest.mark.parametrize("text", VALID_BIP392.values(), ids=VALID_BIP392.keys())
def test_bip392_example_round_trips(text):
    decoded = descriptor.decode(text)
    encoded = str(decoded)
    assert encoded == f"{text}#{descriptor.checksum(text)}"
    assert descriptor.decode(encoded) == decoded
    assert decoded.scan_key32 not in repr(decoded).encode() and "scan_key32" not in repr(decoded)


INVALID_BIP392 = {
    "no key expression": ("sp()", "at least one key"),
    "single xpub": (f"sp({XPUB})", "spscan or spspend"),
    "two xpubs": (f"sp({XPUB},{XPUB})", "scan key must be private"),
    "spscan in the two-argument form": (f"sp({SPSCAN},{SPSCAN})", "single key, not spscan/spspend"),
    "uncompressed WIF": (f"sp({WIF_UNCOMPRESSED},{PUB})", "uncompressed keys are not allowed"),
    "sh(sp())": (f"sh(sp({SPSCAN}))", "top level only"),
    "wsh(sp())": (f"wsh(sp({SPSCAN}))", "top level only"),
    "musig spend key (BIP392 lists it as valid; refused here)": (
        f"sp({WIF},musig(03dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659,023590a94e768f8e1815c2f24b4d80a8e3149316c3518ce7b7ad338368d038ca66))",
        "musig() spend keys are not supported",
    ),
    "uncompressed hex spend key": (f"sp({WIF},04a34b99f22c790c4e36b2b3c2c35a36db06226e41c692fc82b8b56ac1c540c5bd5b8dec5235a0fa8722476c7709c02559e3aa73aa03918ba2d492eea75abea235)", "uncompressed keys are not allowed"),
    "ranged spend key": (f"sp({WIF},{XPUB}/0/*)", "not ranges"),
    "hardened step from an xpub": (f"sp({XPRV},{XPUB}/0h)", "hardened derivation needs an extended private key"),
    "three keys": (f"sp({WIF},{PUB},{PUB})", "one or two key expressions"),
    "mainnet scan key with a testnet spend key": (f"sp({WIF},{TPUB}/0)", "different networks"),
    "spscan with a derivation step": (f"sp({SPSCAN}/0)", "no derivation steps"),
}


@pytest.mark.parametrize(("text", "needle"), INVALID_BIP392.values(), ids=INVALID_BIP392.keys())
def test_bip392_invalid_form_is_refused(text, needle):
    with pytest.raises(DescriptorError, match=re.escape(needle)):
        descriptor.decode(text)


VALID_BIP393 = [
    ("wpkh([deadbeef/84h/0h/0h]xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL/0/*)?bh=800000&gl=30#v35n46d2", (("bh", 800000), ("gl", 30))),
    ("wpkh([deadbeef/84h/0h/0h]xpub6ERApfZwUNrhLCkDtcHTcxd75RbzS1ed54G1LkBUHQVHQKqhMkhgbmJbZRkrgZw4koxb5JaHWkY4ALHY2grBGRjaDMzQLcgJvLJuZZvRcEL/0/*)#kf3v6fpx", ()),
    ("wpkh(0260b2003c386519fc9eadf2b5cf124dd8eea4c4e68d5e154050a9346ea98ce600)?bh=150000#8kehtsrj", (("bh", 150000),)),
    ("tr(xpub6BgBgsespWvERF3LHQu6CnqdvfEvtMcQjYrcRzx53QJjSxarj2afYWcLteoGVky7D3UKDP9QyrLprQ3VCECoY49yfdDEHGCtMMj92pReUsQ/0/*)?bh=709632&gl=20#6la5jcn3", (("bh", 709632), ("gl", 20))),
]


@pytest.mark.parametrize(("text", "pairs"), VALID_BIP393, ids=["bh-and-gl", "no-annotations", "bh-only", "taproot"])
def test_bip393_valid_example(text, pairs):
    script, got = descriptor.split_annotated(text)
    assert got == pairs and "?" not in script and "#" not in script


INVALID_BIP393 = {
    "mixed case key": "raw(deadbeef)?Bh=1",
    "empty value": "raw(deadbeef)?bh=",
    "missing value": "raw(deadbeef)?bh",
    "negative value": "raw(deadbeef)?bh=-1",
    "non-integer value": "raw(deadbeef)?bh=abc",
    "leading zeros": "raw(deadbeef)?bh=01",
    "empty key": "raw(deadbeef)?=100",
    "trailing ampersand": "raw(deadbeef)?bh=1&",
    "no annotation pairs": "raw(deadbeef)?",
    "duplicate key": "raw(deadbeef)?bh=1&bh=2",
    "multiple question marks": "raw(deadbeef)?bh=1?gl=2",
}


@pytest.mark.parametrize("text", INVALID_BIP393.values(), ids=INVALID_BIP393.keys())
def test_bip393_invalid_example_is_refused_with_a_valid_checksum(text):
    with pytest.raises(DescriptorError):
        descriptor.split_annotated(f"{text}#{descriptor.checksum(text)}")


def test_unknown_annotation_keys_are_kept_and_ignored():
    d = descriptor.decode(f"sp({SPSCAN})?zz=7&bh=12&ml=2")
    assert (d.birthday_height, d.gap_limit, d.max_labels) == (12, None, 2)
    assert d.receiver().labels == (0, 1, 2)
    assert str(d).startswith(f"sp({SPSCAN})?zz=7&bh=12&ml=2#")


BIP380_CHECKSUMS = {
    "valid checksum": ("raw(deadbeef)#89f8spxm", True),
    "no checksum": ("raw(deadbeef)", True),
    "missing checksum": ("raw(deadbeef)#", False),
    "too long checksum": ("raw(deadbeef)#89f8spxmx", False),
    "too short checksum": ("raw(deadbeef)#89f8spx", False),
    "error in payload": ("raw(deedbeef)#89f8spxm", False),
    "error in checksum": ("raw(deedbeef)##9f8spxm", False),
    "invalid characters in payload": ("raw(Ü)#00000000", False),
}


@pytest.mark.parametrize(("text", "ok"), BIP380_CHECKSUMS.values(), ids=BIP380_CHECKSUMS.keys())
def test_bip380_checksum_vector(text, ok):
    if ok:
        assert descriptor.split_annotated(text) == ("raw(deadbeef)", ())
    else:
        with pytest.raises(DescriptorError):
            descriptor.split_annotated(text)


def test_a_wrong_checksum_on_an_sp_descriptor_is_refused():
    text = str(descriptor.decode(f"sp({SPSPEND})"))
    with pytest.raises(DescriptorError, match="wrong descriptor checksum"):
        descriptor.decode(text[:-1] + ("q" if text[-1] != "q" else "p"))


BIP380_BAD_ORIGINS = [
    f"[deadbeef/0h/0h/0h/*]{PUB}",
    f"[deadbeef/0h/0h/0h/]{PUB}",
    f"[deadbef/0h/0h/0h]{PUB}",
    f"[deadbeeef/0h/0h/0h]{PUB}",
    f"[deadbeef/0f/0f/0f]{PUB}",
    f"[deadbeef/-0/-0/-0]{PUB}",
    f"[deadbeef/0H/0H/0H]{PUB}",
    f"{XPUB}/2147483648",
    f"{XPUB}/1aa",
    f"[aaaaaaaa][aaaaaaaa]{XPUB}/0",
    f"aaaaaaaa]{XPUB}/0",
    f"[gaaaaaaa]{XPUB}/0",
    "[deadbeef]",
    f"{WIF}/0",
]


@pytest.mark.parametrize("spend", BIP380_BAD_ORIGINS)
def test_bip380_invalid_key_expression_is_refused_as_the_spend_key(spend):
    with pytest.raises(DescriptorError):
        descriptor.decode(f"sp({WIF},{spend})")


def test_bip32_derivation_matches_bip32_vector_1():
    d = descriptor.decode(f"sp({BIP32_MASTER},{BIP32_MASTER}/0h/1/2h/2/1000000000)")
    assert d.spend_pubkey33 == _xpub_key(BIP32_LAST) == PrivateKey(d.spend_key32).public_key.format()
    assert descriptor.decode(f"sp({BIP32_MASTER},{BIP32_M0H}/1)").spend_pubkey33 == _xpub_key(BIP32_M0H1)


@pytest.mark.parametrize("path", ["/0h", "/0"])
def test_a_derivation_step_whose_tweak_is_not_below_n_is_refused(monkeypatch, path):
    class Digest:
        def __init__(self, *args):
            pass

        def digest(self):
            return b"\xff" * 64  # I_L >= n: BIP32 says the child is invalid

    monkeypatch.setattr(descriptor.hmac, "new", Digest)
    with pytest.raises(DescriptorError, match="derivation step .* gives an invalid key"):
        descriptor.decode(f"sp({BIP32_MASTER},{BIP32_MASTER}{path})")


def test_from_master_derives_bip352_paths_with_their_origin():
    d = descriptor.from_master(BIP32_MASTER, account=2, annotations=(("bh", 900000),))
    scan = descriptor.decode(f"sp({BIP32_MASTER}/352h/0h/2h/1h/0,{BIP32_MASTER}/352h/0h/2h/0h/0)")
    assert (d.scan_key32, d.spend_key32, d.spend_pubkey33) == (scan.scan_key32, scan.spend_key32, scan.spend_pubkey33)
    assert str(d.scan.origin) == "[3442193e/352h/0h/2h]" and d.scan.encoded.startswith("spspend1q")
    watch = descriptor.from_master(BIP32_MASTER, account=2, watch_only=True)
    assert watch.spend_key32 is None and watch.scan.encoded.startswith("spscan1q") and watch.address() == d.address()


def test_networks_follow_the_keys_and_the_address_uses_their_hrp():
    main, test = descriptor.decode(f"sp({SPSCAN})"), descriptor.decode(f"sp({TSPSCAN})")
    assert (main.network, test.network) == ("main", "test")
    assert address.decode(main.address()).hrp == "sp" and address.decode(test.address()).hrp == "tsp"
    assert main.scan_pubkey33 == PrivateKey(SCAN32).public_key.format()


def test_messages_never_carry_key_material():
    for text in (f"sp({SPSPEND}x)", f"sp({WIF[:-1]}x,{PUB})", f"sp({SPSPEND}/0)", f"sp({XPRV[:-2]},{PUB})"):
        with pytest.raises(DescriptorError) as err:
            descriptor.decode(text)
        assert SPSPEND[:20] not in str(err.value) and WIF[:12] not in str(err.value) and XPRV[:12] not in str(err.value)


def test_too_many_labels_to_scan_is_refused():
    with pytest.raises(DescriptorError, match="more than 100000 labels"):
        descriptor.decode(f"sp({SPSCAN})?ml=100001").receiver()
    with pytest.raises(DescriptorError, match="below 2"):
        descriptor.decode(f"sp({SPSCAN})?ml=4294967296")
