"""`sp-scan tweaks|scan|extract BLOCK...` (and the hidden `auto`): block files or a node range, one line per result."""

from __future__ import annotations

import functools

import click

from . import output, sources
from .options import (
    KEYS_HELP, SOURCES, block_options, descriptor_option, key_options, node_client, receiver_of_keys, refuse_key_like,
    scan_key_configured, wallet_of,
)  # fmt: skip
from .run import run


def _block_sources(blocks, spent, rest_url, rpc_url, rpc_cookie, rpc_user, start, stop) -> list:
    refuse_key_like(blocks)
    node = node_client(rest_url, rpc_url, rpc_cookie, rpc_user)
    if node is not None:
        if blocks or spent:
            raise click.UsageError("with --rest/--rpc give heights with --from/--to, not BLOCK files or --spent")
        if start is None:
            raise click.UsageError("--rest/--rpc need --from H (and optionally --to H)")
        if stop is not None and stop < start:
            raise click.UsageError("--to is below --from")
        return sources.node_blocks(node, start, stop)
    if start is not None or stop is not None:
        raise click.UsageError("--from/--to need --rest or --rpc")
    if not blocks:
        raise click.UsageError("give BLOCK files, or --rest/--rpc URL with --from H")
    if spent and len(blocks) > 1:
        raise click.UsageError("--spent goes with a single BLOCK")
    return sources.file_blocks(blocks, spent)


def _run_blocks(mode: str, receiver_of, as_json: bool, jobs: int, **where) -> None:
    # Sources are checked before the scan key is read, so a bad argument never waits on stdin.
    srcs = _block_sources(**where)
    receiver = receiver_of() if receiver_of is not None else None
    run(srcs, mode, receiver, jobs, output.Emitter(mode, as_json))


@click.command(help="""List the tweak (input_hash·A, 33 bytes) of every eligible transaction, in block order.

BLOCK is a block file (.hex/.bin with BLOCK's stem + .spent.hex/.spent.bin beside it, or getblock-3 JSON);
or use --rest/--rpc URL --from H [--to H]. JSON Lines: {"txid", "tweak"}.""")
@block_options
def tweaks(as_json, jobs, **where):
    _run_blocks("tweaks", None, as_json, jobs, **where)


@click.command(help=f"""Find the outputs paying a receiver, in block order.

JSON Lines: {{"txid", "vout", "amount", "output", "tweak", "label"}} (amount in sats, label m or null);
spend a found output with b_spend + tweak.
{KEYS_HELP}""")
@block_options
@key_options
@descriptor_option
def scan(as_json, jobs, scan_key_file, spend_pubkey, labels, descriptor_file, **where):
    wallet = wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file)
    if where["start"] is None and (where["rest_url"] or where["rpc_url"]) and wallet.birthday is not None:
        where["start"] = wallet.birthday
    _run_blocks("scan", wallet.receiver, as_json, jobs, **where)


@click.command(help="""Classify every input: txid, vin, the spent output's type, and the key it contributes or "not eligible".

JSON Lines: {"txid", "vin", "type", "key", "reason"} (key null when not eligible).""")
@block_options
def extract(as_json, jobs, **where):
    _run_blocks("extract", None, as_json, jobs, **where)


@click.command(hidden=True)
@block_options
@key_options
def auto(as_json, jobs, scan_key_file, spend_pubkey, labels, **where):
    """Scan when keys are configured, else list tweaks."""
    if scan_key_configured(scan_key_file):
        _run_blocks("scan", functools.partial(receiver_of_keys, scan_key_file, spend_pubkey, labels), as_json, jobs, **where)
    elif labels:
        raise click.UsageError(f"--label needs a scan key: {SOURCES}")
    else:
        _run_blocks("tweaks", None, as_json, jobs, **where)
