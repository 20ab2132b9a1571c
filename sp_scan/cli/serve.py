"""`sp-scan serve`: the BlindBit Oracle v1 HTTP API over an index, optionally syncing it from a node.

The server (aiohttp) is imported by the command itself: the other commands start without it.
"""

from __future__ import annotations

import asyncio
import os

import click

from .electrum import electrum_listeners, electrum_options
from .options import RPC_PASSWORD_ENV, node_client, node_options, rpc_credentials


def _sync_args(rest_url, rpc_url, rpc_cookie, rpc_user, interval, zmq_url=None) -> tuple[list[str], dict[str, str]]:
    """The node options for the sync child (which keeps the mempool too), and its environment (an RPC
    password goes there, not on argv)."""
    env = dict(os.environ)
    if rest_url:
        args = ["--rest", rest_url]
    else:
        args = ["--rpc", rpc_url]
        if rpc_cookie:
            args += ["--rpc-cookie", rpc_cookie]
        if rpc_user:
            user, env[RPC_PASSWORD_ENV] = rpc_credentials(rpc_user)
            args += ["--rpc-user", user]
    return [*args, "--interval", str(interval), "--mempool", *(["--zmq", zmq_url] if zmq_url else [])], env


@click.command("serve", help="""Serve the index to light-client wallets (spdk, Dana): the BlindBit Oracle v1 HTTP API.

\b
sp-scan serve --db tweaks.db                                  # serve what is indexed
sp-scan serve --db tweaks.db --rest http://127.0.0.1:8332     # and keep it in step with the node

Routes: /info, /block-height, /block-hash/H, /tweak-index/H?dustLimit=N, /tweaks/H?dustLimit=N,
/filter/new-utxos/H, /filter/spent/H, /utxos/H, /spent-index/H. With --rest/--rpc an
`sp-scan index sync --follow --mempool` runs beside the server (creating the index if needed), so the
index file also holds the node's mempool (for `index scan --mempool` and the library; these routes stay
block-only). With --electrum-port, an Electrum server for Sparrow and Cake Wallet listens too, its
subscriptions told of mempool payments (see README). Ctrl-C or SIGTERM stops both.""")
@click.option("--db", required=True, metavar="PATH", help="The index file.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to listen on (0: any free port).")
@node_options
@click.option("--interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True, metavar="S", help="Seconds between the sync's polls of the node.")
@click.option("--zmq", "zmq_url", metavar="URL", help="Core's -zmqpubsequence endpoint: the sync learns of mempool changes at once.")
@electrum_options
def serve_command(db, host, port, rest_url, rpc_url, rpc_cookie, rpc_user, interval, zmq_url, **electrum):
    from sp_scan.server import Server, SyncChild, serve, sync_command

    node = node_client(rest_url, rpc_url, rpc_cookie, rpc_user)  # checks the options before anything starts
    if zmq_url and node is None:
        raise click.UsageError("--zmq goes with --rest or --rpc")
    listeners = electrum_listeners(db, **electrum)
    sync = None
    if node is not None:
        args, env = _sync_args(rest_url, rpc_url, rpc_cookie, rpc_user, interval, zmq_url)
        sync = SyncChild(sync_command(db, args), env, log=_log)
    asyncio.run(serve(Server(db, host, port), sync, log=_log, listeners=listeners))


def _log(line: str) -> None:
    click.echo(line, err=True)
