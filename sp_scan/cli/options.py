"""What the commands share: their group class and options, where secrets are read from, the node client, the wallet.

Secrets (a scan key, private keys, a descriptor) are read by `read_secret` only, from a file,
stdin or the environment, never from an argument, and never echoed: a name that looks like a key
is refused without showing it.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from sp_scan import crypto, network
from sp_scan import descriptor as sp_descriptor
from sp_scan.errors import InvalidKeyError
from sp_scan.node import RestNode, RpcNode
from sp_scan.scan import Receiver

EXIT_ERROR, EXIT_INTERRUPTED = 2, 130
SCAN_KEY_ENV = "SP_SCAN_KEY"
SPEND_KEY_ENV = "SP_SCAN_SPEND_KEY"
SPEND_PUBKEY_ENV = "SP_SCAN_SPEND_PUBKEY"
RPC_PASSWORD_ENV = "SP_SCAN_RPC_PASSWORD"
SOURCES = f"--scan-key-file F (F may be - for stdin), the {SCAN_KEY_ENV} environment variable, or stdin"
KEYS_HELP = f"""
The scan key is read only from {SOURCES}; never from an argument, and it is never printed.
The spend public key comes from --spend-pubkey or {SPEND_PUBKEY_ENV}.
"""
_KEY_LIKE = re.compile(r"[0-9a-fA-F]{64}|[a-z]+\(.*|t?sp(scan|spend)1.*|[xt]prv.*")


# ---- groups --------------------------------------------------------------------


class Group(click.Group):
    """A command group whose unknown command names its closest commands, and never echoes a key-like one."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0]
        if not ctx.resilient_parsing and not name.startswith("-") and self.get_command(ctx, name) is None:
            if looks_like_key(name):
                raise click.UsageError("a command name looks like a key, hash or descriptor (not shown): keys are never taken from arguments", ctx)
            close = difflib.get_close_matches(name, [n for n, c in self.commands.items() if not c.hidden])
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)


# ---- secrets -------------------------------------------------------------------


def looks_like_key(arg: str, base: Path | None = None) -> bool:
    """True for an argument that names no file and looks like a key, hash or descriptor (64 hex
    digits, `name(…)`, spscan/spspend, xprv/tprv): pasted secrets are never read or echoed."""
    return bool(_KEY_LIKE.fullmatch(arg)) and not Path(base or "", arg).exists()


def read_secret(name: str, what: str, *, base: Path | None = None, one_line: bool = False) -> str:
    """Read a file holding secrets ("-" is stdin); a name that looks like a key is refused unechoed.

    Args:
        name: the file name as given; relative to `base` when given.
        what: how messages name it, e.g. "--scan-key-file".
        one_line: read only the first line of stdin.

    Raises:
        click.UsageError: the name looks like a key or descriptor (`looks_like_key`) and names no file.
        OSError: the file cannot be read (it names the file).
    """
    if name == "-":
        return sys.stdin.readline() if one_line else sys.stdin.read()
    if looks_like_key(name, base):
        raise click.UsageError(f"{what} looks like a key or descriptor and names no file (not shown): keys and descriptors are read from files or stdin, never from an argument")
    return Path(base or "", name).read_text()


def scan_key_configured(path: str | None) -> bool:
    """True when a scan key is given without asking: a key file or SP_SCAN_KEY."""
    return path is not None or bool(os.environ.get(SCAN_KEY_ENV))


def read_scan_key(path: str | None, what: str = "--scan-key-file", base: Path | None = None) -> bytes:
    """Read the 32-byte scan key: from `path` ("-" is stdin), else SP_SCAN_KEY, else stdin.

    On a terminal, stdin is read with a hidden prompt. The key is 64 hex
    digits; surrounding whitespace is ignored. Messages never contain it.

    Raises:
        InvalidKeyError: no key, not 64 hex digits, or not a valid secret key.
        click.UsageError, OSError: as `read_secret`.
    """
    text = _key_text(path, what, SCAN_KEY_ENV, "scan key", base)
    if not text.strip():
        raise InvalidKeyError(f"no scan key: give it with {SOURCES}")
    return private_key(text, "the scan key")


def _key_text(path: str | None, what: str, env: str, name: str, base: Path | None = None) -> str:
    """A key's text: the first line of the file `path` ("-" is stdin), else the variable `env`, else stdin
    (a hidden prompt on a terminal)."""
    if path is not None:
        return read_secret(path, what, base=base, one_line=True)
    if os.environ.get(env):
        return os.environ[env]
    if sys.stdin.isatty():
        return click.prompt(f"{name} (64 hex digits)", hide_input=True, err=True)
    return sys.stdin.readline()


SPEND_SOURCES = f"--spend-key-file F (F may be - for stdin), --descriptor-file F (an sp() descriptor holding it), the {SPEND_KEY_ENV} environment variable, or stdin"


def read_spend_key(path: str | None, descriptor_file: str | None) -> bytearray:
    """Read b_spend: from `path` ("-" is stdin), a descriptor file, else SP_SCAN_SPEND_KEY, else stdin.

    Returns a bytearray the caller zeroes after use (the text it was read from is a Python str,
    which cannot be wiped). Messages never contain the key.

    Raises:
        InvalidKeyError: no key, not 64 hex digits, not a valid key, or a watch-only descriptor.
        DescriptorError, click.UsageError, OSError: as `read_descriptor` and `read_secret`.
    """
    if path is not None and descriptor_file is not None:
        raise click.UsageError("give --spend-key-file or --descriptor-file, not both")
    if descriptor_file is not None:
        described = read_descriptor(descriptor_file)
        if described.spend_key32 is None:
            raise InvalidKeyError("the descriptor is watch-only: it holds no spend private key")
        return bytearray(described.spend_key32)
    text = _key_text(path, "--spend-key-file", SPEND_KEY_ENV, "spend key").strip()
    if not text:
        raise InvalidKeyError(f"no spend key: give it with {SPEND_SOURCES}")
    if len(text) != 64 or any(c not in string.hexdigits for c in text):
        raise InvalidKeyError("the spend key must be 64 hex digits (32 bytes)")
    key = bytearray.fromhex(text)
    try:
        crypto.scalar(key, "the spend key")
    except InvalidKeyError:
        key[:] = bytes(len(key))
        raise
    return key


def private_key(text: str, what: str) -> bytes:
    """A 32-byte secret key from 64 hex digits (whitespace around ignored); messages name it `what`, never its value.

    Raises:
        InvalidKeyError: not 64 hex digits, or 0 or >= n.
    """
    key = _hex(text, 32, what, "32 bytes")
    crypto.scalar(key, what)
    return key


def _hex(text: str, width: int, what: str, kind: str) -> bytes:
    text = text.strip()
    if len(text) != 2 * width or any(c not in string.hexdigits for c in text):
        raise InvalidKeyError(f"{what} must be {2 * width} hex digits ({kind})")
    return bytes.fromhex(text)


def read_descriptor(path: str, what: str = "--descriptor-file", base: Path | None = None) -> sp_descriptor.SPDescriptor:
    """Decode the sp() descriptor held in a file ("-" is stdin).

    Raises:
        DescriptorError: as `sp_scan.descriptor.decode`.
        click.UsageError, OSError: as `read_secret`.
    """
    return sp_descriptor.decode(read_secret(path, what, base=base))


def parse_pubkey(text: str, what: str) -> bytes:
    """Decode a 33-byte compressed public key from 66 hex digits; messages name it `what` (an option).

    Raises:
        InvalidKeyError: not 66 hex digits, or not a valid point (the value is not echoed).
    """
    key = _hex(text, 33, what, "a 33-byte compressed key")
    crypto.pubkey(key, what)
    return key


# ---- the node ------------------------------------------------------------------

NODE_OPTIONS = [
    click.option("--rest", "rest_url", metavar="URL", help="Fetch blocks from Core's REST interface, e.g. http://127.0.0.1:8332 (needs -rest; spenttxouts needs Core 30+)."),
    click.option("--rpc", "rpc_url", metavar="URL", help="Fetch blocks over JSON-RPC (getblock 0 and 3), e.g. http://127.0.0.1:8332."),
    click.option("--rpc-cookie", metavar="FILE", help="RPC auth from Core's .cookie file."),
    click.option("--rpc-user", metavar="USER[:PASS]", help=f"RPC auth; without :PASS the password is read from {RPC_PASSWORD_ENV}."),
]


def _apply(decorators, f):
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def node_options(f):
    """--rest, or --rpc with its auth options."""
    return _apply(NODE_OPTIONS, f)


BROADCAST_OPTIONS = [
    *NODE_OPTIONS[1:],
    click.option("--blindbit", "forward_url", metavar="URL", help="Broadcast through a BlindBit server's POST /forward-tx, e.g. http://127.0.0.1:8000."),
    click.option("--electrum", "electrum_url", metavar="URL", help="Broadcast through an Electrum server (blockchain.transaction.broadcast): tcp://HOST:PORT or ssl://HOST:PORT."),
]


def broadcast_options(f):
    """Where a transaction is broadcast: --rpc (sendrawtransaction) with its auth options, --blindbit or --electrum."""
    return _apply(BROADCAST_OPTIONS, f)


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


# ---- blocks, keys, networks ----------------------------------------------------------


def block_options(f):
    """Options shared by commands that read blocks."""
    return _apply([
        click.argument("blocks", metavar="BLOCK...", nargs=-1),
        click.option("--spent", metavar="FILE", help="Spent outputs of a single BLOCK: Core's /rest/spenttxouts .bin/.hex/.json, or getblock-3 JSON (format detected). Default: BLOCK's stem + .spent.hex/.spent.bin beside it."),
        *NODE_OPTIONS,
        click.option("--from", "start", type=click.IntRange(min=0), metavar="H", help="First height of a node range (restart from here)."),
        click.option("--to", "stop", type=click.IntRange(min=0), metavar="H", help="Last height of a node range (default: the node's tip)."),
        click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes; output stays in block order."),
        click.option("--json", "as_json", is_flag=True, help="Print JSON Lines."),
    ], f)  # fmt: skip


def key_options(f):
    """Options for the receiver's keys (the scan key never as an argument)."""
    return _apply([
        click.option("--scan-key-file", metavar="F", help=f"File holding the 64-hex scan key; - reads stdin. Else {SCAN_KEY_ENV}, else stdin."),
        click.option("--spend-pubkey", metavar="HEX", envvar=SPEND_PUBKEY_ENV, help=f"33-byte spend public key, hex (or {SPEND_PUBKEY_ENV})."),
        click.option("--label", "labels", metavar="M", multiple=True, type=click.IntRange(0, 2**32 - 1), help="A label m in use (repeat); the change label 0 is always scanned."),
    ], f)  # fmt: skip


descriptor_option = click.option(
    "--descriptor-file", metavar="F",
    help="The wallet as an sp() descriptor file (- reads stdin) instead of the key options: its keys, labels 1..ml, and --from bh for a range.",
)  # fmt: skip


def network_options(f):
    """--network and --hrp of the address commands."""
    names = sorted([*network.NETWORKS, *network.ALIASES])
    f = click.option("--hrp", type=click.Choice(network.HRPS), help="Address prefix.")(f)
    return click.option("--network", type=click.Choice(names), help="main -> sp; regtest -> sprt; other test networks -> tsp.")(f)


def hrp_of(network_name: str | None, hrp: str | None, default: str | None) -> str | None:
    """The address prefix --network and --hrp give (they must agree), else `default`."""
    implied = network.get(network_name).hrp if network_name else None
    if implied and hrp and implied != hrp:
        raise click.UsageError(f"--network {network_name} uses hrp {implied}, not {hrp}")
    return hrp or implied or default


def refuse_key_like(blocks: tuple[str, ...]) -> None:
    """A BLOCK argument that looks like a key, hash or descriptor and names no file: refuse it, unechoed."""
    for arg in blocks:
        if looks_like_key(arg):
            raise click.UsageError(
                "a BLOCK argument looks like a key, hash or descriptor and names no file (not shown): keys and "
                f"descriptors are never taken from arguments (the scan key comes from {SOURCES}; ranges use --from/--to)"
            )


# ---- the wallet ----------------------------------------------------------------------


@dataclass(frozen=True)
class ScanTarget:
    """A wallet to scan for (keys or a descriptor, not a wallet file).

    Attributes:
        receiver: makes the Receiver (reading the scan key then, so a bad argument never waits on stdin).
        birthday: the first height worth scanning, or None.
        family: network.MAIN or TEST for a descriptor, None for bare keys (which do not say).
    """

    receiver: Callable[[], Receiver]
    birthday: int | None = None
    family: str | None = None


def receiver_of_keys(scan_key_file: str | None, spend_pubkey: str | None, labels: tuple[int, ...]) -> Receiver:
    """The Receiver of the key options (reads the scan key)."""
    if not spend_pubkey:
        raise click.UsageError(f"scanning needs --spend-pubkey HEX (or {SPEND_PUBKEY_ENV})")
    spend33 = parse_pubkey(spend_pubkey, "--spend-pubkey")
    return Receiver(read_scan_key(scan_key_file), spend33, tuple(labels))


def key_options_typed(scan_key_file: str | None, labels: tuple[int, ...]) -> bool:
    """True when a key option was given on the command line (--spend-pubkey from its environment variable is not)."""
    typed_spend = click.get_current_context().get_parameter_source("spend_pubkey") is click.core.ParameterSource.COMMANDLINE
    return bool(scan_key_file or labels or typed_spend)


def wallet_of(scan_key_file, spend_pubkey, labels, descriptor_file) -> ScanTarget:
    """The wallet of the key options or of --descriptor-file (read here)."""
    if descriptor_file is None:
        return ScanTarget(functools.partial(receiver_of_keys, scan_key_file, spend_pubkey, labels))
    if key_options_typed(scan_key_file, labels):
        raise click.UsageError("give --descriptor-file or --scan-key-file/--spend-pubkey/--label, not both")
    wallet = read_descriptor(descriptor_file)
    return ScanTarget(wallet.receiver, wallet.birthday_height, wallet.network)


def check_network(family: str | None, chain: str, what: str) -> None:
    """Refuse a wallet of one network family scanned over a chain of the other.

    Raises:
        click.UsageError: family is set and is not the chain's.
    """
    if family is not None and network.get(chain).family != family:
        theirs = "mainnet" if family == network.MAIN else "the test networks"
        raise click.UsageError(f"{what} is for {theirs}, the index for {chain}")
