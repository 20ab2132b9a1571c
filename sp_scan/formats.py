"""Core's text forms of blocks and spent outputs: hex, `/rest/spenttxouts` JSON, `getblock` JSON.

Core serves a block's prevouts as REST `/rest/spenttxouts/<hash>.bin|.hex|.json`
(the JSON an array of arrays of `{"value": BTC, "scriptPubKey": {"hex": ...}}`,
coinbase first as `[]`) or in RPC `getblock <hash> 3`, where each non-coinbase
vin carries `prevout`. These helpers read any of them (format detected) and
return the binary forms `sp_scan.wire` parses.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Literal

from .errors import MalformedDataError, PrevoutsError
from .wire import HEADER_BYTES, MAX_MONEY, TxOut, compact_size, serialize_spent, sha256d

COIN = 100_000_000
"""Satoshis per bitcoin."""

SpentFormat = Literal["bin", "hex", "json"]


_HEX_DIGITS = b"0123456789abcdefABCDEF"
_HEX_DIGITS_SET = {_HEX_DIGITS[i : i + 1] for i in range(len(_HEX_DIGITS))}


def from_hex(text: str | bytes, what: str) -> bytes:
    """Decode hex; whitespace around it is allowed (Core's REST ends hex with a newline).

    Raises:
        MalformedDataError: not an even number of hex digits; the message names `what`.
    """
    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    body = data.strip()
    if len(body) % 2 or body.translate(None, _HEX_DIGITS):
        raise MalformedDataError(f"{what}: not hex")
    return bytes.fromhex(body.decode("ascii"))


def _is_text(data: bytes) -> bool:
    return not data.translate(None, bytes(range(32, 127)) + b"\t\r\n")


def _sniff(data: bytes, what: str) -> tuple[SpentFormat | None, object]:
    # Returns (format, parsed JSON or None); format None is text that is neither hex nor JSON.
    head = data.lstrip()[:1]
    if head in (b"[", b"{") and _is_text(data):
        return "json", load_json(data, what)
    if not _is_text(data):
        return "bin", None
    # Text starting with a hex digit is meant as hex; from_hex then checks all of it.
    return ("hex" if data.strip()[:1] in _HEX_DIGITS_SET else None), None


def detect_format(data: bytes) -> SpentFormat | None:
    """Tell Core's binary form from its hex and JSON forms.

    Text starting with `[` or `{` is JSON, other text starting with a hex
    digit is hex (whitespace around allowed), any other bytes are binary.

    Returns:
        "bin", "hex", "json", or None for text that is none of them.

    Raises:
        MalformedDataError: text that starts like JSON but does not parse.
    """
    return _sniff(data, "data")[0]


def load_json(data: bytes, what: str) -> object:
    """Parse JSON with exact decimals (amounts stay exact).

    Raises:
        MalformedDataError: not JSON; the message names `what`.
    """
    try:
        return json.loads(data, parse_float=Decimal)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedDataError(f"{what}: not JSON ({exc})") from None


def sats(value: object) -> int:
    """Convert a JSON BTC amount (Decimal, int or float) exactly to satoshis.

    Raises:
        MalformedDataError: not a number, more than 8 decimals, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise MalformedDataError(f"amount {value!r} is not a number")
    try:
        amount = Decimal(str(value)) * COIN
    except InvalidOperation:
        raise MalformedDataError(f"amount {value!r} is not a number") from None
    if not amount.is_finite() or amount != amount.to_integral_value() or not 0 <= amount <= MAX_MONEY:
        raise MalformedDataError(f"amount {value} is not a valid BTC amount")
    return int(amount)


def _json_txout(obj: object, where: str) -> TxOut:
    try:
        script = obj["scriptPubKey"]["hex"]  # type: ignore[index]
        value = obj["value"]  # type: ignore[index]
    except (TypeError, KeyError):
        raise MalformedDataError(f"{where}: expected {{value, scriptPubKey: {{hex}}}}") from None
    return TxOut(sats(value), _json_hex(script, f"{where} scriptPubKey.hex"))


def spent_from_json(obj: object) -> bytes:
    """Convert Core's `/rest/spenttxouts/<hash>.json` array to the binary form.

    Raises:
        MalformedDataError: not an array of arrays of {value, scriptPubKey: {hex}}.
    """
    if not isinstance(obj, list) or not all(isinstance(tx, list) for tx in obj):
        raise MalformedDataError("spent outputs JSON: expected an array of arrays")
    return serialize_spent(
        [[_json_txout(o, f"spent outputs JSON tx {n} input {i}") for i, o in enumerate(tx)] for n, tx in enumerate(obj)]
    )


def _getblock(obj: object) -> dict:
    if isinstance(obj, dict) and "result" in obj and "tx" not in obj:
        obj = obj["result"]  # a saved JSON-RPC reply
    if not isinstance(obj, dict) or not isinstance(obj.get("tx"), list):
        raise MalformedDataError("getblock JSON: expected an object with a `tx` array")
    if obj["tx"] and isinstance(obj["tx"][0], str):
        raise PrevoutsError("getblock JSON has txids only; use verbosity 3 (getblock <hash> 3)")
    if not all(isinstance(tx, dict) for tx in obj["tx"]):
        raise MalformedDataError("getblock JSON: `tx` must be an array of objects")
    return obj


def _json_hex(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedDataError(f"{what}: expected a hex string")
    return from_hex(value, what)


def spent_from_getblock(obj: object) -> bytes:
    """Build the spent-outputs binary form from `getblock <hash> 3` JSON.

    Each non-coinbase vin must carry `prevout` {value, scriptPubKey: {hex}};
    a coinbase vin (key `coinbase`) has none.

    Raises:
        PrevoutsError: a vin has no prevout (verbosity below 3).
        MalformedDataError: any other shape problem.
    """
    block = _getblock(obj)
    spent = []
    for n, tx in enumerate(block["tx"]):
        vins = tx.get("vin")
        if not isinstance(vins, list):
            raise MalformedDataError(f"getblock JSON tx {n}: no vin array")
        prevouts = []
        for i, vin in enumerate(vins):
            if not isinstance(vin, dict):
                raise MalformedDataError(f"getblock JSON tx {n} vin {i}: not an object")
            if "coinbase" in vin:
                continue
            if "prevout" not in vin:
                raise PrevoutsError(f"getblock JSON tx {n} vin {i} has no prevout; use verbosity 3 (getblock <hash> 3)")
            prevouts.append(_json_txout(vin["prevout"], f"getblock JSON tx {n} vin {i} prevout"))
        spent.append(prevouts)
    return serialize_spent(spent)


def block_from_getblock(obj: object) -> bytes:
    """Rebuild the raw block from `getblock <hash> 2` or `3` JSON (header fields and each tx's hex).

    The rebuilt header must hash to the JSON's `hash`.

    Raises:
        MalformedDataError: a field is missing or not of its type, or the hash does not match.
    """
    block = _getblock(obj)
    try:
        fields = [block["version"], block["time"], block["nonce"], block["merkleroot"], block["bits"], block["hash"]]
    except KeyError as exc:
        raise MalformedDataError(f"getblock JSON: no {exc.args[0]!r} field") from None
    version, time, nonce, merkleroot, bits, expected = fields
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (version, time, nonce)):
        raise MalformedDataError("getblock JSON: version, time and nonce must be integers")
    if not -(2**31) <= version < 2**31 or not 0 <= time < 2**32 or not 0 <= nonce < 2**32:
        raise MalformedDataError("getblock JSON: version, time or nonce out of range")
    header = (
        version.to_bytes(4, "little", signed=True)
        + _json_hex(block.get("previousblockhash", "00" * 32), "previousblockhash")[::-1]
        + _json_hex(merkleroot, "merkleroot")[::-1]
        + time.to_bytes(4, "little")
        + _json_hex(bits, "bits")[::-1]
        + nonce.to_bytes(4, "little")
    )
    txs = [_json_hex(tx.get("hex"), f"getblock JSON tx {n} hex") for n, tx in enumerate(block["tx"])]
    if len(header) != HEADER_BYTES or sha256d(header)[::-1].hex() != expected:
        raise MalformedDataError("getblock JSON: the header fields do not hash to `hash`")
    return header + compact_size(len(txs)) + b"".join(txs)


def load_spent(data: bytes) -> bytes:
    """Read spent outputs in any of Core's forms (format detected) and return the binary form.

    Args:
        data: a file's bytes: binary, hex, spenttxouts JSON or getblock-3 JSON.

    Raises:
        MalformedDataError: bad hex or JSON, or text that is neither.
        PrevoutsError: getblock JSON without prevouts.
    """
    fmt, obj = _sniff(data, "spent outputs")
    if fmt == "json":
        return spent_from_getblock(obj) if isinstance(obj, dict) else spent_from_json(obj)
    if fmt == "hex":
        return from_hex(data, "spent outputs")
    if fmt is None:
        raise MalformedDataError("spent outputs: unknown format (expected binary, hex or JSON)")
    return bytes(data)


def load_block(data: bytes) -> tuple[bytes, bytes | None]:
    """Read a block file: raw binary, hex, or getblock-3 JSON (which also gives the prevouts).

    Returns:
        (block_bytes, spent_bytes or None when the file has no prevouts).

    Raises:
        MalformedDataError: bad hex or JSON, or text that is neither.
        PrevoutsError: getblock JSON without prevouts (verbosity below 3).
    """
    fmt, obj = _sniff(data, "block")
    if fmt == "json":
        return block_from_getblock(obj), spent_from_getblock(obj)
    if fmt == "hex":
        return from_hex(data, "block"), None
    if fmt is None:
        raise MalformedDataError("block: unknown format (expected binary, hex or getblock JSON)")
    return bytes(data), None
