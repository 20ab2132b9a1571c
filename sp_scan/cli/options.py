"""Where the CLI takes keys from. The scan key is never an argument: a file, SP_SCAN_KEY or stdin."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from sp_scan.errors import InvalidKeyError

from .sources import looks_like_key

SCAN_KEY_ENV = "SP_SCAN_KEY"
SPEND_PUBKEY_ENV = "SP_SCAN_SPEND_PUBKEY"
SOURCES = f"--scan-key-file F (F may be - for stdin), the {SCAN_KEY_ENV} environment variable, or stdin"


def scan_key_configured(path: str | None) -> bool:
    """True when a scan key is given without asking: a key file or SP_SCAN_KEY."""
    return path is not None or bool(os.environ.get(SCAN_KEY_ENV))


def read_scan_key(path: str | None) -> bytes:
    """Read the 32-byte scan key: from `path` ("-" is stdin), else SP_SCAN_KEY, else stdin.

    On a terminal, stdin is read with a hidden prompt. The key is 64 hex
    digits; surrounding whitespace is ignored. Messages never contain it.

    Raises:
        InvalidKeyError: no key, not 64 hex digits, or a key, encoded key or descriptor given as
            the file name (`sources.looks_like_key`; it is not echoed).
        OSError: the key file cannot be read.
    """
    stdin = sys.stdin
    if path not in (None, "-") and looks_like_key(path):
        raise InvalidKeyError("--scan-key-file takes a file name, and this looks like a key: keys are never taken from arguments")
    if path == "-":
        text = stdin.readline()
    elif path is not None:
        text = Path(path).read_text()
    elif os.environ.get(SCAN_KEY_ENV):
        text = os.environ[SCAN_KEY_ENV]
    elif stdin.isatty():
        text = click.prompt("scan key (64 hex digits)", hide_input=True, err=True)
    else:
        text = stdin.readline()
    text = text.strip()
    if not text:
        raise InvalidKeyError(f"no scan key: give it with {SOURCES}")
    if len(text) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise InvalidKeyError("the scan key must be 64 hex digits (32 bytes)")
    return bytes.fromhex(text)


def parse_pubkey(text: str, what: str) -> bytes:
    """Decode a 33-byte compressed public key from 66 hex digits.

    Raises:
        InvalidKeyError: not 66 hex digits (the value is not echoed).
    """
    text = text.strip()
    if len(text) != 66 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise InvalidKeyError(f"{what} must be 66 hex digits (a 33-byte compressed key)")
    return bytes.fromhex(text)
