"""`sp-scan index sync|scan|info`: build a tweak index from a node or block files, scan a wallet over it."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from pathlib import Path

import click

from sp_scan.index import NETWORKS, BlockFiles, Index, Retry, SyncStats
from sp_scan.index import corefiles
from sp_scan.index.scan import DASK_PARTITION_BLOCKS, DEFAULT_PARTITION_BLOCKS
from sp_scan.errors import ServerError
from sp_scan.index.sync import network_of
from sp_scan.network import TAPROOT_ACTIVATION
from sp_scan.workers import signals_held

from . import output, sources, wallets
from .options import (
    KEYS_HELP, Group, check_network, descriptor_option, key_options, key_options_typed, node_client, node_options,
    refuse_key_like, wallet_of,
)  # fmt: skip
from .cluster import cluster_module, dask_client, dask_options
from .run import Interrupted, Progress, Terminated, stop_signals, stopped

DB_OPTION = click.option("--db", required=True, metavar="PATH", help="The index file.")


@click.group(cls=Group, help="""A tweak index: every block's silent-payments data computed once and kept in a file.

\b
sp-scan index sync --db tweaks.db --rest http://127.0.0.1:8332 --follow
sp-scan index scan --db tweaks.db --scan-key-file wallet.scan --spend-pubkey 02...
sp-scan index info --db tweaks.db""")
def index() -> None:
    pass


def _core_blocks(blocks_dir: str, network: str | None, start: int | None, existing: Index | None) -> corefiles.CoreBlocks:
    """Core's blocks folder as the source, from the height the sync starts at (a notice names what a
    pruned node no longer has when a new index starts above its default)."""
    network = network or (existing.network if existing else None) or corefiles.network_of(blocks_dir)
    tip = existing.tip() if existing else None
    first = tip[0] + 1 if tip else start if start is not None else TAPROOT_ACTIVATION if network == "main" else 0
    source = corefiles.CoreBlocks(blocks_dir, network, first)
    if source.floor > first:
        missing = f"blocks {first}..{source.floor - 1} are pruned from {blocks_dir}"
        if tip or start is not None:
            raise ServerError(f"{missing} (its files start at height {source.floor}): the index cannot go on from there")
        click.echo(f"sp-scan: {missing}; indexing from height {source.floor}", err=True)
        source.start = source.floor
    return source


def _source(blocks, blocks_dir, network, start, rest_url, rpc_url, rpc_cookie, rpc_user, existing: Index | None):
    refuse_key_like(blocks)
    node = node_client(rest_url, rpc_url, rpc_cookie, rpc_user)
    if sum(map(bool, (node, blocks, blocks_dir))) > 1:
        raise click.UsageError("give --rest/--rpc, --blocks-dir or BLOCK files, not both")
    if blocks_dir:
        return _core_blocks(blocks_dir, network, start, existing)
    if node is not None:
        if network:
            raise click.UsageError("--network goes with BLOCK files (a node names its chain)")
        return node
    if not blocks:
        raise click.UsageError("give --rest URL, --rpc URL, --blocks-dir DIR or BLOCK files")
    network = network or (existing.network if existing else None)
    if network is None:
        raise click.UsageError("block files do not say their network: give --network N")
    return BlockFiles(sources.file_blocks(blocks, None), network)


def _network(source, retry: Retry, start: int | None) -> str:
    """The network of a new index's source; a ServerError says that nothing was created and where a new sync starts."""
    try:
        return network_of(source, retry)
    except ServerError as exc:
        first = start if start is not None else f"{TAPROOT_ACTIVATION} on mainnet, 0 on other networks"
        raise type(exc)(f"{exc} (no index was created; sync again to start at height {first})") from None


def _retrying(line: str) -> None:
    click.echo(f"sp-scan: {line}", err=True)


def _show_progress(progress: Progress):
    behind: list[int | None] = [None]

    def show(stats: SyncStats) -> None:
        if stats.behind is not None and behind[0] is None:
            progress.close()
            click.echo(f"sp-scan: the node's chain ends at height {stats.behind}, below the index's tip {stats.height}; waiting for it", err=True)
        behind[0] = stats.behind
        progress.total = max(stats.target - stats.start + 1, stats.blocks)
        rate = stats.txs / max(time.monotonic() - stats.began, 1e-9)
        label = f"height {stats.height}  {rate:,.0f} tx/s" + ("  (waiting for blocks)" if stats.waiting else "")
        if stats.mempool is not None and stats.mempool.polls:
            m = stats.mempool
            label += f"  mempool {m.txs:,} txs ({m.eligible:,} eligible" + (f", {m.missing} missing a parent" if m.missing else "") + ")"
        progress.update(stats.blocks, label)

    return show


@index.command(help="""Fetch blocks from Bitcoin Core (or BLOCK files with their spent outputs) into the index.

Creates --db when it does not exist (the network comes from the node, or --network for files). Each block
is committed with the new tip, so an interrupted or killed sync resumes where it stopped (a second Ctrl-C
or SIGTERM exits at once). Reorgs are followed: blocks of a competing branch at least as long as the index
replace its own; a node behind the index is waited for with --follow and refused otherwise, and BLOCK files
must extend the index. The first height defaults to taproot activation (709,632) on mainnet and 0 elsewhere
(the lowest file's height for BLOCK files).

With --blocks-dir, Core's own files are read in place, read-only, without RPC: the best chain is the one of
most work among the blocks with their undo data (stale blocks are skipped), a running node's newest records
are picked up by --follow, and a pruned node's files are indexed from their first block (a notice names the
heights it no longer has).

With --follow --mempool, the index file also holds the node's mempool (its eligible txs, for `index scan
--mempool`), polled every --interval, or followed through Core's ZMQ `sequence` topic with --zmq
(-zmqpubsequence; pip install 'sp-scan[zmq]') with a full poll every 6 intervals as a safety net. It is rebuilt
from the node at each start and emptied when the sync stops.""")
@DB_OPTION
@click.argument("blocks", metavar="[BLOCK...]", nargs=-1)
@node_options
@click.option("--blocks-dir", metavar="DIR", help="Bitcoin Core's blocks/ folder, read in place (blk*.dat, rev*.dat, xor.dat): no RPC.")
@click.option("--network", type=click.Choice(NETWORKS), help="The network of BLOCK files (a node names its own; --blocks-dir: its records say).")
@click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height of a new index.")
@click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height (default: the node's tip).")
@click.option("--follow", is_flag=True, help="Keep polling for new blocks (and wait for a node behind the index) until Ctrl-C or SIGTERM.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True, metavar="S", help="Seconds between polls with --follow.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes fetching and computing blocks.")
@click.option("--retries", type=click.IntRange(min=0), default=5, show_default=True, help="Retries of a failing node call (0.5 s, doubling) before giving up.")
@click.option("--mempool", is_flag=True, help="With --follow: keep the node's mempool in the index too (see above).")
@click.option("--zmq", "zmq_url", metavar="URL", help="With --mempool: Core's -zmqpubsequence endpoint, e.g. tcp://127.0.0.1:28332.")
@click.pass_context
def sync(ctx, db, blocks, rest_url, rpc_url, rpc_cookie, rpc_user, blocks_dir, network, start, stop, follow, interval, jobs, retries, mempool, zmq_url):
    if start is not None and stop is not None and stop < start:
        raise click.UsageError("--to is below --from")
    if mempool and (not follow or blocks or blocks_dir):
        raise click.UsageError("--mempool goes with --follow and a node (--rest or --rpc)")
    if zmq_url is not None and not mempool:
        raise click.UsageError("--zmq goes with --mempool")
    retry = Retry(retries, report=_retrying)
    path = Path(db)
    existing = Index.open(path) if path.exists() else None
    try:
        source = _source(blocks, blocks_dir, network, start, rest_url, rpc_url, rpc_cookie, rpc_user, existing)
        idx = existing or Index.create(path, _network(source, retry, start))
    except BaseException:
        if existing:
            existing.close()
        raise
    progress = Progress(0, sys.stderr, sys.stderr.isatty())
    code = 0
    try:
        with stop_signals("the index"):
            stats = idx.sync(
                source, start, stop, follow, jobs=jobs, interval=interval, retry=retry, progress=_show_progress(progress),
                mempool=mempool, zmq=zmq_url, log=functools.partial(click.echo, err=True),
            )  # fmt: skip
    except (KeyboardInterrupt, Terminated) as exc:
        progress.close()
        tip = idx.tip()
        code = stopped(exc, f"the index is at height {tip[0]}" if tip else "the index is empty")
    else:
        progress.close()
        tip = idx.tip()
        reorgs = f", {stats.reorgs} reorg(s) rolled back {stats.rolled_back} block(s)" if stats.reorgs else ""
        at = f"at height {tip[0]} ({tip[1][::-1].hex()})" if tip else "empty"
        click.echo(f"index {at}: {stats.blocks} block(s), {stats.txs} transaction(s) added{reorgs}")
    finally:
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
With --mempool, the payments still unconfirmed follow, with "height": null (a tx is listed once: a
block found meanwhile is scanned first).
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
@dask_options
@click.option("--mempool", is_flag=True, help="Then the unconfirmed payments in the node's mempool (height null), as a running `index sync --follow --mempool` keeps it.")
def scan_command(db, scan_key_file, spend_pubkey, labels, start, stop, jobs, as_json, descriptor_file, wallets_file, partition_blocks, dask_address, dask_tls_ca, dask_tls_cert, dask_tls_key, insecure, dask_log_level, mempool):
    if start is not None and stop is not None and stop < start:
        raise click.UsageError("--to is below --from")
    cluster = cluster_module(dask_address, (dask_tls_ca, dask_tls_cert, dask_tls_key), insecure)
    if mempool and stop is not None:
        raise click.UsageError("--mempool lists what is unconfirmed above the tip: it does not go with --to")
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
            matches = idx.scan_wallets(receivers, start, stop, jobs, partition_blocks, starts=starts, progress=show, mempool=mempool)
        else:
            client = stack.enter_context(dask_client(cluster, dask_address, (dask_tls_ca, dask_tls_cert, dask_tls_key), insecure, dask_log_level))
            matches = cluster.scan(client, idx, receivers, start, stop, starts=starts, threads=jobs, partition_blocks=partition_blocks, progress=show, mempool=mempool)
        stack.enter_context(contextlib.closing(matches))  # on any exit, its cleanup runs before the client and index close
        try:
            for w, match in matches:
                record = output.index_match_record(match)
                show.lines.append(emit.line({"wallet": named[w].name, **record} if wallets_file else record))
        except KeyboardInterrupt:
            raise Interrupted(show.resume) from None
        finally:
            show.progress.close()
        emit.block("\n".join(show.lines))  # the mempool's lines (no partition of blocks ends them)


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


@index.command(help="""Describe the index: network, heights, tip hash, transactions, size on disk.""")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--check", is_flag=True, help='Check the whole file first (SQLite\'s quick_check and every row); "check": "ok" or exit 2 naming the first problem.')
def info(db, as_json, check):
    with Index.open(db, readonly=True) as idx:
        checked = idx.check() if check else None
        record = idx.info()
    if check:
        record["check"] = "ok"
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
        *([("check", f"ok ({checked:,} blocks)")] if check else []),
    ]
    for name, value in rows:
        click.echo(f"{name:<14}{'-' if value is None else value}")
