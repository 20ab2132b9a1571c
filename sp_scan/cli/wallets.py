"""The wallets file of `sp-scan index scan --wallets FILE`: many wallets scanned in one pass.

One wallet per line: its name, then KEY=VALUE fields in any order. The file says where each
wallet's keys are, never the keys themselves; "#" starts a comment; a relative path is taken
from the wallets file's directory.

    # NAME  FIELDS
    alice   scan-key-file=alice.scan  spend-pubkey=02…  labels=1,7  from=850000
    bob     descriptor-file=bob.desc

A wallet is `scan-key-file` (64 hex digits, as --scan-key-file) with `spend-pubkey` (66 hex
digits) and optional `labels` (comma-separated m), or `descriptor-file` (an sp() descriptor:
its keys, labels 1..ml, and its birthday height bh). `from=H` is the first height scanned for
the wallet (default: the descriptor's bh, else the start of the scan).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click

from sp_scan.errors import SPError
from sp_scan.scan import Receiver

from .options import looks_like_key, parse_pubkey, read_descriptor, read_scan_key

FIELDS = ("scan-key-file", "spend-pubkey", "labels", "descriptor-file", "from")
_NAME = re.compile(r"[A-Za-z0-9._@:+-]{1,64}")
_NUMBER = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class NamedWallet:
    """A wallet of a wallets file: its name, keys, first height (None: the scan's start) and network
    family (a descriptor's, `network.MAIN` or `TEST`; None for bare keys)."""

    name: str
    receiver: Receiver
    start: int | None
    family: str | None = None


def read_wallets(path: str) -> list[NamedWallet]:
    """Read a wallets file and the key and descriptor files it names.

    Raises:
        click.UsageError: a malformed line, a duplicate name, a key or descriptor that cannot be
            read or decoded, or no wallet; the message names the line but never a value.
        OSError: the wallets file cannot be read.
    """
    wallets: list[NamedWallet] = []
    base = Path(path).parent
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        where = f"{path}:{n}"
        wallet = _wallet(tokens, base, where)
        if any(w.name == wallet.name for w in wallets):
            raise click.UsageError(f"{where}: a second wallet named {wallet.name}")
        wallets.append(wallet)
    if not wallets:
        raise click.UsageError(f"{path}: no wallets (one per line: NAME scan-key-file=F spend-pubkey=HEX [labels=M,...], or NAME descriptor-file=F)")
    return wallets


def _wallet(tokens: list[str], base: Path, where: str) -> NamedWallet:
    name, fields = tokens[0], {}
    if not _NAME.fullmatch(name) or looks_like_key(name):
        raise click.UsageError(f"{where}: a line starts with the wallet's name (letters, digits, ._@:+-; not a key)")
    for i, token in enumerate(tokens[1:], 2):
        field, sep, value = token.partition("=")
        if not sep or field not in FIELDS:
            raise click.UsageError(f"{where}: field {i} is not one of {', '.join(f + '=' for f in FIELDS)} (not shown)")
        if field in fields:
            raise click.UsageError(f"{where}: {field}= given twice")
        fields[field] = value
    try:
        return NamedWallet(name, *_keys(fields, base, where))
    except (SPError, click.UsageError) as exc:
        message = exc.format_message() if isinstance(exc, click.UsageError) else str(exc)
        raise click.UsageError(f"{where}: {message}") from None
    except OSError as exc:
        raise click.UsageError(f"{where}: {exc.filename}: {exc.strerror or exc}") from None


def _keys(fields: dict[str, str], base: Path, where: str) -> tuple[Receiver, int | None, str | None]:
    start = _number(fields["from"], "from") if "from" in fields else None
    if "descriptor-file" in fields:
        if fields.keys() & {"scan-key-file", "spend-pubkey", "labels"}:
            raise click.UsageError("give descriptor-file= or scan-key-file=/spend-pubkey=/labels=, not both")
        wallet = read_descriptor(fields["descriptor-file"], "descriptor-file=", base)
        return wallet.receiver(), wallet.birthday_height if start is None else start, wallet.network
    if "scan-key-file" not in fields or "spend-pubkey" not in fields:
        raise click.UsageError("a wallet needs scan-key-file= and spend-pubkey=, or descriptor-file=")
    labels = tuple(_number(m, "labels") for m in fields["labels"].split(",")) if "labels" in fields else ()
    if any(m >= 2**32 for m in labels):
        raise click.UsageError("labels= are integers below 2**32 (labels are 32-bit)")
    spend33 = parse_pubkey(fields["spend-pubkey"], "spend-pubkey=")
    return Receiver(read_scan_key(fields["scan-key-file"], "scan-key-file=", base), spend33, labels), start, None


def _number(text: str, field: str) -> int:
    if not _NUMBER.fullmatch(text):
        raise click.UsageError(f"{field}= takes non-negative integers")
    return int(text)
