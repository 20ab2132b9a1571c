"""Wallet interop commands: `sp-scan psbt …` (BIP375) and `sp-scan descriptor …` (BIP392/393).

Thin adapters over sp_scan.psbt and sp_scan.descriptor. Private keys and
descriptors are read from files or stdin only; neither a key nor a
descriptor is ever printed, even in an error.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from sp_scan import psbt as sp_psbt
from sp_scan.errors import InvalidKeyError

from .options import Group, read_descriptor, read_secret

_KEY_LINE = re.compile(r"\s*([0-9]+)\s+([0-9a-fA-F]{64})\s*")


def _read_psbt(path: str) -> sp_psbt.Psbt:
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    return sp_psbt.parse(data)


def _write_psbt(p: sp_psbt.Psbt, out: str | None) -> None:
    text = p.to_base64() + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        Path(out).write_text(text)


def _read_keys(path: str) -> dict[int, bytes]:
    """Input index -> private key from lines "INDEX HEX64" ("#" starts a comment)."""
    keys: dict[int, bytes] = {}
    for n, line in enumerate(read_secret(path, "--key-file").splitlines(), 1):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        match = _KEY_LINE.fullmatch(line)
        if match is None:
            raise InvalidKeyError(f"key file line {n}: expected 'INPUT_INDEX PRIVATE_KEY_HEX64' (the line is not shown)")
        if int(match[1]) in keys:
            raise InvalidKeyError(f"key file line {n}: input {match[1]} has a key already")
        keys[int(match[1])] = bytes.fromhex(match[2])
    if not keys:
        raise InvalidKeyError("the key file holds no key")
    return keys


@click.group(name="psbt", cls=Group, help="Silent-payment outputs in PSBT version 2 (BIP375): verify, add ECDH shares, compute outputs.")
def psbt() -> None:
    pass


PSBT_ARG = click.argument("psbt_file", metavar="FILE|-")
OUT_OPTION = click.option("--out", "-o", metavar="FILE", help="Write the new PSBT (base64) to FILE instead of stdout.")


@psbt.command(help="""Check the silent-payment parts of a PSBT (base64 or binary; - reads stdin).

Exit 0 when they are consistent, printing how many silent-payment outputs have their script; exit 2
with one line naming the BIP375 rule broken ("psbt structure", "ecdh coverage", "input eligibility",
"output scripts") otherwise. JSON: {"sp_outputs", "computed", "ready"}.""")
@PSBT_ARG
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def verify(psbt_file, as_json):
    status = sp_psbt.verify(_read_psbt(psbt_file))
    if as_json:
        click.echo(json.dumps({"sp_outputs": list(status.sp_outputs), "computed": list(status.computed), "ready": status.ready}))
        return
    state = "complete" if status.computed == status.sp_outputs else ("ready to compute outputs" if status.ready else "awaiting ECDH shares")
    click.echo(f"ok: {len(status.sp_outputs)} silent-payment outputs, {len(status.computed)} with their script; {state}")


@psbt.command(name="add-shares", help="""Add ECDH shares and DLEQ proofs for your inputs (BIP375 Signer).

Keys come from --key-file F (- for stdin): one "INPUT_INDEX PRIVATE_KEY_HEX64" per line (for P2TR,
the key of the output key); never from an argument. When the shares then cover every eligible input,
the output scripts are computed too. Prints the new PSBT as base64.""")
@PSBT_ARG
@click.option("--key-file", required=True, metavar="F", help="File of 'INPUT_INDEX HEX64' lines; - reads stdin.")
@click.option("--global", "global_share", is_flag=True, help="One global share per scan key (needs the keys of every eligible input).")
@OUT_OPTION
def add_shares(psbt_file, key_file, global_share, out):
    if psbt_file == "-" and key_file == "-":
        raise click.UsageError("the PSBT and the key file cannot both come from stdin")
    p = _read_psbt(psbt_file)
    _write_psbt(sp_psbt.add_shares(p, _read_keys(key_file), global_share=global_share), out)


@psbt.command(name="compute-outputs", help="""Fill PSBT_OUT_SCRIPT of every silent-payment output once the ECDH shares cover every eligible input.

Prints the new PSBT as base64; exit 2 naming the rule when the shares are incomplete or do not verify.""")
@PSBT_ARG
@OUT_OPTION
def compute_outputs(psbt_file, out):
    _write_psbt(sp_psbt.compute_outputs(_read_psbt(psbt_file)), out)


@click.group(name="descriptor", cls=Group, help="sp() wallet descriptors (BIP392, annotations BIP393). Read from files or stdin only.")
def descriptor() -> None:
    pass


@descriptor.command(help="""Show the public side of an sp() descriptor held in FILE (- reads stdin); never its private keys.

JSON: {"network", "scan_pubkey", "spend_pubkey", "address", "birthday_height", "gap_limit", "max_labels"}
(annotations absent are null).""")
@click.argument("descriptor_file", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(descriptor_file, as_json):
    d = read_descriptor(descriptor_file, "FILE")
    record = {
        "network": d.network,
        "scan_pubkey": d.scan_pubkey33.hex(),
        "spend_pubkey": d.spend_pubkey33.hex(),
        "address": d.address(),
        "birthday_height": d.birthday_height,
        "gap_limit": d.gap_limit,
        "max_labels": d.max_labels,
    }
    if as_json:
        click.echo(json.dumps(record))
    else:
        for k, v in record.items():
            click.echo(f"{k:<16}{'-' if v is None else v}")
