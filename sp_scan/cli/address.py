"""`sp-scan address encode|decode`: silent-payments addresses (bech32m sp1… / tsp1… / sprt1…)."""

from __future__ import annotations

import json

import click
from coincurve import PrivateKey

from sp_scan import address as sp_address
from sp_scan.errors import InvalidKeyError

from .options import SOURCES, SPEND_PUBKEY_ENV, Group, hrp_of, key_options, network_options, parse_pubkey, read_scan_key


@click.group(cls=Group, help="Silent-payments addresses (bech32m sp1... / tsp1... / sprt1... on regtest).")
def address() -> None:
    pass


def _scan_pubkey(scan_key32: bytes) -> bytes:
    return PrivateKey(scan_key32).public_key.format()


@address.command(help=f"""Print the receiver's address, then one per --label.

The scan public key comes from --scan-pubkey, or from the scan key ({SOURCES}),
which labels need. JSON Lines: {{"label", "address"}}.""")
@click.option("--scan-pubkey", metavar="HEX", help="33-byte scan public key, hex (not needed when the scan key is given).")
@key_options
@network_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
def encode(scan_pubkey, scan_key_file, spend_pubkey, labels, network, hrp, as_json):
    if not spend_pubkey:
        raise click.UsageError(f"give --spend-pubkey HEX (or {SPEND_PUBKEY_ENV})")
    spend33 = parse_pubkey(spend_pubkey, "--spend-pubkey")
    scan_key32 = None
    if labels or not scan_pubkey:
        scan_key32 = read_scan_key(scan_key_file)
    scan33 = parse_pubkey(scan_pubkey, "--scan-pubkey") if scan_pubkey else _scan_pubkey(scan_key32)
    if scan_key32 is not None and scan_pubkey and scan33 != _scan_pubkey(scan_key32):
        raise InvalidKeyError("--scan-pubkey does not belong to the scan key")
    prefix = hrp_of(network, hrp, "sp")
    rows = [(None, sp_address.encode(scan33, spend33, prefix))]
    rows += [(m, sp_address.encode(scan33, sp_address.labelled_spend_pubkey(scan_key32, spend33, m), prefix)) for m in labels]
    for m, text in rows:
        click.echo(json.dumps({"label": m, "address": text}) if as_json else (f"{'-' if m is None else m:>10}  {text}"))


@address.command(help="Decode an address: hrp, version, scan and spend public keys.")
@click.argument("addr", metavar="ADDRESS")
@network_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def decode(addr, network, hrp, as_json):
    decoded = sp_address.decode(addr.strip(), hrp_of(network, hrp, None))
    record = {"hrp": decoded.hrp, "version": decoded.version, "scan_pubkey": decoded.scan_pubkey33.hex(), "spend_pubkey": decoded.spend_pubkey33.hex()}
    if as_json:
        click.echo(json.dumps(record))
    else:
        for k, v in record.items():
            click.echo(f"{k:<13}{v}")
