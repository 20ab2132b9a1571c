"""`scan.k0_outputs`: the k = 0 keys a light client looks up in a block's filter, native and reference."""

from __future__ import annotations

import random

import pytest
from coincurve import PrivateKey

from sp_scan import native, reference, scan
from sp_scan.address import labelled_spend_pubkey
from sp_scan.errors import InvalidKeyError
from sp_scan.reference.send import output_key
from sp_scan.scan import Receiver

BACKENDS = [pytest.param(reference.scan.k0_outputs, id="reference")]
if native.ENABLED:
    BACKENDS.append(pytest.param(native.k0_outputs, id="native"))


def tweaks(rng: random.Random, n: int, width: int) -> bytes:
    points = [PrivateKey(rng.randbytes(32)).public_key for _ in range(n)]
    return b"".join(p.format() if width == 33 else p.format(compressed=False)[1:] for p in points)


@pytest.mark.parametrize("k0", BACKENDS)
@pytest.mark.parametrize("labels", [(), (1, 7), tuple(range(1, 41))], ids=["change only", "two labels", "forty labels"])
def test_each_key_is_the_output_a_sender_makes_first_for_the_address_or_label(k0, labels):
    rng = random.Random(len(labels))
    scan_key, spend = rng.randbytes(32), PrivateKey(rng.randbytes(32)).public_key.format()
    receiver = Receiver(scan_key, spend, labels)
    packed = tweaks(rng, 5, 33)
    out = k0(packed, 33, receiver)
    per = 1 + len(receiver.labels)
    assert len(out) == 5 * per * 32
    for i in range(5):
        shared = reference.scan.shared_secret(packed[33 * i : 33 * i + 33], scan_key)
        expected = [output_key(shared, spend, 0)] + [output_key(shared, labelled_spend_pubkey(scan_key, spend, m), 0) for m in receiver.labels]
        assert [out[32 * (per * i + j) : 32 * (per * i + j + 1)] for j in range(per)] == expected


@pytest.mark.skipif(not native.ENABLED, reason="the native module is not built")
@pytest.mark.parametrize("width", [33, 64])
@pytest.mark.parametrize("threads", [1, 3])
def test_native_and_reference_agree_on_a_batch_of_any_size(width, threads):
    rng = random.Random(width * threads)
    receiver = Receiver(rng.randbytes(32), PrivateKey(rng.randbytes(32)).public_key.format(), (3, 9))
    for n in (0, 1, 63, 64, 65, 200):
        packed = tweaks(rng, n, width)
        assert native.k0_outputs(packed, width, receiver, threads) == reference.scan.k0_outputs(packed, width, receiver)


def test_the_backend_default_is_native_when_built():
    assert (scan.k0_outputs is native.k0_outputs) == native.ENABLED


@pytest.mark.parametrize("k0", BACKENDS)
def test_a_tweak_that_is_not_a_point_or_of_a_wrong_width_is_refused(k0):
    receiver = Receiver(b"\x01" * 32, PrivateKey(b"\x02" * 32).public_key.format())
    good = PrivateKey(b"\x03" * 32).public_key.format()
    with pytest.raises(InvalidKeyError, match="2"):
        k0(good * 2 + b"\x02" + b"\xff" * 32, 33, receiver)
    with pytest.raises(InvalidKeyError, match="whole number"):
        k0(good[:32], 33, receiver)
    with pytest.raises(InvalidKeyError, match="33 or 64"):
        k0(good, 32, receiver)
