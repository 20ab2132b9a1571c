"""Native SHA256, tagged hashes and HASH160 agree with hashlib, on the fast path and the portable fallback."""

import hashlib
import os
import platform
import random
import struct
import subprocess
import sys

import pytest

from sp_scan import native
from sp_scan.native import _hash

# SP_SCAN_BACKEND=reference turns the native door off; only that explicit run skips this module.
pytestmark = pytest.mark.skipif(not native.ENABLED and os.environ.get("SP_SCAN_BACKEND") == "reference", reason="SP_SCAN_BACKEND=reference")

TAGS = ["BIP0352/Inputs", "BIP0352/SharedSecret", "BIP0352/Label"]
LENGTHS = [*range(1001), 4096, 100_000]


def cpu_supported_impl() -> str:
    """The compression /proc/cpuinfo says the CPU supports (independent of the C CPUID probe)."""
    try:
        with open("/proc/cpuinfo") as f:
            words = set(f.read().split())
    except OSError:
        words = set()
    if platform.machine() in ("x86_64", "AMD64") and {"sha_ni", "sse4_1", "ssse3"} <= words:
        return "shani"
    if platform.machine() in ("aarch64", "arm64") and "sha2" in words:
        return "armv8"
    return "portable"


def cpu_fast_impl() -> str:
    """What select(False) must pick in this process: the CPU's best unless SP_SCAN_SHA256=portable."""
    return "portable" if os.environ.get("SP_SCAN_SHA256") == "portable" else cpu_supported_impl()


@pytest.fixture(params=["fast", "portable"])
def impl(request):
    """Select the CPU's fast compression or the forced fallback in-process; restore afterwards."""
    expected = "portable" if request.param == "portable" else cpu_fast_impl()
    assert _hash.select(request.param == "portable") == expected
    assert native.sha256_impl() == expected
    yield expected
    _hash.select(False)


def ref_tagged(tag: str, msg: bytes) -> bytes:
    tag_hash = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(tag_hash + tag_hash + msg).digest()


def ref_hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


def test_this_machine_reports_its_cpu_sha_support_honestly():
    assert _hash.select(False) == cpu_fast_impl()
    assert native.sha256_impl() == cpu_fast_impl()


def test_sha256_tagged_hash_hash160_equal_hashlib_on_every_length(impl):
    rng = random.Random(352)
    for n in LENGTHS:
        data = rng.randbytes(n)
        assert native.sha256(data) == hashlib.sha256(data).digest(), (impl, n)
        tag = TAGS[n % 3]
        assert native.tagged_hash(tag, data) == ref_tagged(tag, data), (impl, tag, n)
        assert native.hash160(data) == ref_hash160(data), (impl, n)


def test_ripemd160_equals_hashlib_on_every_length():
    rng = random.Random(160)
    for n in LENGTHS:
        data = rng.randbytes(n)
        assert _hash.ripemd160(data) == hashlib.new("ripemd160", data).digest(), n


def test_hash160_of_33_byte_keys_uses_the_single_block_path_correctly(impl):
    rng = random.Random(33)
    for _ in range(2000):
        key33 = rng.randbytes(33)
        assert native.hash160(key33) == ref_hash160(key33)
    assert _hash.hash160_loop(key33, 3, True) == _hash.hash160_loop(key33, 3, False) == ref_hash160(key33)


def test_streaming_in_random_chunks_equals_one_shot(impl):
    rng = random.Random(64)
    for _ in range(300):
        data = rng.randbytes(rng.choice([rng.randrange(300), rng.randrange(5000)]))
        cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(8)))
        parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
        assert _hash.sha256_parts(parts) == hashlib.sha256(data).digest(), [len(p) for p in parts]


def test_sha256_loop_returns_the_digest_of_its_buffer(impl):
    data = bytes(range(100))
    assert _hash.sha256_loop(data, 5) == hashlib.sha256(data).digest()


def test_buffers_are_accepted_and_text_is_rejected():
    data = bytearray(b"silent payments" * 10)
    assert native.sha256(memoryview(data)) == native.sha256(data) == hashlib.sha256(data).digest()
    with pytest.raises(TypeError):
        native.sha256("text")
    with pytest.raises(TypeError):
        native.hash160(None)


def sha256_compress(state, block64):
    """Independent SHA256 compression (FIPS 180-4), used to recompute the tagged midstates."""
    mask = 0xFFFFFFFF

    def ror(x, n):
        return ((x >> n) | (x << (32 - n))) & mask

    w = list(struct.unpack(">16I", block64))
    for i in range(16, 64):
        s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)
        s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10)
        w.append((w[i - 16] + s0 + w[i - 7] + s1) & mask)
    a, b, c, d, e, f, g, h = state
    for i in range(64):
        t1 = (h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + SHA256_K[i] + w[i]) & mask
        t2 = ((ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) & mask
        a, b, c, d, e, f, g, h = (t1 + t2) & mask, a, b, c, (d + t1) & mask, e, f, g
    return [(x + y) & mask for x, y in zip(state, [a, b, c, d, e, f, g, h])]


PRIMES_64 = [p for p in range(2, 312) if all(p % q for q in range(2, int(p**0.5) + 1))][:64]
SHA256_IV = [int((p**0.5 % 1) * 2**32) for p in PRIMES_64[:8]]
SHA256_K = [int((p ** (1 / 3) % 1) * 2**32) for p in PRIMES_64]


def test_independent_compression_reproduces_hashlib():
    msg = b"abc"
    block = msg + b"\x80" + bytes(55 - len(msg)) + struct.pack(">Q", 8 * len(msg))
    assert struct.pack(">8I", *sha256_compress(SHA256_IV, block)) == hashlib.sha256(msg).digest()


@pytest.mark.parametrize("index,tag", list(enumerate(TAGS)), ids=TAGS)
def test_tagged_midstate_constants_are_the_compressed_tag_block(index, tag):
    tag_hash = hashlib.sha256(tag.encode()).digest()
    expected = struct.pack(">8I", *sha256_compress(SHA256_IV, tag_hash + tag_hash))
    assert _hash.tagged_midstate(index) == (expected, 64)


def test_unknown_tags_are_rejected():
    with pytest.raises(ValueError):
        native.tagged_hash("BIP0340/challenge", b"")
    for index in (-1, 3):
        with pytest.raises(ValueError):
            _hash.tagged_hash(index, b"")
        with pytest.raises(ValueError):
            _hash.tagged_midstate(index)


@pytest.mark.parametrize(
    "env_value,expected", [("portable", "portable"), (None, cpu_supported_impl())], ids=["portable", "unset"]
)
def test_sp_scan_sha256_env_selects_at_import(env_value, expected):
    env = {k: v for k, v in os.environ.items() if k != "SP_SCAN_SHA256"}
    if env_value is not None:
        env["SP_SCAN_SHA256"] = env_value
    code = "from sp_scan import native; print(native.sha256_impl())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
