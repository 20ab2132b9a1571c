"""Wallet interop commands: `sp-scan psbt …` (BIP375, BIP376) and `sp-scan descriptor …` (BIP392/393).

Thin adapters over sp_scan.psbt and sp_scan.descriptor. Private keys and
descriptors are read from files or stdin only; neither a key nor a
descriptor is ever printed, even in an error, except the descriptor
`descriptor create` writes where --out says.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click

from sp_scan import descriptor as sp_descriptor
from sp_scan import network
from sp_scan import psbt as sp_psbt
from sp_scan.errors import InvalidKeyError

from .options import SPEND_SOURCES, Group, parse_pubkey, private_key, read_descriptor, read_secret, read_spend_key

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


@click.group(name="psbt", cls=Group, help="""Silent payments in PSBT version 2: verify, add ECDH shares and compute outputs (BIP375);
sign inputs that spend silent-payment outputs (BIP376) and extract the transaction.""")
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


@psbt.command(help=f"""Sign every input that spends a silent-payment output of your spend key (BIP376).

For each input with PSBT_IN_SP_TWEAK: d = b_spend + tweak, checked to be the key of the output it spends
(refused in one line otherwise: a wrong spend key or tweak), and a BIP340 signature of its BIP341 key-path
sighash. When the transaction pays silent-payment addresses, the ECDH shares and DLEQ proofs are added with
the keys d and the output scripts computed first (BIP375); while other signers' shares are missing, nothing
is signed. The spend key comes from {SPEND_SOURCES}; never from an argument. Prints the new PSBT as base64.""")
@PSBT_ARG
@click.option("--spend-key-file", metavar="F", help="File holding the 64-hex spend key; - reads stdin.")
@click.option("--descriptor-file", metavar="F", help="An sp() descriptor holding the spend key (spspend, or a private spend key).")
@OUT_OPTION
def sign(psbt_file, spend_key_file, descriptor_file, out):
    if psbt_file == "-" and "-" in (spend_key_file, descriptor_file):
        raise click.UsageError("the PSBT and the spend key cannot both come from stdin")
    p = _read_psbt(psbt_file)
    key = read_spend_key(spend_key_file, descriptor_file)
    try:
        signed = sp_psbt.sign_sp_inputs(p, key)
    finally:
        key[:] = bytes(len(key))
    _write_psbt(signed, out)
    done = sum(1 for m in signed.inputs if sp_psbt.fields.field_key(sp_psbt.fields.IN_TAP_KEY_SIG) in m)
    if done:
        click.echo(f"sp-scan: {done} of {len(signed.inputs)} input(s) signed", err=True)
    else:
        click.echo("sp-scan: ECDH shares added; the silent-payment outputs await other signers' shares, so nothing is signed yet", err=True)


@psbt.command(help="""Finalize a signed PSBT and print its transaction as hex (BIP174's Input Finalizer and Extractor, BIP376).

Inputs that spend silent-payment outputs get their key-path witness; the silent-payment output scripts are
verified first (BIP375). Exit 2 naming what is missing when an input is not signed.""")
@PSBT_ARG
def extract(psbt_file):
    p = sp_psbt.finalize_sp_inputs(_read_psbt(psbt_file))
    click.echo(sp_psbt.extract(p).hex())


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


@descriptor.command(help="""Write a new sp() descriptor (BIP392) with its annotations (BIP393): the wallet backup
the other commands read with --descriptor-file.

\b
From key files:  --scan-key-file F  and  --spend-key-file F (spspend: can spend)
                 or --spend-pubkey HEX (spscan: watch-only), with --network N;
from a BIP32 master key:  --xprv-file F (xprv/tprv; BIP352's paths m/352h/coinh/accounth/1h/0 (scan)
                 and .../0h/0 (spend)), with --account N and --watch-only.

Key files hold 64 hex digits, the xprv file the extended key (- reads stdin); secrets are never taken
from arguments. The descriptor holds private keys: it goes to --out FILE (created readable by you
only, never overwritten), or to stdout with --out -; the wallet's address is printed on stderr.""")
@click.option("--scan-key-file", metavar="F", help="File holding the 64-hex scan key; - reads stdin.")
@click.option("--spend-key-file", metavar="F", help="File holding the 64-hex spend private key; - reads stdin.")
@click.option("--spend-pubkey", metavar="HEX", help="33-byte spend public key, hex: a watch-only descriptor.")
@click.option("--xprv-file", metavar="F", help="File holding a BIP32 master xprv/tprv; - reads stdin.")
@click.option("--account", type=click.IntRange(0, 2**31 - 1), metavar="N", help="BIP352 account under --xprv-file [default: 0].")
@click.option("--watch-only", is_flag=True, help="With --xprv-file: keep only the spend public key (spscan).")
@click.option("--network", "network_name", type=click.Choice(sorted([*network.NETWORKS, *network.ALIASES])), help="The network of key files (an xprv/tprv says its own).")
@click.option("--birthday", type=click.IntRange(min=0), metavar="H", help="bh: the first block height to scan.")
@click.option("--gap-limit", type=click.IntRange(min=0), metavar="N", help="gl: the gap limit (kept for other wallets; unused by silent payments).")
@click.option("--max-label", type=click.IntRange(0, 2**32 - 1), metavar="M", help="ml: the highest label m to scan (labels 1..M).")
@click.option("--out", "-o", required=True, metavar="FILE|-", help="Where to write the descriptor; - is stdout.")
def create(scan_key_file, spend_key_file, spend_pubkey, xprv_file, account, watch_only, network_name, birthday, gap_limit, max_label, out):
    stdin = [f for f in (scan_key_file, spend_key_file, xprv_file) if f == "-"]
    if len(stdin) > 1:
        raise click.UsageError("only one of the key files can come from stdin")
    annotations = tuple((k, v) for k, v in ((sp_descriptor.BIRTHDAY_HEIGHT, birthday), (sp_descriptor.GAP_LIMIT, gap_limit), (sp_descriptor.MAX_LABEL, max_label)) if v is not None)
    if xprv_file is not None:
        if scan_key_file or spend_key_file or spend_pubkey:
            raise click.UsageError("give --xprv-file or the key options (--scan-key-file with --spend-key-file/--spend-pubkey), not both")
        master = read_secret(xprv_file, "--xprv-file")
        wallet = sp_descriptor.from_master(master, account=account or 0, watch_only=watch_only, annotations=annotations)
        if network_name is not None and network.get(network_name).family != wallet.network:
            raise click.UsageError(f"--network {network_name}, but the --xprv-file key is for {'mainnet' if wallet.network == network.MAIN else 'the test networks'}")
    else:
        if scan_key_file is None or (spend_key_file is None) == (spend_pubkey is None):
            raise click.UsageError("give --scan-key-file with --spend-key-file or --spend-pubkey, or --xprv-file")
        if watch_only or account is not None:
            raise click.UsageError("--account and --watch-only go with --xprv-file (for a watch-only wallet from key files, give --spend-pubkey)")
        if network_name is None:
            raise click.UsageError("key files do not say their network: give --network N")
        scan32 = private_key(read_secret(scan_key_file, "--scan-key-file", one_line=True), "the scan key")
        spend = private_key(read_secret(spend_key_file, "--spend-key-file", one_line=True), "the spend key") if spend_key_file else parse_pubkey(spend_pubkey, "--spend-pubkey")
        wallet = sp_descriptor.from_keys(scan32, spend, network=network.get(network_name).family, annotations=annotations)
    _write_secret(out, str(wallet) + "\n")
    chain = network_name if network_name is not None and network.get(network_name).family == wallet.network else None
    click.echo(f"{'stdout' if out == '-' else out}: the sp() descriptor of {wallet.address(chain)}", err=True)


def _write_secret(out: str, text: str) -> None:
    """Write text to stdout ("-") or to a new file only its owner can read (an existing file is left alone)."""
    if out == "-":
        click.echo(text, nl=False)
        return
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
