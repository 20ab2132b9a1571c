"""`sp()` output descriptors (BIP392) with annotations (BIP393) and the BIP380 checksum.

A descriptor holds private keys: read it from a file or stdin, never from an
argument, and never print it. The forms read here:

- `sp(spscan1q…)` / `sp(spspend1q…)` (testnets: `tspscan`, `tspspend`), with
  an optional key origin `[fingerprint/path]`;
- `sp(SCAN,SPEND)`: SCAN a compressed WIF or an `xprv`/`tprv` with optional
  derivation steps; SPEND a 33-byte hex public key, a compressed WIF, or an
  extended key with derivation steps. `musig()` spend keys are refused.

Annotations (`?bh=…&gl=…&ml=…`) give the birthday height, gap limit and the
highest label to scan; unknown keys are kept but not used.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field

from coincurve import PrivateKey, PublicKey

from . import address, crypto
from .errors import DescriptorError, InvalidAddressError
from .network import MAIN, TEST
from .network import get as get_network
from .types import Receiver

INPUT_CHARSET = "0123456789()[],'/*abcdefgh@:$%{}IJKLMNOPQRSTUVWXYZ&+-.;<=>?!^_|~ijklmnopqrstuvwxyzABCDEFGH`#\"\\ "
CHECKSUM_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATOR = (0xF5DEE51989, 0xA9FDCA3312, 0x1BAB10E32D, 0x3706B1677A, 0x644D626FFD)

BIRTHDAY_HEIGHT, GAP_LIMIT, MAX_LABEL = "bh", "gl", "ml"
MAX_SCANNED_LABELS = 100_000
"""The largest `ml` a receiver is built for (each label costs a point multiplication)."""
HARDENED = 0x80000000

_HRPS = {"spscan": (MAIN, False), "tspscan": (TEST, False), "spspend": (MAIN, True), "tspspend": (TEST, True)}
_WIF = {0x80: MAIN, 0xEF: TEST}
_XPRV = {bytes.fromhex("0488ade4"): MAIN, bytes.fromhex("04358394"): TEST}
_XPUB = {bytes.fromhex("0488b21e"): MAIN, bytes.fromhex("043587cf"): TEST}
_PAIR = re.compile(r"([a-z]+)=(0|[1-9][0-9]*)")
_STEP = re.compile(r"([0-9]+)([h']?)")


def _polymod(symbols: list[int]) -> int:
    chk = 1
    for value in symbols:
        top = chk >> 35
        chk = (chk & 0x7FFFFFFFF) << 5 ^ value
        for i in range(5):
            chk ^= _GENERATOR[i] if (top >> i) & 1 else 0
    return chk


def _expand(s: str) -> list[int]:
    symbols, groups = [], []
    for c in s:
        v = INPUT_CHARSET.find(c)
        if v < 0:
            raise DescriptorError("the descriptor has a character outside BIP380's character set")
        symbols.append(v & 31)
        groups.append(v >> 5)
        if len(groups) == 3:
            symbols.append(groups[0] * 9 + groups[1] * 3 + groups[2])
            groups = []
    if len(groups) == 1:
        symbols.append(groups[0])
    elif len(groups) == 2:
        symbols.append(groups[0] * 3 + groups[1])
    return symbols


def checksum(text: str) -> str:
    """Return the 8-character BIP380 checksum of a descriptor (everything before `#`).

    Raises:
        DescriptorError: a character outside BIP380's character set.
    """
    value = _polymod(_expand(text) + [0] * 8) ^ 1
    return "".join(CHECKSUM_CHARSET[(value >> (5 * (7 - i))) & 31] for i in range(8))


def split_annotated(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """Check the BIP380 checksum (optional) and split off BIP393 annotations.

    Works for any descriptor: returns the script expression and the
    annotation pairs in their written order.

    Raises:
        DescriptorError: a bad character or checksum, or an annotation form BIP393 refuses
            (mixed-case or empty key, empty, missing, negative, non-decimal or zero-padded value,
            a trailing `&`, no pairs, a repeated key, more than one `?`).
    """
    text = text.strip()
    body, hash_mark, check = text.partition("#")
    _expand(body)
    if hash_mark:
        if len(check) != 8 or any(c not in CHECKSUM_CHARSET for c in check):
            raise DescriptorError("the checksum after '#' must be 8 characters of the bech32 alphabet")
        if _polymod(_expand(body) + [CHECKSUM_CHARSET.find(c) for c in check]) != 1:
            raise DescriptorError("wrong descriptor checksum")
    script, question, annotations = body.partition("?")
    if not question:
        return script, ()
    if "?" in annotations:
        raise DescriptorError("only one '?' may start the annotations")
    if not annotations:
        raise DescriptorError("no annotation pairs after '?'")
    pairs: list[tuple[str, int]] = []
    for n, pair in enumerate(annotations.split("&"), 1):
        match = _PAIR.fullmatch(pair)
        if match is None:
            raise DescriptorError(f"annotation {n} is not key=value with a lowercase key and a decimal value without leading zeros")
        if any(match[1] == k for k, _ in pairs):
            raise DescriptorError(f"annotation key {match[1]!r} appears twice")
        pairs.append((match[1], int(match[2])))
    return script, tuple(pairs)


# ---- keys ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyOrigin:
    """Key origin information: `[fingerprint/path]`.

    Attributes:
        fingerprint4: the fingerprint of the key the path starts from.
        path: derivation steps, hardened ones with the 2**31 bit set.
    """

    fingerprint4: bytes
    path: tuple[int, ...]

    def __str__(self) -> str:
        return "[" + self.fingerprint4.hex() + _path_text(self.path) + "]"


def _path_text(path: tuple[int, ...]) -> str:
    return "".join(f"/{i & ~HARDENED}h" if i & HARDENED else f"/{i}" for i in path)


def _path(steps: list[str], where: str) -> tuple[int, ...]:
    out = []
    for step in steps:
        if step in ("*", "*h", "*'"):
            raise DescriptorError(f"{where}: sp() takes single keys, not ranges (/*)")
        match = _STEP.fullmatch(step)
        if match is None or int(match[1]) >= HARDENED:
            raise DescriptorError(f"{where}: {step!r} is not a derivation step (NUM or NUMh below 2^31)")
        out.append(int(match[1]) | (HARDENED if match[2] else 0))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Key:
    """One key expression of an `sp()` descriptor.

    Attributes:
        origin: the key origin, or None.
        encoded: the key as written: spscan/spspend bech32m, WIF, xprv/xpub, or hex (may be secret).
        path: derivation steps after an extended key.
    """

    origin: KeyOrigin | None
    encoded: str = field(repr=False)
    path: tuple[int, ...] = ()

    def __str__(self) -> str:
        return (str(self.origin) if self.origin else "") + self.encoded + _path_text(self.path)


def _parse_key(text: str, where: str) -> Key:
    origin = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise DescriptorError(f"{where}: key origin without ']'")
        fingerprint, *steps = text[1:end].split("/")
        if not re.fullmatch(r"[0-9a-fA-F]{8}", fingerprint):
            raise DescriptorError(f"{where}: a key origin starts with 8 hex digits of fingerprint")
        origin = KeyOrigin(bytes.fromhex(fingerprint), _path(steps, f"{where} origin"))
        text = text[end + 1 :]
    if "[" in text or "]" in text:
        raise DescriptorError(f"{where}: misplaced key origin brackets")
    if not text:
        raise DescriptorError(f"{where}: key origin without a key")
    encoded, *steps = text.split("/")
    return Key(origin, encoded, _path(steps, where))


@dataclass(frozen=True, slots=True)
class _ExtKey:
    network: str
    depth: int
    chain32: bytes = field(repr=False)
    secret32: bytes | None = field(repr=False)
    pubkey33: bytes


def _extended(text: str, where: str) -> _ExtKey:
    data = address.base58check(text, where, DescriptorError)
    if len(data) != 78:
        raise DescriptorError(f"{where}: an extended key is 78 bytes")
    version, depth, chain, keydata = data[:4], data[4], data[13:45], data[45:]
    if version in _XPRV:
        if keydata[0] != 0 or not 0 < int.from_bytes(keydata[1:], "big") < crypto.N:
            raise DescriptorError(f"{where}: invalid extended private key")
        return _ExtKey(_XPRV[version], depth, chain, keydata[1:], PrivateKey(keydata[1:]).public_key.format())
    if version in _XPUB:
        if crypto.point(keydata) is None:
            raise DescriptorError(f"{where}: invalid extended public key")
        return _ExtKey(_XPUB[version], depth, chain, None, keydata)
    raise DescriptorError(f"{where}: unknown extended key version")


def _derive(key: _ExtKey, path: tuple[int, ...], where: str) -> _ExtKey:
    """BIP32 child key derivation along `path` (CKDpriv, or CKDpub without a secret).

    The child secret k + I_L and the child point K + I_L·G come from libsecp256k1's tweak-add
    (coincurve), constant-time, which refuses I_L >= n and a zero or infinite child as BIP32 does.
    """
    for i in path:
        if i & HARDENED:
            if key.secret32 is None:
                raise DescriptorError(f"{where}: hardened derivation needs an extended private key")
            data = b"\x00" + key.secret32 + i.to_bytes(4, "big")
        else:
            data = key.pubkey33 + i.to_bytes(4, "big")
        digest = hmac.new(key.chain32, data, hashlib.sha512).digest()
        tweak, chain = digest[:32], digest[32:]
        try:
            if key.secret32 is not None:
                child = PrivateKey(key.secret32).add(tweak)
                key = _ExtKey(key.network, key.depth + 1, chain, child.secret, child.public_key.format())
            else:
                key = _ExtKey(key.network, key.depth + 1, chain, None, PublicKey(key.pubkey33).add(tweak).format())
        except ValueError:
            raise DescriptorError(f"{where}: derivation step {i} gives an invalid key") from None
    return key


def _wif(text: str, where: str) -> tuple[str, bytes]:
    data = address.base58check(text, where, DescriptorError)
    if data[:1] and data[0] in _WIF and len(data) == 33:
        raise DescriptorError(f"{where}: uncompressed keys are not allowed in sp() (BIP352 uses compressed keys only)")
    if len(data) != 34 or data[0] not in _WIF or data[33] != 1:
        raise DescriptorError(f"{where}: not a compressed WIF private key")
    if not 0 < int.from_bytes(data[1:33], "big") < crypto.N:
        raise DescriptorError(f"{where}: the WIF key is out of range")
    return _WIF[data[0]], data[1:33]


def _resolve(key: Key, where: str) -> tuple[str | None, bytes | None, bytes]:
    """(network or None for hex, secret or None, compressed public key) of a single-key expression."""
    text = key.encoded
    if text.startswith("musig("):
        raise DescriptorError(f"{where}: musig() spend keys are not supported")
    if re.fullmatch(r"[0-9a-fA-F]+", text):
        if key.path:
            raise DescriptorError(f"{where}: a hex public key takes no derivation steps")
        if len(text) == 130 and text[:2] == "04":
            raise DescriptorError(f"{where}: uncompressed keys are not allowed in sp() (BIP352 uses compressed keys only)")
        if len(text) != 66 or crypto.point(bytes.fromhex(text)) is None:
            raise DescriptorError(f"{where}: not a 33-byte compressed public key")
        return None, None, bytes.fromhex(text)
    if text[:4] in ("xprv", "tprv", "xpub", "tpub"):
        derived = _derive(_extended(text, where), key.path, where)
        return derived.network, derived.secret32, derived.pubkey33
    if key.path:
        raise DescriptorError(f"{where}: a WIF key takes no derivation steps")
    network, secret = _wif(text, where)
    return network, secret, PrivateKey(secret).public_key.format()


# ---- the descriptor --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SPDescriptor:
    """A decoded `sp()` descriptor. Its keys never appear in `repr`.

    Attributes:
        scan: the first key expression (spscan/spspend in the one-key form).
        spend: the second key expression, or None in the one-key form.
        annotations: BIP393 pairs in written order (unknown keys kept, unused).
        network: "main" or "test".
        scan_key32: b_scan.
        spend_pubkey33: B_spend.
        spend_key32: b_spend when the descriptor holds it, else None (watch-only).

    Raises:
        DescriptorError: any form BIP392 refuses, or keys of different networks.
    """

    scan: Key
    spend: Key | None = None
    annotations: tuple[tuple[str, int], ...] = ()
    network: str = field(init=False)
    scan_key32: bytes = field(init=False, repr=False)
    spend_pubkey33: bytes = field(init=False)
    spend_key32: bytes | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for key, value in self.annotations:
            if not _PAIR.fullmatch(f"{key}={value}"):
                raise DescriptorError(f"annotation {key}={value} is not a lowercase key with a non-negative integer")
        if self.max_labels is not None and self.max_labels >= 2**32:
            raise DescriptorError("ml must be below 2^32 (labels are 32-bit)")
        if self.spend is None:
            network, scan32, spend_secret, spend33 = _one_key(self.scan)
        else:
            network, scan32, spend_secret, spend33 = _two_keys(self.scan, self.spend)
        for name, value in (("network", network), ("scan_key32", scan32), ("spend_pubkey33", spend33), ("spend_key32", spend_secret)):
            object.__setattr__(self, name, value)

    def _annotation(self, key: str) -> int | None:
        return next((v for k, v in self.annotations if k == key), None)

    @property
    def birthday_height(self) -> int | None:
        """`bh`: the height to start scanning from, or None."""
        return self._annotation(BIRTHDAY_HEIGHT)

    @property
    def gap_limit(self) -> int | None:
        """`gl`: the gap limit, or None (BIP32 wallets; unused by silent payments)."""
        return self._annotation(GAP_LIMIT)

    @property
    def max_labels(self) -> int | None:
        """`ml`: the highest label m to scan for, or None."""
        return self._annotation(MAX_LABEL)

    @property
    def spend_origin(self) -> KeyOrigin | None:
        """Where B_spend comes from, as BIP376's PSBT_IN_SP_SPEND_BIP32_DERIVATION gives it, or None when the descriptor
        does not say: sp([origin]spspend…) is origin/0h/0 (BIP392: BIP352's spend path below it); a spend key expression
        is its origin followed by its steps, an extended key without one its own fingerprint and steps."""
        if self.spend is None:
            origin = self.scan.origin
            return None if origin is None else KeyOrigin(origin.fingerprint4, (*origin.path, HARDENED, 0))
        key = self.spend
        if key.origin is not None:
            return KeyOrigin(key.origin.fingerprint4, key.origin.path + key.path)
        if key.encoded[:4] in ("xprv", "tprv", "xpub", "tpub"):
            return KeyOrigin(crypto.hash160(_extended(key.encoded, "spend key").pubkey33)[:4], key.path)
        return None

    @property
    def scan_pubkey33(self) -> bytes:
        """B_scan."""
        return PrivateKey(self.scan_key32).public_key.format()

    def address(self, chain: str | None = None) -> str:
        """The wallet's unlabelled address: on `chain` (a network name: sprt1… on regtest) when given,
        else on its family's first network (sp1… on mainnet, tsp1… otherwise)."""
        return address.encode(self.scan_pubkey33, self.spend_pubkey33, get_network(chain or self.network).hrp)

    def receiver(self) -> Receiver:
        """The receiver to scan with: labels 1..ml (and the change label 0, always scanned).

        Raises:
            DescriptorError: ml is above MAX_SCANNED_LABELS.
        """
        if (self.max_labels or 0) > MAX_SCANNED_LABELS:
            raise DescriptorError(f"ml={self.max_labels}: scanning more than {MAX_SCANNED_LABELS} labels is not supported")
        return Receiver(self.scan_key32, self.spend_pubkey33, tuple(range(1, (self.max_labels or 0) + 1)))

    def __str__(self) -> str:
        """The descriptor with its annotations and checksum (it holds private keys: do not print it)."""
        body = f"sp({self.scan})" if self.spend is None else f"sp({self.scan},{self.spend})"
        if self.annotations:
            body += "?" + "&".join(f"{k}={v}" for k, v in self.annotations)
        return f"{body}#{checksum(body)}"


def _one_key(key: Key) -> tuple[str, bytes, bytes | None, bytes]:
    if key.path:
        raise DescriptorError("sp(KEY): an spscan/spspend key takes no derivation steps")
    if not key.encoded.lower().startswith(tuple(_HRPS)):
        kind = "an extended key" if key.encoded[:4] in ("xprv", "tprv", "xpub", "tpub") else "a WIF or hex key"
        raise DescriptorError(f"sp(KEY) takes an spscan or spspend key, not {kind}: give the scan and spend keys as sp(SCAN,SPEND)")
    try:
        hrp, version, payload = address.bech32m_decode(key.encoded, tuple(_HRPS), "sp() key")
    except InvalidAddressError as exc:
        raise DescriptorError(f"sp(KEY) takes an spscan or spspend key: {exc}") from None
    network, is_spend = _HRPS[hrp]
    if version != 0:
        raise DescriptorError(f"sp(KEY): {hrp} version {version} is unknown (only 0, 'q')")
    if len(payload) != (64 if is_spend else 65):
        raise DescriptorError(f"sp(KEY): {hrp} payload has {len(payload)} bytes")
    scan32, rest = payload[:32], payload[32:]
    for secret in (scan32, rest) if is_spend else (scan32,):
        if not 0 < int.from_bytes(secret, "big") < crypto.N:
            raise DescriptorError(f"sp(KEY): the {hrp} key holds a private key out of range")
    if is_spend:
        return network, scan32, rest, PrivateKey(rest).public_key.format()
    if crypto.point(rest) is None:
        raise DescriptorError("sp(KEY): the spscan spend key is not a valid compressed point")
    return network, scan32, None, rest


def _two_keys(scan: Key, spend: Key) -> tuple[str, bytes, bytes | None, bytes]:
    for key, where in ((scan, "scan key"), (spend, "spend key")):
        if key.encoded.lower().startswith(tuple(_HRPS)):
            raise DescriptorError(f"sp(KEY,KEY): the {where} must be a single key, not spscan/spspend")
    scan_network, scan32, _ = _resolve(scan, "sp(KEY,KEY) scan key")
    if scan32 is None:
        raise DescriptorError("sp(KEY,KEY): the scan key must be private (WIF or xprv)")
    spend_network, spend_secret, spend33 = _resolve(spend, "sp(KEY,KEY) spend key")
    if spend_network not in (None, scan_network):
        raise DescriptorError("sp(KEY,KEY): the scan and spend keys are for different networks")
    return scan_network, scan32, spend_secret, spend33


def _arguments(script: str) -> list[str]:
    if not (script.startswith("sp(") and script.endswith(")")):
        if re.match(r"[a-z_]+\(.*sp\(", script):
            raise DescriptorError("sp() is top level only")
        raise DescriptorError("not an sp() descriptor")
    inner, args, depth, start = script[3:-1], [], 0, 0
    for i, c in enumerate(inner):
        depth += (c == "(") - (c == ")")
        if depth < 0:
            raise DescriptorError("unbalanced parentheses")
        if c == "," and depth == 0:
            args.append(inner[start:i])
            start = i + 1
    if depth:
        raise DescriptorError("unbalanced parentheses")
    args.append(inner[start:])
    if args == [""]:
        raise DescriptorError("sp() requires at least one key expression")
    if len(args) > 2 or any(not a for a in args):
        raise DescriptorError("sp() takes one or two key expressions")
    return args


def decode(text: str) -> SPDescriptor:
    """Decode an `sp()` descriptor (checksum optional, annotations allowed).

    Raises:
        DescriptorError: a bad checksum or annotation, a form BIP392 refuses (not top level,
            no key, a single-argument key that is not spscan/spspend, a public scan key,
            spscan/spspend in the two-argument form, uncompressed or musig() keys, ranges),
            or an invalid key. Messages never contain key material.
    """
    script, annotations = split_annotated(text)
    args = _arguments(script)
    keys = [_parse_key(a, "scan key" if i == 0 else "spend key") for i, a in enumerate(args)]
    return SPDescriptor(keys[0], keys[1] if len(keys) == 2 else None, annotations)


def from_keys(scan_key32: bytes, spend: bytes, *, network: str = MAIN, origin: KeyOrigin | None = None,
              annotations: tuple[tuple[str, int], ...] = ()) -> SPDescriptor:  # fmt: skip
    """Build `sp(spscan…)` (spend: a 33-byte public key) or `sp(spspend…)` (spend: a 32-byte private key).

    Raises:
        DescriptorError: a key of the wrong width or out of range, or an unknown network.
        InvalidKeyError: the spend public key is not a valid point.
    """
    if network not in (MAIN, TEST):
        raise DescriptorError(f"network must be {MAIN!r} or {TEST!r}")
    crypto.scalar(scan_key32, "scan_key32")
    if len(spend) == 32:
        crypto.scalar(spend, "spend_key32")
        hrp = "spspend"
    elif len(spend) == 33:
        crypto.pubkey(spend, "spend_pubkey33")
        hrp = "spscan"
    else:
        raise DescriptorError("spend must be a 32-byte private key or a 33-byte public key")
    encoded = address.bech32m_encode(("t" if network == TEST else "") + hrp, 0, bytes(scan_key32) + bytes(spend))
    return SPDescriptor(Key(origin, encoded), None, annotations)


def from_master(xprv: str, *, account: int = 0, watch_only: bool = False,
                annotations: tuple[tuple[str, int], ...] = ()) -> SPDescriptor:  # fmt: skip
    """Derive a wallet from a BIP32 master key: scan m/352h/coinh/accounth/1h/0, spend …/0h/0 (BIP352).

    Returns `sp([fingerprint/352h/coinh/accounth]spspend…)`, or spscan with `watch_only`.

    Raises:
        DescriptorError: not an extended private key, or an account out of range.
    """
    if not 0 <= account < HARDENED:
        raise DescriptorError("account must be in [0, 2^31)")
    master = _extended(xprv.strip(), "master key")
    if master.secret32 is None:
        raise DescriptorError("master key: an extended private key is needed")
    base_path = (352 | HARDENED, get_network(master.network).coin | HARDENED, account | HARDENED)
    base = _derive(master, base_path, "master key")
    scan = _derive(base, (1 | HARDENED, 0), "master key")
    spend = _derive(base, (0 | HARDENED, 0), "master key")
    origin = KeyOrigin(crypto.hash160(master.pubkey33)[:4], base_path)
    return from_keys(scan.secret32, spend.pubkey33 if watch_only else spend.secret32, network=master.network, origin=origin, annotations=annotations)
