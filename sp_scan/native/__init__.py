"""The one door to sp-scan's C extensions (`_hash`, `_core`).

Only this module imports the compiled code (tests reach the test-only
`_testcore` through `sp_scan.native._testing`). It converts arguments, checks
return codes and raises the typed errors of `sp_scan.errors`.

Three environment variables, read once at import; any other value raises
`ConfigError`:
    SP_SCAN_BACKEND  "native" (the default: the C extension) or "reference"
                     (the pure-Python reference).
    SP_SCAN_SHA256   "portable" forces the portable SHA256 compression instead
                     of SHA-NI / ARMv8 (unset: the CPU's best).
    SP_SCAN_ECC      the elliptic-curve engine: "ifma", "avx2", "scalar" or
                     "libsecp" ("libsecp256k1" and "portable" are synonyms);
                     unset: the best this CPU runs (ifma > avx2 > scalar).
                     Naming one the CPU or this build cannot run is refused.

The native backend also refuses (ConfigError) a coincurve other than the
releases in COINCURVE_VERSIONS: _core calls libsecp256k1 out of its library.
"""

import os as _os
import struct as _struct
import weakref as _weakref
from collections.abc import Sequence as _Sequence

from sp_scan._checks import check_batch as _check_batch
from sp_scan.errors import (
    ConfigError,
    InvalidKeyError,
    KeySumZeroError,
    KmaxExceededError,
    MalformedBlockError,
    MalformedDataError,
    PrevoutsError,
    SendError,
)
from sp_scan.types import BlockData, BlockMatch, FoundOutput, Summary, TxInput, TxTweak

_ERRORS = {
    "key": InvalidKeyError,
    "data": MalformedDataError,
    "block": MalformedBlockError,
    "prevouts": PrevoutsError,
    "send": SendError,
    "keysum": KeySumZeroError,
    "kmax": KmaxExceededError,
    "config": ConfigError,
}
BACKENDS = ("native", "reference")
SHA256_SETTINGS = ("portable",)
# SP_SCAN_ECC value -> the engine's name in _core (ec_engine() reports it)
EC_ENGINES = {
    "ifma": "ifma", "avx2": "avx2", "scalar": "scalar",
    "libsecp": "libsecp256k1", "libsecp256k1": "libsecp256k1", "portable": "libsecp256k1",
}  # fmt: skip
_SECP_FUNCTIONS = (
    "context_create", "context_destroy", "context_randomize", "context_set_illegal_callback",
    "ec_pubkey_parse", "ec_pubkey_serialize", "ec_pubkey_combine", "ec_pubkey_negate", "ec_pubkey_tweak_mul",
    "ec_pubkey_create", "ec_seckey_verify", "ec_seckey_negate", "ec_seckey_tweak_add", "ec_seckey_tweak_mul",
    "ecdh",
)  # fmt: skip
COINCURVE_VERSIONS = ("21.0.0",)
"""The coincurve releases whose libsecp256k1 _core was built and tested against (pyproject.toml pins the same):
_core calls its functions by address, so any other release is refused when the native backend starts."""


def _setting(name: str, accepted) -> str:
    """The value of environment variable `name` ("" when unset or empty); ConfigError when not accepted."""
    value = _os.environ.get(name, "")
    if value and value not in accepted:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(accepted)} (or unset)")
    return value


def _secp_addresses() -> dict[str, int]:
    """The addresses of the libsecp256k1 functions _core binds, from coincurve's compiled library.

    Raises:
        ConfigError: the installed coincurve is not one of COINCURVE_VERSIONS.
    """
    import coincurve
    from coincurve._libsecp256k1 import ffi, lib

    version = getattr(coincurve, "__version__", "(of no stated version)")
    if version not in COINCURVE_VERSIONS:
        raise ConfigError(
            f"coincurve {version} is installed, but sp-scan's C core binds libsecp256k1 out of coincurve "
            f"{' or '.join(COINCURVE_VERSIONS)} only: pip install 'coincurve=={COINCURVE_VERSIONS[-1]}' (or set SP_SCAN_BACKEND=reference)"
        )
    return {
        f"secp256k1_{name}": int(ffi.cast("uintptr_t", ffi.addressof(lib, f"secp256k1_{name}")))
        for name in _SECP_FUNCTIONS
    }


def _load():
    """Check the settings, import the compiled modules and start _core; (None, None) for the reference.

    _hash picks its SHA256 compression when imported (SHA-NI or ARMv8 SHA2 if the
    CPU has it, unless SP_SCAN_SHA256=portable); _core starts the EC engine.

    Raises:
        ConfigError: a setting is not accepted, SP_SCAN_BACKEND=native without the
            built extension, SP_SCAN_ECC names an engine this CPU or build cannot run,
            or coincurve is not one of COINCURVE_VERSIONS.
    """
    backend = _setting("SP_SCAN_BACKEND", BACKENDS)
    _setting("SP_SCAN_SHA256", SHA256_SETTINGS)
    engine = EC_ENGINES.get(_setting("SP_SCAN_ECC", tuple(EC_ENGINES)), "")
    if backend == "reference":
        return None, None
    try:
        from sp_scan.native import _core, _hash

        addresses = _secp_addresses()
    except ImportError as exc:
        if backend == "native":
            raise ConfigError(f"SP_SCAN_BACKEND=native but the C extension does not load ({exc})") from None
        return None, None
    _core.init(addresses, _ERRORS, engine)
    return _hash, _core


_hash, _core = _load()
ENABLED: bool = _core is not None
"""True when the C stages are in use (False with SP_SCAN_BACKEND=reference or no extension)."""

# ---- hashing (_hash) --------------------------------------------------------
_TAG_INDEX = {"BIP0352/Inputs": 0, "BIP0352/SharedSecret": 1, "BIP0352/Label": 2}


def sha256(data: bytes) -> bytes:
    """Return SHA256(data), 32 bytes."""
    return _hash.sha256(data)


def tagged_hash(tag: str, msg: bytes) -> bytes:
    """Return the BIP340 tagged hash of msg, 32 bytes, from a precomputed midstate.

    Args:
        tag: one of "BIP0352/Inputs", "BIP0352/SharedSecret", "BIP0352/Label".
        msg: message bytes.

    Raises:
        ValueError: tag is not one of the three BIP352 tags.
    """
    index = _TAG_INDEX.get(tag)
    if index is None:
        raise ValueError(f"tagged_hash: tag must be one of {sorted(_TAG_INDEX)}, got {tag!r}")
    return _hash.tagged_hash(index, msg)


def hash160(data: bytes) -> bytes:
    """Return RIPEMD160(SHA256(data)), 20 bytes."""
    return _hash.hash160(data)


def ec_engine() -> str:
    """Return the elliptic-curve engine scans use: "ifma", "avx2", "scalar", "libsecp256k1", or "reference".

    Picked at import: SP_SCAN_ECC's engine, else the best this CPU runs: "ifma" (8 lanes of AVX-512
    IFMA: cpuid has AVX-512 F/DQ/BW/VL/IFMA and the OS saves the zmm registers), "avx2" (4 lanes), or
    "scalar" (64-bit limbs, every CPU). "libsecp256k1" is the engine on libsecp256k1's public API
    (SP_SCAN_ECC=libsecp); "reference" without the C stages.
    """
    return _core.ec_engine() if ENABLED else "reference"


def sha256_impl() -> str:
    """Return the SHA256 compression in use: "shani", "armv8" or "portable"."""
    return _hash.impl()


def golomb_set(
    key16: bytes, items: _Sequence[bytes] | bytes, width: int = 0, name: str = "items", p: int = 19, m: int = 784931
) -> bytes:
    """Native `filters.golomb_set`: the BIP158 Golomb-coded set, built in C.

    SipHash-2-4, the map into [0, N·m), the sort and the Golomb-Rice coding are C; the GIL is
    released for the sort and the coding.

    Raises:
        MalformedDataError: key16 is not 16 bytes, or an item is not `width` bytes (width != 0).
        ValueError: p or m out of range.
    """
    if len(key16) != 16:
        raise MalformedDataError("key16 must be 16 bytes")
    if not (1 <= p <= 32 and 1 <= m):
        raise ValueError("golomb_set needs 1 <= p <= 32 and m >= 1")
    try:
        return _hash.golomb_set(key16, items, width, p, m)
    except ValueError as e:
        raise MalformedDataError(f"{name}: {e}") from None


def golomb_match(key16: bytes, n: int, stream: bytes, items: _Sequence[bytes] | bytes, width: int = 0, p: int = 19, m: int = 784931) -> list[int]:
    """Native `reference.filters.golomb_match`: the items' values hashed, sorted and merged with the decoded set in C.

    Raises:
        MalformedDataError: key16 is not 16 bytes, an item is not `width` bytes, or the stream ends before its n values.
    """
    if len(key16) != 16:
        raise MalformedDataError("key16 must be 16 bytes")
    try:
        return _hash.golomb_match(key16, n, stream, items, width, p, m)
    except (ValueError, OverflowError) as e:
        raise MalformedDataError(str(e)) from None


def spent_hashes(block_hash32: bytes, outpoints36: _Sequence[bytes] | bytes) -> list[bytes]:
    """Native `filters.spent_hashes`: SHA256(outpoint36 ‖ block_hash32)[:8] of each outpoint.

    Raises:
        MalformedDataError: block_hash32 is not 32 bytes or an outpoint is not 36 bytes.
    """
    if len(block_hash32) != 32:
        raise MalformedDataError("block_hash32 must be 32 bytes")
    try:
        return _hash.spent_hashes(block_hash32, outpoints36)
    except ValueError as e:
        raise MalformedDataError(f"outpoints36: {e}") from None


# ---- the C stages (_core) ---------------------------------------------------
# Same signatures and results as the reference stages; sp_scan.backend binds
# the stages to these when ENABLED.
LABEL_STRATEGIES = {"auto": 0, "bip": 1, "labelset": 2}


def set_label_strategy(name: str) -> str:
    """Force the scan's label strategy for the whole process (tests); returns the previous one.

    "bip" checks O − P_k and −O − P_k for every output (2N point additions per k),
    "labelset" checks x(P_k + L_m) for every label (L per k), "auto" picks the
    cheaper per transaction. All three give the same results.

    Raises:
        ValueError: unknown name.
    """
    if name not in LABEL_STRATEGIES:
        raise ValueError(f"label strategy must be one of {sorted(LABEL_STRATEGIES)}")
    previous = _core.set_label_strategy(LABEL_STRATEGIES[name])
    return next(k for k, v in LABEL_STRATEGIES.items() if v == previous)


_scanners: _weakref.WeakKeyDictionary = _weakref.WeakKeyDictionary()


def _scanner(receiver):
    """The native Scanner of a scan.Receiver, built once per receiver."""
    scanner = _scanners.get(receiver)
    if scanner is None:
        labels = [(m, label33, tweak32) for label33, (m, tweak32) in receiver.label_table.items()]
        scanner = _core.Scanner(receiver.scan_key32, receiver.spend_pubkey33, labels)
        _scanners[receiver] = scanner
    return scanner


def release_scanner(receiver) -> None:
    """Wipe and free the native copy of `receiver`'s keys now, not when the receiver is collected.

    A later scan with the same receiver builds a new copy.

    Raises:
        RuntimeError: a scan with it is running in another thread (the copy is kept).
    """
    scanner = _scanners.get(receiver)
    if scanner is not None:
        scanner.close()
        del _scanners[receiver]


def _found(outputs32: _Sequence[bytes], found: list) -> list[FoundOutput]:
    return [FoundOutput(bytes(outputs32[i]), tweak32, label) for i, tweak32, label in found]


def input_pubkey(prevout_script: bytes, script_sig: bytes, witness: _Sequence[bytes]) -> bytes | None:
    """Native `extract.input_pubkey`: 33-byte key, 32-byte x-only key, or None."""
    return _core.input_pubkey(prevout_script, script_sig, witness)


def tx_pubkeys(inputs: _Sequence[TxInput]) -> list[bytes] | None:
    """Native `extract.tx_pubkeys`: the eligible keys in input order; None for a segwit v2+ spend."""
    return _core.tx_pubkeys(inputs)


def summarize(inputs: _Sequence[TxInput]) -> Summary | None:
    """Native `summary.summarize`: the prevouts summary, or None when not an SP transaction."""
    result = _core.summarize(inputs)
    return None if result is None else Summary(*result)


def scan_tx(inputs: _Sequence[TxInput], outputs32: _Sequence[bytes], receiver) -> list[FoundOutput]:
    """Native `scan.scan_tx`, with ecdh = (b_scan·input_hash)·A (one multiplication).

    Raises:
        InvalidKeyError: an output is not 32 bytes.
    """
    return _found(outputs32, _core.scan_tx(_scanner(receiver), inputs, outputs32))


def scan_tweak(tweak33: bytes, outputs32: _Sequence[bytes], receiver) -> list[FoundOutput]:
    """Native `scan.scan_tweak`: scan with a light-client tweak (input_hash·A), a batch of one.

    Raises:
        InvalidKeyError: tweak33 is not a valid compressed point, or an output is not 32 bytes.
    """
    return _found(outputs32, _core.scan_tweak(_scanner(receiver), tweak33, outputs32))


def scan_tweaks_packed(
    tweaks: bytes, tweak_width: int, outputs32: bytes, counts: bytes, receiver, threads: int = 1
) -> list[tuple[int, int, bytes, int | None]]:
    """Native `scan.scan_tweaks_packed`: a batch of packed tweaks scanned without the GIL.

    The `threads` native threads each take a contiguous slice of the txs and
    share the buffers and the receiver's scanner; the results do not depend on
    `threads` (capped at n and at 256).

    Args:
        tweaks: n tweaks (input_hash·A) of tweak_width bytes, concatenated.
        tweak_width: 33 (ser_P) or 64 (x ‖ y, parsed without a square root).
        outputs32: the 32-byte x-only output keys of every tx, tx after tx.
        counts: n little-endian uint32: tx i owns the next counts[i] keys.
        receiver: a `scan.Receiver`.
        threads: native threads, >= 1.

    Returns:
        (tx_index, output_index_within_tx, tweak32, label or None) per found output, by tx, then k.

    Raises:
        InvalidKeyError: tweak_width not 33 or 64, tweaks not a whole number of them, or a tweak that
            is not a valid point (the message names the lowest such tx index; nothing is returned).
        MalformedDataError: counts not 4 bytes per tweak, or not adding up to len(outputs32) / 32.
        ValueError: threads < 1.
    """
    return _core.scan_tweaks_packed(_scanner(receiver), tweaks, tweak_width, outputs32, counts, threads)


def scan_tweaks(
    tweaks: _Sequence[bytes], outputs: _Sequence[_Sequence[bytes]], receiver, *, threads: int = 1
) -> list[list[FoundOutput]]:
    """Native `scan.scan_tweaks`: the lists packed once, then one `scan_tweaks_packed` call.

    Raises:
        as `scan.scan_tweaks`.
    """
    width = _check_batch(tweaks, outputs, threads)
    counts = _struct.pack(f"<{len(outputs)}I", *map(len, outputs))
    packed = b"".join(o for outs in outputs for o in outs)
    found: list[list[FoundOutput]] = [[] for _ in tweaks]
    for tx, i, tweak32, label in scan_tweaks_packed(b"".join(tweaks), width, packed, counts, receiver, threads):
        found[tx].append(FoundOutput(bytes(outputs[tx][i]), tweak32, label))
    return found


def k0_outputs(tweaks: bytes, tweak_width: int, receiver, threads: int = 1) -> bytes:
    """Native `scan.k0_outputs`: the k = 0 outputs of many tweaks in C, without the GIL, over `threads` threads.

    Raises:
        InvalidKeyError: tweak_width not 33 or 64, tweaks not a whole number of them, or a tweak that
            is not a valid point (the message names the lowest index).
        ValueError: threads < 1.
    """
    return _core.k0_outputs(_scanner(receiver), tweaks, tweak_width, threads)


def shared_secret(tweak33: bytes, scan_key32: bytes) -> bytes:
    """Native `scan.shared_secret`: ser_P(b_scan·tweak), 33 bytes.

    Raises:
        InvalidKeyError: a key of the wrong width or not a valid key.
    """
    return _core.shared_secret(tweak33, scan_key32)


def _send_args(outpoints, input_keys) -> tuple[list[bytes], list[tuple[bytes, bool]]]:
    return [o.to_bytes() for o in outpoints], [(k.private_key32, k.is_taproot) for k in input_keys]


def create_outputs(outpoints, input_keys, recipients) -> list[bytes]:
    """Native `send.create_outputs`: the x-only output paying each recipient, in recipient order.

    Raises:
        as `send.create_outputs` (SendError, InvalidKeyError, KeySumZeroError, KmaxExceededError).
    """
    ops, keys = _send_args(outpoints, input_keys)
    return _core.create_outputs(ops, keys, [(r.scan_pubkey33, r.spend_pubkey33) for r in recipients])


def send_shared_secret(outpoints, input_keys, scan_pubkey33: bytes) -> bytes:
    """Native `send.shared_secret`: ser_P((input_hash·a)·B_scan), 33 bytes.

    Raises:
        as `send.create_outputs`.
    """
    ops, keys = _send_args(outpoints, input_keys)
    return _core.send_shared_secret(ops, keys, scan_pubkey33)


def block_tweaks(block_bytes: bytes, spent_bytes: bytes) -> list[TxTweak]:
    """Native `block.tweaks`: per eligible tx of a raw block, its txid and input_hash·A.

    The GIL is released while the block is parsed and summarized.

    Raises:
        MalformedBlockError: the block does not parse.
        MalformedDataError: the spent outputs do not parse.
        PrevoutsError: they do not match the block's inputs.
    """
    return [TxTweak(txid32, tweak33) for txid32, tweak33 in _core.block_tweaks(block_bytes, spent_bytes)]


def block_scan(block_bytes: bytes, spent_bytes: bytes, receiver) -> list[BlockMatch]:
    """Native `block.scan`: the outputs of a block paying `receiver`, block order then vout order.

    Raises:
        as `block_tweaks`.
    """
    return [
        BlockMatch(txid32, vout, amount, FoundOutput(output32, tweak32, label))
        for txid32, vout, amount, output32, tweak32, label in _core.block_scan(block_bytes, spent_bytes, _scanner(receiver))
    ]


def block_index(block_bytes: bytes, spent_bytes: bytes) -> BlockData:
    """Native `block.block_index`: what the tweak index keeps of one block, computed in one pass.

    The GIL is released while the block is parsed and summarized.

    Raises:
        as `block_tweaks`.
    """
    return BlockData(*_core.block_index(block_bytes, spent_bytes))


def mark_spent(found: list[int | None], bitmaps: dict[int, bytearray]) -> bytes:
    """Native `reference.block.mark_spent`: the spent bits set for `found`, the marks made (u32 LE pairs)."""
    return _core.mark_spent(found, bitmaps)


def output_map():
    """Native `reference.block.OutputMap`: an empty map whose slot hash takes a fresh random key (80-bit
    identities: two outpoints pass for one with probability ~n/2^80)."""
    return _core.OutputMap(_os.urandom(16))


def spent_from_undo(undo_bytes: bytes) -> bytes:
    """Native `wire.spent_from_undo`: Core's undo data of a block in the REST spent-outputs form.

    The GIL is released while it is decoded.

    Raises:
        MalformedDataError: as `wire.spent_from_undo`.
    """
    return _core.spent_from_undo(undo_bytes)


def block_commits(block_bytes: bytes) -> bool:
    """Native `wire.block_commits`: True when the block's header commits to its transactions (merkle root,
    BIP141 witness commitment). The GIL is released while it hashes."""
    return _core.block_commits(block_bytes)


def unxor(data: bytes, key8: bytes, offset: int) -> bytes:
    """Native `wire.unxor`: `data` read at `offset` of a file Core obfuscated with `key8`, in the clear.

    Raises:
        MalformedDataError: key8 is not 8 bytes.
    """
    return _core.unxor(data, key8, offset)


# ---- BIP374 proofs and BIP375 ECDH shares (secrets stay in C) -----------------


def dleq_prove(a32: bytes, b33: bytes, r32: bytes, g33: bytes, m32: bytes | None) -> tuple[bytes, bytes, bytes] | None:
    """Native half of `dleq.generate_proof`: (A33, C33, proof64) before the final verification.

    Returns None where BIP374 says generation fails (a = 0 or a >= n, k = 0).

    Raises:
        InvalidKeyError: a width is wrong, or B33 / G33 is not a valid compressed point.
    """
    return _core.dleq_prove(a32, b33, r32, g33, m32)


def ecdh_share(input_keys, scan_pubkey33: bytes, aux_rand32: bytes) -> tuple[bytes, bytes, bytes] | None:
    """Native half of `send.ecdh_share`: (share33, A33, proof64), a = Σ keys summed and wiped in C.

    Returns None when proof generation fails (k = 0).

    Raises:
        SendError: no input key.
        InvalidKeyError: a key is not in [1, n-1], a width is wrong, or scan_pubkey33 is not a point.
        KeySumZeroError: the keys sum to zero.
    """
    return _core.ecdh_share([(k.private_key32, k.is_taproot) for k in input_keys], scan_pubkey33, aux_rand32)
