"""`sp-scan index sync|scan|info`: build a tweak index from a node or block files, scan a wallet over it."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import click

from sp_scan.index import NETWORKS, BlockFiles, Index, Retry, SyncStats
from sp_scan.index.sync import network_of

from . import EXIT_INTERRUPTED, KEYS_HELP, descriptor_option, key_options, node_client, node_options, output, refuse_key_like, sources, wallet_of
from .run import Progress

DB_OPTION = click.option("--db", required=True, metavar="PATH", help="The index file.")


class _Terminated(Exception):
    """SIGTERM during a sync."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


@click.group(help="""A tweak index: every block's silent-payments data computed once and kept in a file.

\b
sp-scan index sync --db tweaks.db --rest http://127.0.0.1:8332 --follow
sp-scan index scan --db tweaks.db --scan-key-file wallet.scan --spend-pubkey 02...
sp-scan index info --db tweaks.db""")
def index() -> None:
    pass


def _source(blocks, network, rest_url, rpc_url, rpc_cookie, rpc_user, existing: Index | None):
    refuse_key_like(blocks)
    node = node_client(rest_url, rpc_url, rpc_cookie, rpc_user)
    if node is not None:
        if blocks:
            raise click.UsageError("give --rest/--rpc or BLOCK files, not both")
        if network:
            raise click.UsageError("--network goes with BLOCK files (a node names its chain)")
        return node
    if not blocks:
        raise click.UsageError("give --rest URL, --rpc URL or BLOCK files")
    network = network or (existing.network if existing else None)
    if network is None:
        raise click.UsageError("block files do not say their network: give --network N")
    return BlockFiles(sources.file_blocks(blocks, None), network)


def _show_progress(progress: Progress):
    def show(stats: SyncStats) -> None:
        progress.total = max(stats.target - stats.start + 1, stats.blocks)
        rate = stats.txs / max(time.monotonic() - stats.began, 1e-9)
        label = f"height {stats.height}  {rate:,.0f} tx/s" + ("  (waiting for blocks)" if stats.waiting else "")
        progress.update(stats.blocks, label)

    return show


@index.command(help="""Fetch blocks from Bitcoin Core (or BLOCK files with their spent outputs) into the index.

Creates --db when it does not exist (the network comes from the node, or --network for files). Each block
is committed with the new tip, so an interrupted or killed sync resumes where it stopped. Reorgs are
followed: blocks of a replaced branch are rolled back. The first height defaults to taproot activation
(709,632) on mainnet and 0 elsewhere (the lowest file's height for BLOCK files).""")
@DB_OPTION
@click.argument("blocks", metavar="[BLOCK...]", nargs=-1)
@node_options
@click.option("--network", type=click.Choice(NETWORKS), help="The network of BLOCK files (a node names its own).")
@click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height of a new index.")
@click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height (default: the node's tip).")
@click.option("--follow", is_flag=True, help="Keep polling for new blocks until Ctrl-C or SIGTERM.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True, metavar="S", help="Seconds between polls with --follow.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes fetching and computing blocks.")
@click.option("--retries", type=click.IntRange(min=0), default=5, show_default=True, help="Retries of a failing node call (0.5 s, doubling) before giving up.")
@click.pass_context
def sync(ctx, db, blocks, rest_url, rpc_url, rpc_cookie, rpc_user, network, start, stop, follow, interval, jobs, retries):
    if start is not None and stop is not None and stop < start:
        raise click.UsageError("--to is below --from")
    retry = Retry(retries)
    path = Path(db)
    existing = Index.open(path) if path.exists() else None
    try:
        source = _source(blocks, network, rest_url, rpc_url, rpc_cookie, rpc_user, existing)
        idx = existing or Index.create(path, network_of(source, retry))
    except BaseException:
        if existing:
            existing.close()
        raise
    progress = Progress(0, sys.stderr, sys.stderr.isatty())
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    code = 0
    try:
        stats = idx.sync(source, start, stop, follow, jobs=jobs, interval=interval, retry=retry, progress=_show_progress(progress))
    except (KeyboardInterrupt, _Terminated) as exc:
        progress.close()
        tip = idx.tip()
        where = f"the index is at height {tip[0]}" if tip else "the index is empty"
        click.echo(f"sp-scan: {'interrupted' if isinstance(exc, KeyboardInterrupt) else 'stopped'}; {where} (sync again to resume)", err=True)
        code = EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else 0
    else:
        progress.close()
        tip = idx.tip()
        reorgs = f", {stats.reorgs} reorg(s) rolled back {stats.rolled_back} block(s)" if stats.reorgs else ""
        at = f"at height {tip[0]} ({tip[1][::-1].hex()})" if tip else "empty"
        click.echo(f"index {at}: {stats.blocks} block(s), {stats.txs} transaction(s) added{reorgs}")
    finally:
        signal.signal(signal.SIGTERM, previous)
        idx.close()
    ctx.exit(code)


@index.command("scan", help=f"""Find every indexed output paying the wallet, in block order, with its spent status.

JSON Lines: {{"height", "txid", "vout", "amount", "output", "tweak", "label", "spent"}} (amount in sats,
label m or null, spent true once an indexed block spent it); spend a found output with b_spend + tweak.
{KEYS_HELP}""")
@DB_OPTION
@key_options
@click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height to scan (default: a descriptor's birthday height, else the index's first).")
@click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height to scan (default: the index's tip).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Scanning threads.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
@descriptor_option
def scan_command(db, scan_key_file, spend_pubkey, labels, start, stop, jobs, as_json, descriptor_file):
    receiver_of, birthday = wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file)
    with Index.open(db, readonly=True) as idx:  # a bad --db fails before the key is asked for
        receiver = receiver_of()
        start = birthday if start is None else start
        emit = output.Emitter("index-scan", as_json)
        for match in idx.scan(receiver, start, stop, threads=jobs):
            emit.block(emit.line(output.index_match_record(match)))
        emit.start()


@index.command(help="""Describe the index: network, heights, tip hash, transactions, size on disk.""")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info(db, as_json):
    with Index.open(db, readonly=True) as idx:
        record = idx.info()
    if as_json:
        click.echo(json.dumps(record))
        return
    rows = [
        ("network", record["network"]),
        ("first height", record["first_height"]),
        ("tip height", record["tip_height"]),
        ("tip hash", record["tip_hash"]),
        ("blocks", f"{record['blocks']:,}"),
        ("transactions", f"{record['transactions']:,} ({record['eligible_transactions']:,} eligible)"),
        ("size on disk", f"{record['bytes']:,} bytes"),
    ]
    for name, value in rows:
        click.echo(f"{name:<14}{'-' if value is None else value}")
