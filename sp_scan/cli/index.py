"""`sp-scan index sync|scan|info`: build a tweak index from a node or block files, scan a wallet over it."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import sys
import time
from pathlib import Path

import click

from sp_scan.index import NETWORKS, BlockFiles, Index, Retry, SyncStats
from sp_scan.index.scan import DASK_PARTITION_BLOCKS, DEFAULT_PARTITION_BLOCKS
from sp_scan.index.sync import network_of
from sp_scan.workers import signals_held

from . import output, sources, wallets
from .options import (
    EXIT_INTERRUPTED, KEYS_HELP, Group, check_network, descriptor_option, key_options, key_options_typed, node_client, node_options,
    refuse_key_like, wallet_of,
)  # fmt: skip
from .run import Interrupted, Progress

DB_OPTION = click.option("--db", required=True, metavar="PATH", help="The index file.")


class _Terminated(Exception):
    """SIGTERM during a sync."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


@click.group(cls=Group, help="""A tweak index: every block's silent-payments data computed once and kept in a file.

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


def _retrying(line: str) -> None:
    click.echo(f"sp-scan: {line}", err=True)


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
    retry = Retry(retries, report=_retrying)
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


WALLETS_HELP = """With --wallets FILE, every wallet of FILE is scanned in the same pass (each partition is read once)
and each line gains "wallet" (its name). One wallet per line, paths relative to FILE, never keys:

\b
  alice  scan-key-file=alice.scan  spend-pubkey=02...  labels=1,7  from=850000
  bob    descriptor-file=bob.desc"""

DASK_HELP = """With --dask, this process reads the index and a Dask cluster scans it: one task per --partition-blocks
blocks, results in height order as without it (pip install 'sp-scan[dist]' here and on the workers). The scan
keys travel to the scheduler and workers, so a scheduler on another machine must be tls:// (mutual TLS with
--dask-tls-ca/--dask-tls-cert/--dask-tls-key or Dask's configuration) unless --insecure is given."""


@index.command("scan", help=f"""Find every indexed output paying the wallet, in block order, with its spent status.

JSON Lines: {{"height", "txid", "vout", "amount", "output", "tweak", "label", "spent"}} (amount in sats,
label m or null, spent true once an indexed block spent it); spend a found output with b_spend + tweak.
{KEYS_HELP}
{WALLETS_HELP}

{DASK_HELP}""")
@DB_OPTION
@key_options
@click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height to scan (default: a descriptor's birthday height, else the index's first).")
@click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height to scan (default: the index's tip).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Scanning threads (with --dask: per task).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
@descriptor_option
@click.option("--wallets", "wallets_file", metavar="FILE", help="Scan every wallet named in FILE in one pass (see above).")
@click.option("--partition-blocks", type=click.IntRange(min=1), metavar="N", help=f"Blocks read and scanned together [default: {DEFAULT_PARTITION_BLOCKS}; with --dask {DASK_PARTITION_BLOCKS}, one task each].")
@click.option("--dask", "dask_address", metavar="URL", help="Scan on the Dask cluster whose scheduler is at tcp://HOST:PORT (this machine) or tls://HOST:PORT.")
@click.option("--dask-tls-ca", metavar="F", help="CA certificate (PEM) that signed the cluster's certificates.")
@click.option("--dask-tls-cert", metavar="F", help="This client's certificate (PEM), signed by that CA.")
@click.option("--dask-tls-key", metavar="F", help="The private key (PEM) of --dask-tls-cert.")
@click.option("--insecure", is_flag=True, help="Allow --dask tcp:// to another machine: the scan keys cross the network in the clear.")
def scan_command(db, scan_key_file, spend_pubkey, labels, start, stop, jobs, as_json, descriptor_file, wallets_file, partition_blocks, dask_address, dask_tls_ca, dask_tls_cert, dask_tls_key, insecure):
    if start is not None and stop is not None and stop < start:
        raise click.UsageError("--to is below --from")
    cluster = _cluster(dask_address, (dask_tls_ca, dask_tls_cert, dask_tls_key), insecure)
    if wallets_file is not None:
        if key_options_typed(scan_key_file, labels) or descriptor_file:
            raise click.UsageError("give --wallets or one wallet's --scan-key-file/--spend-pubkey/--label/--descriptor-file, not both")
        load = functools.partial(wallets.read_wallets, wallets_file)
    else:
        wallet = wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file)
        load = lambda: [wallets.NamedWallet("", wallet.receiver(), wallet.birthday, wallet.family)]  # noqa: E731
    if partition_blocks is None:
        partition_blocks = DEFAULT_PARTITION_BLOCKS if cluster is None else DASK_PARTITION_BLOCKS
    with Index.open(db, readonly=True) as idx, contextlib.ExitStack() as stack:  # a bad --db fails before the key is asked for
        named = load()
        for w in named:
            check_network(w.family, idx.network, f"wallet {w.name}'s descriptor" if w.name else "the descriptor")
        starts = [w.start for w in named] if start is None else None
        if starts is not None and None not in starts:
            start = min(starts)
            if idx.first_height is not None:  # a birthday before the index's first block: scan from that block
                start = max(start, idx.first_height)
        emit = output.Emitter("index-scan-wallets" if wallets_file else "index-scan", as_json)
        show = _Shown(emit, idx.partition_ranges(start, stop, partition_blocks), sys.stderr)
        receivers = [w.receiver for w in named]
        if cluster is None:
            matches = idx.scan_wallets(receivers, start, stop, jobs, partition_blocks, starts=starts, progress=show)
        else:
            tls = cluster.security(dask_tls_ca, dask_tls_cert, dask_tls_key) if dask_tls_ca else None
            client = stack.enter_context(cluster.connect(dask_address, tls=tls, insecure=insecure))
            matches = cluster.scan(client, idx, receivers, start, stop, starts=starts, threads=jobs, partition_blocks=partition_blocks, progress=show)
        stack.enter_context(contextlib.closing(matches))  # on any exit, its cleanup runs before the client and index close
        try:
            for w, match in matches:
                record = output.index_match_record(match)
                show.lines.append(emit.line({"wallet": named[w].name, **record} if wallets_file else record))
        except KeyboardInterrupt:
            raise Interrupted(show.resume) from None
        finally:
            show.progress.close()
        emit.start()


class _Shown:
    """Printing an index scan: a partition's lines in one write once it is complete, the resume height, progress."""

    def __init__(self, emit: output.Emitter, ranges: list[tuple[int, int]], stream) -> None:
        self.emit, self.lines = emit, []
        self.resume = ranges[0][0] if ranges else None
        self.done = 0
        self.progress = Progress(sum(hi - lo + 1 for lo, hi in ranges), stream, len(ranges) > 1 and stream.isatty())

    def __call__(self, lo: int, hi: int) -> None:
        with signals_held():  # a partition's lines and the resume height change together
            self.emit.block("\n".join(self.lines))
            self.lines.clear()
            self.resume = hi + 1
        self.done += hi - lo + 1
        self.progress.update(self.done, f"height {hi}")


def _cluster(address: str | None, tls_files: tuple[str | None, ...], insecure: bool):
    """sp_scan.index.cluster when --dask is given (imported only then), its address checked; else None."""
    if address is None:
        if any(tls_files) or insecure:
            raise click.UsageError("--dask-tls-*/--insecure go with --dask")
        return None
    if any(tls_files) and not all(tls_files):
        raise click.UsageError("give --dask-tls-ca, --dask-tls-cert and --dask-tls-key together")
    try:
        from sp_scan.index import cluster
    except ImportError as exc:
        if exc.name not in ("dask", "distributed"):
            raise
        raise click.UsageError("--dask needs Dask: pip install 'sp-scan[dist]'") from None
    address = cluster.check_address(address, insecure=insecure)
    if any(tls_files) and not address.startswith("tls://"):
        raise click.UsageError("--dask-tls-* go with a tls:// scheduler address")
    if insecure and address.startswith("tcp://"):
        click.echo(f"sp-scan: warning: --insecure: the scan keys go to {address} unencrypted", err=True)
    return cluster


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
