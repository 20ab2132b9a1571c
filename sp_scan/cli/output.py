"""Output: JSON Lines (one object per line, flushed as produced) or a readable table."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from sp_scan.block import InputReport
from sp_scan.types import BlockMatch, IndexMatch, TxTweak

NOT_ELIGIBLE = "not eligible"


def tweak_record(t: TxTweak) -> dict:
    """{"txid", "tweak"}: display txid, 33-byte tweak hex."""
    return {"txid": t.txid32[::-1].hex(), "tweak": t.tweak33.hex()}


def match_record(m: BlockMatch) -> dict:
    """{"txid", "vout", "amount", "output", "tweak", "label"}: amount in sats, label m or None."""
    return {
        "txid": m.txid32[::-1].hex(),
        "vout": m.vout,
        "amount": m.amount,
        "output": m.found.output32.hex(),
        "tweak": m.found.tweak32.hex(),
        "label": m.found.label,
    }


def index_match_record(m: IndexMatch) -> dict:
    """{"height", "txid", "vout", "amount", "output", "tweak", "label", "spent"}: as `match_record`, located and with spent status."""
    return {"height": m.height, **match_record(BlockMatch(m.txid32, m.vout, m.amount, m.found)), "spent": m.spent}


def input_record(r: InputReport) -> dict:
    """{"txid", "vin", "type", "key", "reason"}: key hex, or None with the reason it is not eligible."""
    reason = None
    if r.pubkey is None:
        reason = "tx spends segwit v2+" if r.tx_excluded else "no eligible key"
    return {
        "txid": r.txid32[::-1].hex(),
        "vin": r.vin,
        "type": r.script_type.value,
        "key": r.pubkey.hex() if r.pubkey is not None else None,
        "reason": reason,
    }


# (field, header, width; negative width = right-aligned)
_COLUMNS = {
    "tweaks": [("txid", "TXID", 64), ("tweak", "TWEAK", 66)],
    "scan": [("txid", "TXID", 64), ("vout", "VOUT", -5), ("amount", "AMOUNT", -16), ("label", "LABEL", -6), ("output", "OUTPUT", 64), ("tweak", "TWEAK", 64)],
    "extract": [("txid", "TXID", 64), ("vin", "VIN", -5), ("type", "TYPE", 11), ("key", "KEY", 0)],
    "index-scan": [("height", "HEIGHT", -8), ("txid", "TXID", 64), ("vout", "VOUT", -5), ("amount", "AMOUNT", -16), ("label", "LABEL", -6), ("spent", "SPENT", -5), ("output", "OUTPUT", 64), ("tweak", "TWEAK", 64)],
}
_COLUMNS["index-scan-wallets"] = [("wallet", "WALLET", 12), *_COLUMNS["index-scan"]]


def _cell(value: object, width: int) -> str:
    text = "-" if value is None else str(value)
    return text.rjust(-width) if width < 0 else text.ljust(width)


class Emitter:
    """Print records of one kind (a key of _COLUMNS: "tweaks", "scan", "index-scan", ...) as JSON Lines or a table.

    Args:
        kind: the record kind, which picks the table's columns.
        as_json: JSON Lines when True.
        stream: where to print (stdout by default).
    """

    def __init__(self, kind: str, as_json: bool, stream: TextIO | None = None) -> None:
        self.kind = kind
        self.columns = _COLUMNS[kind]
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self.started = False

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()

    def start(self) -> None:
        """Print the table header (nothing for JSON Lines)."""
        if not self.as_json and not self.started:
            self._write("  ".join(_cell(h, w) for _, h, w in self.columns).rstrip())
        self.started = True

    def line(self, record: dict) -> str:
        """One record as a JSON object or a table row."""
        if self.as_json:
            return json.dumps(record)
        if record.get("key", "") is None:
            record = dict(record, key=f"{NOT_ELIGIBLE} ({record['reason']})")
        return "  ".join(_cell(record[f], w) for f, _, w in self.columns).rstrip()

    def text(self, records: list[dict]) -> str:
        """Records (one block's) as lines, without the final newline; "" for none."""
        return "\n".join(self.line(r) for r in records)

    def block(self, text: str) -> None:
        """Print one block's `text` in one write, then flush."""
        self.start()
        if text:
            self._write(text)
