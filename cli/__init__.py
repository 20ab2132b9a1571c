"""sp-scan's command line: parse options, call the library, print results.

Every error (SPError, OSError, a usage problem) is one line on stderr and
exit status 2; Ctrl-C is exit status 130. Output already printed stays
valid JSON Lines.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import Callable

import click
from coincurve import PrivateKey

from sp_scan.errors import ConfigError, InvalidKeyError, SPError

try:  # the native door checks SP_SCAN_* when it loads: a bad setting is one line and exit 2
    from sp_scan import native
except ConfigError as _exc:
    sys.stderr.write(f"sp-scan: error: {_exc}\n")
    sys.exit(2)

from sp_scan import address as sp_address  # noqa: E402
from sp_scan import crypto  # noqa: E402
from sp_scan.node import RestNode, RpcNode  # noqa: E402
from sp_scan.scan import Receiver  # noqa: E402

from . import interop, keys, output, sources  # noqa: E402
from .run import Interrupted, run  # noqa: E402

RPC_PASSWORD_ENV = "SP_SCAN_RPC_PASSWORD"
NETWORKS = {
    "main": "sp", "mainnet": "sp", "bitcoin": "sp",
    "test": "tsp", "testnet": "tsp", "testnet3": "tsp", "testnet4": "tsp", "signet": "tsp", "regtest": "tsp",
}  # fmt: skip
EXIT_ERROR, EXIT_INTERRUPTED = 2, 130
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2

KEYS_HELP = f"""
The scan key is read only from {keys.SOURCES}; never from an argument, and it is never printed.
The spend public key comes from --spend-pubkey or {keys.SPEND_PUBKEY_ENV}.
"""


# A lone 64-hex-digit token in a usage or file error is a value the user typed (a pasted key):
# click echoes option values, so it is blanked out, never printed.
_TYPED_KEY = re.compile(r"(?<![0-9A-Za-z./\\-])[0-9a-fA-F]{64}(?![0-9A-Za-z./\\-])")


def _unechoed(message: str) -> str:
    return _TYPED_KEY.sub("<64 hex digits, not echoed>", message)


def _fail(message: str) -> None:
    click.echo(f"sp-scan: error: {' '.join(str(message).split())}", err=True)


class App(click.Group):
    """The `sp-scan` group: `sp-scan BLOCK...` runs the hidden `auto` command; errors are one line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = ["auto", *args]
        return super().parse_args(ctx, args)

    def main(self, args=None, prog_name=None, **extra):  # type: ignore[override]
        try:
            code = super().main(args=args, prog_name=prog_name or "sp-scan", standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("sp-scan: interrupted", err=True)
            code = EXIT_INTERRUPTED
        except Interrupted as exc:
            hint = f"; resume with --from {exc.resume}" if exc.resume is not None else ""
            click.echo(f"sp-scan: interrupted{hint}", err=True)
            code = EXIT_INTERRUPTED
        except KeyboardInterrupt:
            click.echo("sp-scan: interrupted", err=True)
            code = EXIT_INTERRUPTED
        except _NO_ARGS_IS_HELP as exc:  # bare `sp-scan` or a bare group: help, not an error
            click.echo(exc.ctx.get_help())
            code = 0
        except click.ClickException as exc:
            _fail(_unechoed(exc.format_message()))
            code = EXIT_ERROR
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly.
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            code = 1
        except SPError as exc:
            _fail(str(exc))
            code = EXIT_ERROR
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(_unechoed(f"{where}{exc.strerror or exc}"))
            code = EXIT_ERROR
        sys.exit(code if isinstance(code, int) else 0)


def version_text() -> str:
    """`sp-scan --version`: the package version and the engines in use."""
    try:
        version = importlib.metadata.version("sp-scan")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    sha = native.sha256_impl() if native.ENABLED else "hashlib"
    return f"sp-scan {version} (EC engine: {native.ec_engine()}; sha256: {sha})"


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(name="sp-scan", cls=App, help=f"""Silent Payments (BIP352) scanner for blocks from your Bitcoin Core node.

\b
sp-scan BLOCK... alone scans when keys are configured (a scan key file or
{keys.SCAN_KEY_ENV}, and a spend public key) and lists tweaks otherwise.
{KEYS_HELP}""")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version, help="Show the version and the EC engine in use, then exit.")
def app() -> None:
    pass


NODE_OPTIONS = [
    click.option("--rest", "rest_url", metavar="URL", help="Fetch blocks from Core's REST interface, e.g. http://127.0.0.1:8332 (needs -rest; spenttxouts needs Core 30+)."),
    click.option("--rpc", "rpc_url", metavar="URL", help="Fetch blocks over JSON-RPC (getblock 0 and 3), e.g. http://127.0.0.1:8332."),
    click.option("--rpc-cookie", metavar="FILE", help="RPC auth from Core's .cookie file."),
    click.option("--rpc-user", metavar="USER[:PASS]", help=f"RPC auth; without :PASS the password is read from {RPC_PASSWORD_ENV}."),
]


def node_options(f):
    """--rest, or --rpc with its auth options."""
    for decorator in reversed(NODE_OPTIONS):
        f = decorator(f)
    return f


def block_options(f):
    """Options shared by commands that read blocks."""
    decorators = [
        click.argument("blocks", metavar="BLOCK...", nargs=-1),
        click.option("--spent", metavar="FILE", help="Spent outputs of a single BLOCK: Core's /rest/spenttxouts .bin/.hex/.json, or getblock-3 JSON (format detected). Default: BLOCK's stem + .spent.hex/.spent.bin beside it."),
        *NODE_OPTIONS,
        click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height of a node range (restart from here)."),
        click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height of a node range (default: the node's tip)."),
        click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes; output stays in block order."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON Lines."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def key_options(f):
    """Options for the receiver's keys (the scan key never as an argument)."""
    decorators = [
        click.option("--scan-key-file", metavar="F", help=f"File holding the 64-hex scan key; - reads stdin. Else {keys.SCAN_KEY_ENV}, else stdin."),
        click.option("--spend-pubkey", metavar="HEX", envvar=keys.SPEND_PUBKEY_ENV, help=f"33-byte spend public key, hex (or {keys.SPEND_PUBKEY_ENV})."),
        click.option("--label", "labels", metavar="M", multiple=True, type=click.IntRange(0, 2**32 - 1), help="A label m in use (repeat); the change label 0 is always scanned."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def node_client(rest_url: str | None, rpc_url: str | None, rpc_cookie: str | None, rpc_user: str | None) -> RestNode | RpcNode | None:
    """The node the options name (--rest or --rpc with its auth), or None when neither is given."""
    if rest_url and rpc_url:
        raise click.UsageError("give --rest or --rpc, not both")
    if rpc_url is None and (rpc_cookie or rpc_user):
        raise click.UsageError("--rpc-cookie and --rpc-user go with --rpc")
    if rest_url:
        return RestNode(rest_url)
    if not rpc_url:
        return None
    if rpc_cookie and rpc_user:
        raise click.UsageError("give --rpc-cookie or --rpc-user, not both")
    user, password = rpc_credentials(rpc_user) if rpc_user else (None, None)
    return RpcNode(rpc_url, cookie_file=rpc_cookie, user=user, password=password)


def rpc_credentials(rpc_user: str) -> tuple[str, str]:
    """(user, password) of --rpc-user USER[:PASS]; without :PASS the password is SP_SCAN_RPC_PASSWORD's.

    Raises:
        click.UsageError: no :PASS and SP_SCAN_RPC_PASSWORD is not set.
    """
    user, sep, password = rpc_user.partition(":")
    password = password if sep else os.environ.get(RPC_PASSWORD_ENV)
    if password is None:
        raise click.UsageError(f"--rpc-user without :PASS needs {RPC_PASSWORD_ENV}")
    return user, password


def refuse_key_like(blocks: tuple[str, ...]) -> None:
    """A BLOCK argument that looks like a key, hash or descriptor and names no file: refuse it, unechoed."""
    for arg in blocks:
        if sources.looks_like_key(arg):
            raise click.UsageError(
                "a BLOCK argument looks like a key, hash or descriptor and names no file (not shown): keys and "
                f"descriptors are never taken from arguments (the scan key comes from {keys.SOURCES}; ranges use --from/--to)"
            )


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


def _receiver(scan_key_file: str | None, spend_pubkey: str | None, labels: tuple[int, ...]) -> Receiver:
    if not spend_pubkey:
        raise click.UsageError(f"scanning needs --spend-pubkey HEX (or {keys.SPEND_PUBKEY_ENV})")
    spend33 = keys.parse_pubkey(spend_pubkey, "--spend-pubkey")
    return Receiver(keys.read_scan_key(scan_key_file), spend33, tuple(labels))


descriptor_option = click.option(
    "--descriptor-file", metavar="F",
    help="The wallet as an sp() descriptor file (- reads stdin) instead of the key options: its keys, labels 1..ml, and --from bh for a range.",
)  # fmt: skip


def key_options_typed(scan_key_file: str | None, labels: tuple[int, ...]) -> bool:
    """True when a key option was given on the command line (--spend-pubkey from its environment variable is not)."""
    typed_spend = click.get_current_context().get_parameter_source("spend_pubkey") is click.core.ParameterSource.COMMANDLINE
    return bool(scan_key_file or labels or typed_spend)


def wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file) -> tuple[Callable[[], Receiver], int | None]:
    """(how to get the receiver, the wallet's birthday height or None) from the key options or a descriptor.

    The receiver is made by calling the first item, after other arguments are checked, so a bad
    argument never waits for a key on stdin. A descriptor file is read here.
    """
    if descriptor_file is None:
        return functools.partial(_receiver, scan_key_file, spend_pubkey, labels), None
    if key_options_typed(scan_key_file, labels):
        raise click.UsageError("give --descriptor-file or --scan-key-file/--spend-pubkey/--label, not both")
    wallet = interop.read_descriptor(descriptor_file)
    return wallet.receiver, wallet.birthday_height


def _run_blocks(mode: str, receiver_of, as_json: bool, jobs: int, **where) -> None:
    # Sources are checked before the scan key is read, so a bad argument never waits on stdin.
    srcs = _block_sources(**where)
    receiver = receiver_of() if receiver_of is not None else None
    run(srcs, mode, receiver, jobs, output.Emitter(mode, as_json))


@app.command(help="""List the tweak (input_hash·A, 33 bytes) of every eligible transaction, in block order.

BLOCK is a block file (.hex/.bin with BLOCK's stem + .spent.hex/.spent.bin beside it, or getblock-3 JSON);
or use --rest/--rpc URL --from H [--to H]. JSON Lines: {"txid", "tweak"}.""")
@block_options
def tweaks(as_json, jobs, **where):
    _run_blocks("tweaks", None, as_json, jobs, **where)


@app.command(help=f"""Find the outputs paying a receiver, in block order.

JSON Lines: {{"txid", "vout", "amount", "output", "tweak", "label"}} (amount in sats, label m or null);
spend a found output with b_spend + tweak.
{KEYS_HELP}""")
@block_options
@key_options
@descriptor_option
def scan(as_json, jobs, scan_key_file, spend_pubkey, labels, descriptor_file, **where):
    receiver_of, birthday = wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file)
    if where["start"] is None and (where["rest_url"] or where["rpc_url"]) and birthday is not None:
        where["start"] = birthday
    _run_blocks("scan", receiver_of, as_json, jobs, **where)


@app.command(help="""Classify every input: txid, vin, the spent output's type, and the key it contributes or "not eligible".

JSON Lines: {"txid", "vin", "type", "key", "reason"} (key null when not eligible).""")
@block_options
def extract(as_json, jobs, **where):
    _run_blocks("extract", None, as_json, jobs, **where)


@app.command(hidden=True)
@block_options
@key_options
def auto(as_json, jobs, scan_key_file, spend_pubkey, labels, **where):
    """Scan when keys are configured, else list tweaks."""
    if keys.scan_key_configured(scan_key_file):
        _run_blocks("scan", functools.partial(_receiver, scan_key_file, spend_pubkey, labels), as_json, jobs, **where)
    elif labels:
        raise click.UsageError(f"--label needs a scan key: {keys.SOURCES}")
    else:
        _run_blocks("tweaks", None, as_json, jobs, **where)


def network_options(f):
    f = click.option("--hrp", type=click.Choice(["sp", "tsp"]), help="Address prefix.")(f)
    return click.option("--network", type=click.Choice(sorted(NETWORKS)), help="main -> sp; test networks -> tsp.")(f)


def _hrp(network: str | None, hrp: str | None, default: str | None) -> str | None:
    if network and hrp and NETWORKS[network] != hrp:
        raise click.UsageError(f"--network {network} uses hrp {NETWORKS[network]}, not {hrp}")
    return hrp or (NETWORKS[network] if network else default)


@app.group(help="Silent-payments addresses (bech32m sp1... / tsp1...).")
def address() -> None:
    pass


def _scan_pubkey(scan_key32: bytes) -> bytes:
    crypto.scalar(scan_key32, "the scan key")
    return PrivateKey(scan_key32).public_key.format()


@address.command(help=f"""Print the receiver's address, then one per --label.

The scan public key comes from --scan-pubkey, or from the scan key ({keys.SOURCES}),
which labels need. JSON Lines: {{"label", "address"}}.""")
@click.option("--scan-pubkey", metavar="HEX", help="33-byte scan public key, hex (not needed when the scan key is given).")
@key_options
@network_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines.")
def encode(scan_pubkey, scan_key_file, spend_pubkey, labels, network, hrp, as_json):
    if not spend_pubkey:
        raise click.UsageError(f"give --spend-pubkey HEX (or {keys.SPEND_PUBKEY_ENV})")
    spend33 = keys.parse_pubkey(spend_pubkey, "--spend-pubkey")
    scan_key32 = None
    if labels or not scan_pubkey:
        scan_key32 = keys.read_scan_key(scan_key_file)
    scan33 = keys.parse_pubkey(scan_pubkey, "--scan-pubkey") if scan_pubkey else _scan_pubkey(scan_key32)
    if scan_key32 is not None and scan_pubkey and scan33 != _scan_pubkey(scan_key32):
        raise InvalidKeyError("--scan-pubkey does not belong to the scan key")
    prefix = _hrp(network, hrp, "sp")
    rows = [(None, sp_address.encode(scan33, spend33, prefix))]
    rows += [(m, sp_address.encode(scan33, sp_address.labelled_spend_pubkey(scan_key32, spend33, m), prefix)) for m in labels]
    for m, text in rows:
        click.echo(json.dumps({"label": m, "address": text}) if as_json else (f"{'-' if m is None else m:>10}  {text}"))


@address.command(help="Decode an address: hrp, version, scan and spend public keys.")
@click.argument("addr", metavar="ADDRESS")
@network_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def decode(addr, network, hrp, as_json):
    decoded = sp_address.decode(addr.strip(), _hrp(network, hrp, None))
    record = {"hrp": decoded.hrp, "version": decoded.version, "scan_pubkey": decoded.scan_pubkey33.hex(), "spend_pubkey": decoded.spend_pubkey33.hex()}
    if as_json:
        click.echo(json.dumps(record))
    else:
        for k, v in record.items():
            click.echo(f"{k:<13}{v}")


from .index import index as _index_group  # noqa: E402  (the group needs the helpers above)
from .serve import serve_command  # noqa: E402

app.add_command(_index_group)
app.add_command(serve_command)
app.add_command(interop.psbt)
app.add_command(interop.descriptor)


def main() -> None:
    """The console-script entry point (`sp-scan = sp_scan.cli:main`); exits with the status."""
    app.main(prog_name="sp-scan")
