"""`sp-scan wallet create|address|sync|rescan|check|list|balance|info|send|broadcast|pending|abandon`: a wallet kept in a file, synced from any source,
spending what it found through BIP376 PSBTs."""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from sp_scan import network as sp_network
from sp_scan import psbt as sp_psbt
from sp_scan.errors import MalformedDataError, PSBTError
from sp_scan.formats import from_hex
from sp_scan.index import NETWORKS
from sp_scan.retry import Retry
from sp_scan.types import FoundOutput, IndexMatch
from sp_scan.wallet import WalletSyncStats, Wallet, WalletOutput
from sp_scan.wallet import broadcast as sp_broadcast
from sp_scan.wallet import sources
from sp_scan.wallet.sources import DEADLINE

from . import output
from .options import (
    KEYS_HELP, SCAN_KEY_ENV, SOURCES, SPEND_SOURCES, Group, broadcast_options, descriptor_option, key_options,
    node_client, node_options, parse_pubkey, read_descriptor, read_scan_key, read_spend_key, rpc_credentials,
)  # fmt: skip
from .run import Progress, Terminated, stop_signals, stopped

WALLET_ARGUMENT = click.argument("path", metavar="W")


@click.group(cls=Group, help="""A receiving wallet: silent payments found through a source, kept in the file W.

\b
sp-scan wallet create alice.wallet --network main --scan-key-file alice.scan --spend-pubkey 02...
sp-scan wallet sync alice.wallet --scan-key-file alice.scan --blindbit https://oracle.example
sp-scan wallet list alice.wallet
sp-scan wallet balance alice.wallet
sp-scan wallet send alice.wallet --to ADDRESS:SATS --fee-rate 2 --out spend.psbt
sp-scan psbt sign spend.psbt --spend-key-file alice.spend --out signed.psbt
sp-scan wallet broadcast alice.wallet signed.psbt --rpc http://127.0.0.1:8332 --rpc-cookie ~/.bitcoin/.cookie

The file holds the scan public key, never the scan private key: every sync reads it again.""")
def wallet() -> None:
    pass


@wallet.command(help=f"""Create the wallet file W for the keys (or an sp() descriptor) on --network.

The scan key is read only to derive its public key; it is not stored. --birthday is the first height scanned
(default: a descriptor's bh, else taproot activation on main and 0 elsewhere). A descriptor gives labels 1..ml.
{KEYS_HELP}""")
@WALLET_ARGUMENT
@click.option("--network", "network_name", required=True, type=click.Choice(sorted([*NETWORKS, *sp_network.ALIASES])), help="The chain the wallet receives on.")
@key_options
@descriptor_option
@click.option("--birthday", type=click.IntRange(min=0), metavar="H", help="The first height to scan.")
def create(path, network_name, scan_key_file, spend_pubkey, labels, descriptor_file, birthday):
    network = sp_network.get(network_name).name
    if descriptor_file is not None:
        if scan_key_file or spend_pubkey or labels:
            raise click.UsageError("give --descriptor-file or --scan-key-file/--spend-pubkey/--label, not both")
        made = Wallet.from_descriptor(path, read_descriptor(descriptor_file), network=network, birthday=birthday)
    else:
        if not spend_pubkey:
            raise click.UsageError("give --spend-pubkey HEX (and the scan key) or --descriptor-file")
        made = Wallet.from_keys(path, network, read_scan_key(scan_key_file), parse_pubkey(spend_pubkey, "--spend-pubkey"), labels, birthday)
    with made as w:
        click.echo(f"wallet {path} created: {network}, address {w.address()}, scanning from height {w.birthday}")


@wallet.command(help="""Print the wallet's address, or with --label M the address of its label M (no scan key needed: each
label's spend key is stored when the wallet is created, or by its first sync).""")
@WALLET_ARGUMENT
@click.option("--label", type=click.IntRange(min=0, max=2**32 - 1), metavar="M", help="A label the wallet scans.")
def address(path, label):
    with Wallet.open(path) as w:
        click.echo(w.address(label))


def _source(db, rest_url, rpc_url, rpc_cookie, rpc_user, blindbit, cut_through, dust_limit, retry, remote=None, timeout=DEADLINE):
    """The one source the options name (`remote`: the --grpc/--electrum/--cake options), opened from its URL."""
    remote = remote or {}
    named = [("--grpc", remote.get("grpc")), ("--electrum", remote.get("electrum")), ("--cake", remote.get("cake"))]
    given = [name for name, value in (("--db", db), ("--rest/--rpc", rest_url or rpc_url), ("--blindbit", blindbit), *named) if value]
    if len(given) != 1:
        raise click.UsageError(
            "give one source: --db FILE, --rest URL, --rpc URL, --blindbit URL, --grpc, --electrum or --cake HOST:PORT" + (f" (not {' and '.join(given)})" if given else "")
        )
    if (cut_through or dust_limit) and not (blindbit or remote.get("grpc")):
        raise click.UsageError("--cut-through and --dust-limit go with a BlindBit server (--blindbit or --grpc)")
    if remote.get("tls") and not any(value for _, value in named):
        raise click.UsageError("--tls goes with --grpc, --electrum or --cake")
    if remote.get("share_scan_key") and not remote.get("electrum"):
        raise click.UsageError("--share-scan-key goes with --electrum")
    tls = remote.get("tls")
    if db:
        return sources.open(db)
    if rest_url or rpc_url:
        node_client(rest_url, rpc_url, rpc_cookie, rpc_user)  # the options checked
        if rest_url:
            return sources.open(f"rest+{rest_url}", retry=retry, timeout=timeout)
        user, password = rpc_credentials(rpc_user) if rpc_user else (None, None)
        return sources.open(f"rpc+{rpc_url}", cookie_file=rpc_cookie, user=user, password=password, retry=retry, timeout=timeout)
    if blindbit:
        return sources.open(blindbit, dust_limit=dust_limit, cut_through=cut_through, retry=retry, timeout=timeout)
    if remote.get("grpc"):
        url = f"{'grpcs' if tls else 'grpc'}://{_host_port(remote['grpc'], '--grpc')}"
        return sources.open(url, dust_limit=dust_limit, cut_through=cut_through, retry=retry, timeout=timeout)
    if remote.get("electrum"):
        if not remote.get("share_scan_key"):
            raise click.UsageError("--electrum sends the scan key to the server (Frigate scans for the wallet there): add --share-scan-key to agree")
        wallet = remote["wallet"]
        url = f"{'ssl' if tls else 'tcp'}://{_host_port(remote['electrum'], '--electrum')}"
        return sources.open(url, scan_key32=remote["scan_key32"], spend_pubkey33=wallet.spend_pubkey33, labels=wallet.labels, retry=retry, timeout=timeout)
    return sources.open(f"{'cake+ssl' if tls else 'cake+tcp'}://{_host_port(remote['cake'], '--cake')}", retry=retry, timeout=timeout)


def _host_port(text: str, option: str) -> str:
    """HOST:PORT ([v6]:PORT) as given.

    Raises:
        click.BadParameter: no host or no port in 1..65535.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{text[:80]!r} is not HOST:PORT", param_hint=option)
    return text


def _show(progress: Progress):
    def show(stats: WalletSyncStats) -> None:
        progress.total = max(stats.target - stats.start + 1, stats.blocks)
        label = f"height {stats.height}  {stats.found} found, {stats.spent} spent" + ("  (waiting for blocks)" if stats.waiting else "")
        progress.update(stats.blocks, label)

    return show


class _Retrying:
    """Print the first retry notice of each round, not one per request in flight (a server that went away fails
    them all, each naming its request)."""

    def __init__(self) -> None:
        self.last = ""

    def __call__(self, line: str) -> None:
        step = line.rpartition("; retry ")[2]
        if step != self.last:
            self.last = step
            click.echo(f"sp-scan: {line}", err=True)


_SYNC_OPTIONS = (
    click.option("--scan-key-file", metavar="F", help=f"File holding the 64-hex scan key; - reads stdin. Else {SCAN_KEY_ENV}, else stdin."),
    click.option("--descriptor-file", metavar="F", help="Read the scan key from the wallet's sp() descriptor file instead (- reads stdin)."),
    click.option("--db", metavar="FILE", help="Sync from a local sp-scan index file."),
    node_options,
    click.option("--blindbit", metavar="URL", help="Sync from a BlindBit Oracle v1 server, e.g. http://127.0.0.1:8000."),
    click.option("--grpc", "grpc_target", metavar="HOST:PORT", help="Sync from a BlindBit Oracle v2 gRPC server (needs the serve extra)."),
    click.option("--electrum", "electrum_target", metavar="HOST:PORT", help="Sync through a Frigate server's remote scanning (it is given the scan key: needs --share-scan-key)."),
    click.option("--share-scan-key", is_flag=True, help="With --electrum: agree to send the scan private key to the server, which can then see every payment to the wallet."),
    click.option("--cake", "cake_target", metavar="HOST:PORT", help="Sync from a Cake Wallet electrs server (blockchain.tweaks.subscribe): tweaks and keys streamed, scanned here."),
    click.option("--tls", is_flag=True, help="With --grpc, --electrum or --cake: connect with TLS (certificates checked against the system's authorities)."),
    click.option("--cut-through", is_flag=True, help="With --blindbit or --grpc: ask for the cut-through tweaks: txs whose outputs are all spent are skipped, and so never listed."),
    click.option("--dust-limit", type=click.IntRange(min=0), default=0, metavar="N", help="With --blindbit or --grpc: skip txs whose largest taproot output is below N sats."),
    click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height to sync (default: the source's tip)."),
    click.option("--follow", is_flag=True, help="Keep polling for new blocks until Ctrl-C or SIGTERM."),
    click.option("--interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True, metavar="S", help="Seconds between polls with --follow."),
    click.option("--mempool", is_flag=True, help="Also keep the unconfirmed payments in the source's mempool (--db over an index synced with --mempool, or --electrum)."),
    click.option(
        "--verify-with", metavar="URL",
        help="With --blindbit or --grpc: prove every output found against your node's REST interface (http://HOST:PORT) or an Electrum server "
        "(tcp:// or ssl://HOST:PORT: the transaction under a merkle proof and headers with proof of work); without it they are kept as unverified.",
    ),

    click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Scanning threads."),
    click.option("--retries", type=click.IntRange(min=0), default=5, show_default=True, help="Retries of a failing request (0.5 s, doubling) before giving up."),
    click.option(
        "--timeout", type=click.FloatRange(min=0.1), default=DEADLINE, show_default=True, metavar="S",
        help="Seconds a request may take, its retries included (a stream: may go without an answer), before the sync gives up naming it.",
    ),
)


def _sync_options(command):
    for option in reversed(_SYNC_OPTIONS):
        command = option(command)
    return command


_SYNC_HELP = f"""One source: --db (a local sp-scan index), --rest/--rpc (your Core node, block by block), --blindbit (a
BlindBit Oracle v1 server: tweaks and filters per block; outputs fetched only when a filter matches), --grpc
(BlindBit v2: tweaks and 8-byte output prefixes streamed; outputs asked for on a match), --cake (Cake's
electrs: tweaks and output keys streamed; a match's tx and merkle proof fetched) or --electrum (Frigate:
the server scans with the scan key it is given, --share-scan-key; each reported tx and its merkle proof
are fetched and checked here). Spends through --electrum and --cake come from the history of each
output's script. Each block is committed with the synced height, so an interrupted or killed sync resumes
where it stopped. A fork (a stored block hash the source no longer has) rolls back what came after it and
rescans (from a source with headers, only a fork with more chain work). BlindBit gives no transactions: what
--blindbit and --grpc find is kept unverified (`wallet list --unverified`) unless --verify-with proves it; a
sync from a source that proves outputs (or with --verify-with) settles the unverified ones first.

The scan key is read only from {SOURCES} (or the wallet's sp() descriptor file), never from an argument,
and must be the wallet's."""


@wallet.command(help=f"""Scan the source's blocks since the wallet's last synced height (or its birthday) for payments.

{_SYNC_HELP}""")
@WALLET_ARGUMENT
@_sync_options
@click.pass_context
def sync(ctx, path, **options):
    ctx.exit(_sync(path, None, **options))


@wallet.command(help=f"""Forget what the wallet holds from height --from H up, then sync those blocks again: the way back from a
damaged file (`wallet check` names the height), or from a source that told less than the truth.

{_SYNC_HELP}""")
@WALLET_ARGUMENT
@click.option("--from", "rescan_from", type=click.IntRange(min=0), required=True, metavar="H", help="The first height to forget and scan again (the birthday or below: all of them).")
@_sync_options
@click.pass_context
def rescan(ctx, path, rescan_from, **options):
    ctx.exit(_sync(path, rescan_from, **options))


def _sync(
    path, rescan_from, scan_key_file, descriptor_file, db, rest_url, rpc_url, rpc_cookie, rpc_user, blindbit, grpc_target, electrum_target, share_scan_key, cake_target, tls,
    cut_through, dust_limit, stop, follow, interval, mempool, verify_with, jobs, retries, timeout,
) -> int:  # fmt: skip
    """`wallet sync` and `wallet rescan`: the exit status."""
    retry = Retry(retries, report=_Retrying(), deadline=timeout)
    if descriptor_file is not None and scan_key_file is not None:
        raise click.UsageError("give --scan-key-file or --descriptor-file, not both")
    if mempool and not (db or electrum_target):
        raise click.UsageError(
            "--mempool goes with --db (an index that `sp-scan index sync --follow --mempool` keeps) or --electrum: a node gives no prevouts for mempool txs, BlindBit and Cake no mempool"
        )
    with Wallet.open(path) as w:
        remote = {"grpc": grpc_target, "electrum": electrum_target, "cake": cake_target, "tls": tls, "share_scan_key": share_scan_key}
        if electrum_target and share_scan_key:  # Frigate's source is given the key it sends (checked to be the wallet's first)
            remote["scan_key32"] = read_descriptor(descriptor_file).scan_key32 if descriptor_file else read_scan_key(scan_key_file)
            remote["wallet"] = w
            w.receiver(remote["scan_key32"])
        source = _source(db, rest_url, rpc_url, rpc_cookie, rpc_user, blindbit, cut_through, dust_limit, retry, remote, timeout)
        prover = None
        try:
            if verify_with:
                if source.proves:
                    raise click.UsageError(f"--verify-with goes with --blindbit or --grpc: {source.name} proves what it finds itself")
                prover = _prover(verify_with, retry, timeout)
            scan_key32 = remote.get("scan_key32") or (read_descriptor(descriptor_file).scan_key32 if descriptor_file else read_scan_key(scan_key_file))
            progress = Progress(0, sys.stderr, sys.stderr.isatty())
            code = 0
            try:
                with stop_signals("the wallet"):
                    stats = w.sync(
                        source, scan_key32, stop=stop, follow=follow, interval=interval, mempool=mempool, threads=jobs, progress=_show(progress),
                        rescan_from=rescan_from, verify_with=prover,
                    )  # fmt: skip
            except (KeyboardInterrupt, Terminated) as exc:
                progress.close()
                tip = w.tip()
                code = stopped(exc, f"the wallet is synced to height {tip[0]}" if tip else "the wallet has synced no block")
            else:
                progress.close()
                tip = w.tip()
                at = f"at height {tip[0]} ({tip[1][::-1].hex()})" if tip else "before its birthday"
                forks = f", {stats.reorgs} fork(s) rolled back {stats.rolled_back} block(s)" if stats.reorgs else ""
                settled = f", {stats.settled} pending spend(s) settled" if stats.settled else ""
                unverified = f" ({stats.unverified} unverified: `wallet list --unverified`)" if stats.unverified else ""
                proven = f"; earlier unverified outputs: {stats.proven} proven, {stats.refuted} shown not to exist" if stats.proven or stats.refuted else ""
                click.echo(f"wallet {at}: {stats.blocks} block(s) scanned, {stats.found} output(s) found{unverified}, {stats.spent} spent{forks}{settled}{proven}")
            finally:
                progress.close()  # before an error's line
        finally:
            source.close()
            if prover is not None:
                prover.close()
    return code


def _prover(url: str, retry, timeout: float):
    """The --verify-with prover: a node's REST interface (http(s)://) or an Electrum server (tcp://, ssl://)."""
    if url.partition("://")[0] not in ("http", "https", "tcp", "ssl"):
        raise click.BadParameter(f"{url[:80]!r} is neither http(s)://HOST:PORT (a node's REST) nor tcp:// or ssl://HOST:PORT (an Electrum server)", param_hint="--verify-with")
    return sources.open_prover(url.rstrip("/"), retry=retry, timeout=timeout)


def record(o: WalletOutput) -> dict:
    """An output as `index scan --json` prints one."""
    return output.index_match_record(IndexMatch(o.height, o.txid32, o.vout, o.amount, FoundOutput(o.output32, o.tweak32, o.label), o.spent))


@wallet.command("list", help="""Every output found that a source proved, in block order, then the unconfirmed ones (height null);
with --unverified, the outputs only a server's word holds instead (found through BlindBit without --verify-with).

JSON Lines with --json, the keys of `sp-scan index scan --json`: {"height", "txid", "vout", "amount", "output",
"tweak", "label", "spent"}; spend an output with b_spend + tweak.""")
@WALLET_ARGUMENT
@click.option("--unspent", is_flag=True, help="Only the outputs not yet spent.")
@click.option("--unverified", is_flag=True, help="List the unverified outputs (apart: `balance` counts them apart and `send` spends them only with --allow-unverified).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
def list_command(path, unspent, unverified, as_json):
    with Wallet.open(path) as w:
        outputs = [o for o in (w.unspent() if unspent else w.outputs()) if (o.height is not None and not o.verified) == unverified]
    emit = output.Emitter("index-scan", as_json)
    emit.block(emit.text([record(o) for o in outputs]))


@wallet.command(help="""The unspent coins' satoshis by state; --json: {"confirmed", "unverified", "reserved", "outgoing", "incoming"}.

confirmed: mined coins a source proved (what `wallet send` spends); unverified: mined coins only a server's
word holds (BlindBit without --verify-with: `wallet list --unverified`); reserved: coins of PSBTs written by
`wallet send` and not broadcast; outgoing: coins the wallet's broadcast transactions spend; incoming: payments
not mined yet (the source's mempool, the change of the wallet's broadcast transactions).""")
@WALLET_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def balance(path, as_json):
    with Wallet.open(path) as w:
        sums = dataclasses.asdict(w.balance())
    if as_json:
        click.echo(json.dumps(sums))
    else:
        for name, value in sums.items():
            click.echo(f"{name:<13}{value:>20,} sats")


@wallet.command(help="""Read every row of the wallet file and check it against its checksum, and that no row was deleted or added.

Prints what was checked; damage is one line naming the way back (`wallet rescan --from H`, `wallet abandon --all`,
or creating the wallet again when its keys are damaged), exit status 2.""")
@WALLET_ARGUMENT
def check(path):
    with Wallet.open(path) as w:
        checked = w.check()
    click.echo(f"{path}: ok ({checked['blocks']} block hashes, {checked['outputs']} outputs, {checked['unconfirmed']} unconfirmed, {checked['pending']} pending spends)")


@wallet.command(help="""Describe the wallet: network, address, labels, birthday, synced height, outputs and balance.""")
@WALLET_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info(path, as_json):
    with Wallet.open(path) as w:
        record_ = w.info()
    if as_json:
        click.echo(json.dumps(record_))
        return
    rows = [
        ("network", record_["network"]),
        ("address", record_["address"]),
        ("labels", ", ".join(map(str, record_["labels"]))),
        ("birthday", record_["birthday"]),
        ("synced to", record_["height"]),
        ("block hash", record_["hash"]),
        ("outputs", f"{record_['outputs']:,} ({record_['spent']:,} spent)"),
        ("pending", f"{record_['pending']:,} spend(s)"),
        *((name, f"{record_[name]:,} sats") for name in ("confirmed", "unverified", "reserved", "outgoing", "incoming")),
    ]
    for name, value in rows:
        click.echo(f"{name:<13}{'-' if value is None else value}")


def _recipient(text: str) -> tuple[str, int]:
    address, sep, amount = text.rpartition(":")
    if not sep or not address or not amount.isdigit():
        raise click.UsageError(f"--to takes ADDRESS:SATS, not {text[:20]!r}")
    return address, int(amount)


def _coin(text: str) -> tuple[bytes, int]:
    txid, sep, vout = text.rpartition(":")
    if not sep or len(txid) != 64 or not vout.isdigit():
        raise click.UsageError("--from takes TXID:VOUT (the txid in display hex)")
    try:
        return bytes.fromhex(txid)[::-1], int(vout)
    except ValueError:
        raise click.UsageError("--from takes TXID:VOUT (the txid in display hex)") from None


def _broadcaster(network, rpc_url, rpc_cookie, rpc_user, forward_url, electrum_url) -> sp_broadcast.Broadcaster:
    """The one broadcast channel the options name, for a wallet of `network`."""
    given = [n for n, v in (("--rpc", rpc_url), ("--blindbit", forward_url), ("--electrum", electrum_url)) if v]
    if len(given) != 1:
        raise click.UsageError("give one of --rpc URL, --blindbit URL or --electrum URL to broadcast" + (f" (not {' and '.join(given)})" if given else ""))
    if (rpc_cookie or rpc_user) and not rpc_url:
        raise click.UsageError("--rpc-cookie and --rpc-user go with --rpc")
    if rpc_url:
        node_client(None, rpc_url, rpc_cookie, rpc_user)  # the options checked
        user, password = rpc_credentials(rpc_user) if rpc_user else (None, None)
        return sp_broadcast.Broadcaster(f"rpc+{rpc_url}", network, cookie_file=rpc_cookie, user=user, password=password)
    return sp_broadcast.Broadcaster(forward_url or electrum_url, network)


@wallet.command(help=f"""Build a PSBT (version 2) spending the wallet's coins to --to ADDRESS:SATS (repeat).

Addresses: silent-payments (sp1…/tsp1…: BIP375 outputs the signer computes), segwit (bech32/bech32m) or base58.
Coins: the confirmed unspent ones, chosen largest first (--include-unconfirmed lets it take unconfirmed ones),
or exactly the --from TXID:VOUT given. Each input carries PSBT_IN_WITNESS_UTXO and PSBT_IN_SP_TWEAK (BIP376) and,
when the wallet knows the spend key's origin (created from a descriptor), PSBT_IN_SP_SPEND_BIP32_DERIVATION.
Change goes to the wallet's change label (m = 0) or --change ADDRESS; change below dust is left out only while
the fee stays within 1 sat/vB of --fee-rate. The fee pays at least --fee-rate for the signed size and less than
1 sat/vB more. Outputs below Core's dust threshold are refused, and so are a fee rate above Core's maxfeerate
(0.10 BTC/kvB) and a fee above the amount sent, unless --max-fee-rate says how high the rate may go.

The PSBT goes to --out (or stdout); sign it with `sp-scan psbt sign`. With --broadcast the spend is signed here
(spend key from {SPEND_SOURCES}; never an argument) and broadcast through --rpc, --blindbit or --electrum.
Its coins are reserved as a pending spend (`wallet pending`): no other send takes them until `wallet abandon`,
a broadcast of another spend of them, or a block that spends one of them. --replace SPEND builds a replacement
(BIP125) of that pending spend: all its coins (and --from's), a fee above its own; the signer computes the
silent-payment outputs for the new inputs. A summary goes to stderr; --json prints {{"inputs", "outputs",
"change", "fee", "vsize", "fee_rate", "txid", "pending"}}.""")
@WALLET_ARGUMENT
@click.option("--to", "recipients", metavar="ADDRESS:SATS", multiple=True, required=True, help="Pay SATS to ADDRESS (repeat).")
@click.option("--fee-rate", required=True, metavar="SAT/VB", help="Fee rate in sat/vB (up to 3 decimals; at least 0.1).")
@click.option("--from", "coins", metavar="TXID:VOUT", multiple=True, help="Spend exactly these coins (repeat).")
@click.option("--change", metavar="ADDRESS", help="Send the change here instead of the wallet's change label.")
@click.option("--include-unconfirmed", is_flag=True, help="Let the selection take unconfirmed coins.")
@click.option("--allow-unverified", is_flag=True, help="Let it spend coins only a server's word holds (`wallet list --unverified`).")
@click.option("--max-fee-rate", metavar="SAT/VB", help="The highest fee rate allowed (default: Core's maxfeerate, 10,000 sat/vB); given, a fee above the amount sent is allowed too.")
@click.option("--replace", "replaces", type=click.IntRange(min=1), metavar="SPEND", help="Replace this pending spend (its id in `wallet pending`).")
@click.option("--out", "-o", metavar="FILE", help="Write the PSBT (base64) to FILE instead of stdout.")
@click.option("--broadcast", "do_broadcast", is_flag=True, help="Sign with the spend key and broadcast instead of writing the PSBT only.")
@click.option("--spend-key-file", metavar="F", help="With --broadcast: file holding the 64-hex spend key; - reads stdin.")
@click.option("--descriptor-file", metavar="F", help="With --broadcast: an sp() descriptor holding the spend key.")
@broadcast_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def send(
    path, recipients, fee_rate, coins, change, include_unconfirmed, allow_unverified, max_fee_rate, replaces, out, do_broadcast, spend_key_file, descriptor_file,
    rpc_url, rpc_cookie, rpc_user, forward_url, electrum_url, as_json,
):  # fmt: skip
    if not do_broadcast and (spend_key_file or descriptor_file or rpc_url or forward_url or electrum_url):
        raise click.UsageError("the spend key and --rpc/--blindbit/--electrum go with --broadcast")
    options = {"coins": [_coin(c) for c in coins] or None, "change": change, "unconfirmed": include_unconfirmed, "max_fee_rate": max_fee_rate, "allow_unverified": allow_unverified, "replaces": replaces}
    txid32 = None
    with Wallet.open(path) as w:
        send_to = _broadcaster(w.network, rpc_url, rpc_cookie, rpc_user, forward_url, electrum_url) if do_broadcast else None
        p, spend = w.create_psbt([_recipient(t) for t in recipients], fee_rate, **options)
        if out is not None or not do_broadcast:
            _write(p.to_base64() + "\n", out)
        if do_broadcast:
            key = read_spend_key(spend_key_file, descriptor_file)
            try:
                signed = sp_psbt.sign_sp_inputs(p, key)
            except BaseException:
                if out is None:
                    w.abandon([spend.pending])  # nothing was written or sent: its coins are free again
                raise
            finally:
                key[:] = bytes(len(key))
            txid32 = w.broadcast(signed, send_to)
    change_text = f", change {spend.outputs[spend.change].amount:,} sats (output {spend.change})" if spend.change is not None else ", no change"
    summary = f"{len(spend.coins)} input(s), {len(spend.outputs)} output(s){change_text}, fee {spend.fee:,} sats for {spend.vsize} vB ({spend.fee_rate:.3f} sat/vB)"
    if as_json:
        click.echo(json.dumps({
            "inputs": [f"{c.txid32[::-1].hex()}:{c.vout}" for c in spend.coins], "outputs": [o.amount for o in spend.outputs],
            "change": spend.change, "fee": spend.fee, "vsize": spend.vsize, "fee_rate": round(spend.fee_rate, 3),
            "txid": txid32[::-1].hex() if txid32 else None, "pending": spend.pending,
        }))  # fmt: skip
    held = f"; its coins are held by pending spend {spend.pending} (`wallet abandon {path} {spend.pending}` frees them)"
    click.echo(f"sp-scan: {summary}" + (f"; broadcast {txid32[::-1].hex()}" if txid32 else "") + held, err=True)


@wallet.command(help="""Forget the pending spends SPEND... (their ids, as `wallet send` and `wallet pending` print them), or all of
them with --all: their coins are free again for `wallet send`. A transaction already broadcast may still be
mined: abandon only what you replaced or what the network refused.""")
@WALLET_ARGUMENT
@click.argument("ids", metavar="SPEND...", nargs=-1, type=click.IntRange(min=1))
@click.option("--all", "every", is_flag=True, help="Forget every pending spend (also the way back from damaged pending rows).")
def abandon(path, ids, every):
    if bool(ids) == every:
        raise click.UsageError("give the ids of the pending spends to abandon, or --all")
    with Wallet.open(path) as w:
        gone = w.abandon(None if every else ids)
    click.echo(f"abandoned {len(gone)} pending spend(s)" + (f": {', '.join(map(str, gone))}" if gone else ""))


def _write(text: str, out: str | None) -> None:
    if out is None:
        click.echo(text, nl=False)
    else:
        with open(out, "w") as f:
            f.write(text)


def _read_tx(source: str) -> bytes | sp_psbt.Psbt:
    """A raw transaction from a file ("-" is stdin) in hex, or a signed PSBT."""
    data = sys.stdin.buffer.read() if source == "-" else open(source, "rb").read()
    text = data.strip()
    try:
        return from_hex(text.decode("ascii"), "TX")
    except (UnicodeDecodeError, MalformedDataError):
        pass
    try:
        return sp_psbt.parse(data)
    except PSBTError as exc:
        if exc.rule == sp_psbt.STRUCTURE and "neither a binary PSBT" in str(exc):
            raise MalformedDataError("TX is neither a raw transaction in hex nor a PSBT") from None
        raise


@wallet.command(help="""Broadcast the signed transaction TX (a file of raw hex, or a signed PSBT; - reads stdin) for the wallet W.

Through --rpc (your node's sendrawtransaction; checked to be on the wallet's network), --blindbit (a BlindBit
server's POST /forward-tx, as `sp-scan serve --rpc` relays it) or --electrum (blockchain.transaction.broadcast).
Prints the txid. The wallet records it as a pending spend (`balance` shows its coins outgoing and its change
incoming) until a block spends its coins. A transaction that replaces a pending spend paying a silent-payments
address with other inputs is taken only as a signed PSBT, whose silent-payment outputs are checked against its
inputs (BIP352: they change with them).""")
@WALLET_ARGUMENT
@click.argument("tx_file", metavar="TX")
@broadcast_options
def broadcast(path, tx_file, rpc_url, rpc_cookie, rpc_user, forward_url, electrum_url):
    with Wallet.open(path) as w:
        send_to = _broadcaster(w.network, rpc_url, rpc_cookie, rpc_user, forward_url, electrum_url)
        txid32 = w.broadcast(_read_tx(tx_file), send_to)
    click.echo(txid32[::-1].hex())


@wallet.command(help="""The pending spends: reserved by `wallet send` (a PSBT written) or broadcast, until a block spends their coins
or `wallet abandon`. --json: one object per line, {"id", "state", "txid", "coins", "outgoing", "fee", "change",
"pays_sp"}.""")
@WALLET_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
def pending(path, as_json):
    with Wallet.open(path) as w:
        spends = w.pending()
    for p in spends:
        row = {
            "id": p.id, "state": "broadcast" if p.txid32 else "reserved", "txid": p.txid32[::-1].hex() if p.txid32 else None,
            "coins": [f"{op[:32][::-1].hex()}:{int.from_bytes(op[32:], 'little')}" for op, _ in p.coins], "outgoing": p.outgoing,
            "fee": p.fee, "change": p.change_amount, "pays_sp": p.pays_sp,
        }  # fmt: skip
        if as_json:
            click.echo(json.dumps(row))
        else:
            click.echo(f"{p.id:>4}  {row['state']:<9}  {row['txid'] or '-':<64}  {len(p.coins)} coin(s), {p.outgoing:,} sats out, fee {p.fee:,}, change {p.change_amount:,}")
