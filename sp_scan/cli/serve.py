"""`sp-scan serve`: the BlindBit Oracle v1 HTTP API over an index, optionally syncing it from a node.

The server is imported by the command itself: the other commands start without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import click

from .cluster import cluster_module, dask_client, dask_options
from .electrum import electrum_listener, electrum_options
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


_LIMIT_OPTIONS = [
    ("--max-connections", "max_connections", int, "Open client connections in all, every listener's (kept below the open-files limit, raised to its hard limit at start)."),
    ("--per-ip-connections", "per_ip_connections", int, "Open connections per client address (IPv6: per /64), over every listener; 0: no limit."),
    ("--per-ip-rate", "per_ip_rate", float, "Requests per second per client address (IPv6: per /64), HTTP requests, gRPC and Electrum calls together; beyond it: 429, RESOURCE_EXHAUSTED, JSON-RPC error -101; 0: no limit."),
    ("--per-ip-burst", "per_ip_burst", int, "Requests a client address may send at once after a quiet time."),
    ("--per-ip-exempt", "per_ip_exempt", tuple, "Client networks (comma-separated CIDRs) held to --max-connections only, not to any per-address limit: a reverse proxy or Tor on this machine; 'none' for none."),
    ("--header-timeout", "header_timeout", float, "Seconds a client has to send an HTTP request, or an Electrum JSON-RPC line, once it started one."),
    ("--idle-timeout", "idle_timeout", float, "Seconds an HTTP or gRPC connection may stay open with no request."),
    ("--write-timeout", "write_timeout", float, "Seconds an answer may wait unread before the connection is dropped (every listener)."),
]


def _networks(ctx, param, value: str) -> tuple[str, ...]:
    from sp_scan.server.limits import exempt_networks

    texts = () if value.strip().lower() == "none" else tuple(t.strip() for t in value.split(",") if t.strip())
    try:
        exempt_networks(texts)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return texts


def limit_options(command):
    """The `Limits` fields as options (defaults from `Limits`), passed to the command as `limits`."""
    from sp_scan.server.limits import Limits

    defaults = Limits()
    for flag, name, kind, text in reversed(_LIMIT_OPTIONS):
        default = getattr(defaults, name)
        if kind is tuple:
            option = click.option(flag, name, default=",".join(default), show_default=True, metavar="NETS", callback=_networks, help=text)
        else:
            kind = click.IntRange(min=0) if kind is int else click.FloatRange(min=0.01 if name.endswith("timeout") else 0)
            option = click.option(flag, name, type=kind, default=default, show_default=True, help=text)
        command = option(command)
    return command


@click.command("serve", help="""Serve the index to light-client wallets (spdk, Dana, BlindBit Desktop): BlindBit Oracle v1 HTTP, v2 gRPC.

\b
sp-scan serve --db tweaks.db                                  # serve what is indexed
sp-scan serve --db tweaks.db --rest http://127.0.0.1:8332     # and keep it in step with the node
sp-scan serve --db tweaks.db --rpc http://127.0.0.1:8332 --rpc-cookie ~/.bitcoin/.cookie --grpc-port 50051 --status-port 9100

Routes: /info, /block-height, /block-hash/H, /tweak-index/H?dustLimit=N, /tweaks/H?dustLimit=N,
/filter/new-utxos/H, /filter/spent/H, /utxos/H, /spent-index/H, and POST /forward-tx (relayed
with sendrawtransaction when --rpc is given). With --rest/--rpc an `sp-scan index sync --follow
--mempool` runs beside the server (creating the index if needed), so the index file also holds the
node's mempool (for `index scan --mempool` and the library; these routes stay block-only). With
--electrum-port, an Electrum server for Sparrow and Cake Wallet listens too, its subscriptions told
of mempool payments (see docs/serving.md). The HTTP, gRPC and Electrum listeners share one set of limits:
a client address's connections and requests count together over all three (--max-connections,
--per-ip-*, --write-timeout), clients of --per-ip-exempt networks only toward --max-connections.
--status-port serves GET /status and /metrics on 127.0.0.1 only. Ctrl-C or SIGTERM stops everything.

With --dask (and --electrum-port), the subscriptions' history scans run on a Dask cluster, one task per
20 blocks for every subscription waiting for them, results in height order as without it; a cluster that
fails is left for this machine's cores with one log line (see docs/serving.md). The scan keys travel to
the workers: tls:// unless the scheduler is on this machine, as for `index scan --dask`.""")
@click.option("--db", required=True, metavar="PATH", help="The index file.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to listen on (0: any free port).")
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=None, help="Also serve BlindBit Oracle v2 gRPC on this port (needs the serve extra).")
@click.option("--status-port", type=click.IntRange(0, 65535), default=None, help="Serve GET /status and /metrics on 127.0.0.1 at this port.")
@click.option("--access-log", metavar="FILE|-", default=None, help="Append a line per request to FILE (- : stderr). Off by default.")
@click.option("--cache-mb", type=click.IntRange(min=0), default=256, show_default=True, help="Megabytes of built answers kept in memory.")
@limit_options
@node_options
@click.option("--interval", type=click.FloatRange(min=0.05), default=10.0, show_default=True, metavar="S", help="Seconds between the sync's polls of the node.")
@click.option("--zmq", "zmq_url", metavar="URL", help="Core's -zmqpubsequence endpoint: the sync learns of mempool changes at once.")
@electrum_options
@dask_options
def serve_command(db, host, port, grpc_port, status_port, access_log, cache_mb, rest_url, rpc_url, rpc_cookie, rpc_user, interval, zmq_url, dask_address, dask_tls_ca, dask_tls_cert, dask_tls_key, insecure, dask_log_level, **options):
    from sp_scan.node import RpcNode

    try:
        from sp_scan.server import Limits, Server, SyncChild, serve, sync_command
    except ImportError as exc:
        if exc.name != "httptools":
            raise
        raise click.UsageError("serve needs httptools: pip install 'sp-scan[serve]'") from None

    node = node_client(rest_url, rpc_url, rpc_cookie, rpc_user)  # checks the options before anything starts
    if zmq_url and node is None:
        raise click.UsageError("--zmq goes with --rest or --rpc")
    tls_files = (dask_tls_ca, dask_tls_cert, dask_tls_key)
    cluster = cluster_module(dask_address, tls_files, insecure)
    if cluster is not None and options["electrum_port"] is None:
        raise click.UsageError("--dask scans the Electrum subscriptions: it goes with --electrum-port")
    with contextlib.ExitStack() as stack:
        pool = None
        if cluster is not None:
            client = stack.enter_context(dask_client(cluster, dask_address, tls_files, insecure, dask_log_level, _log))
            cluster.check_workers(client)
            pool = cluster.Pool(client)
            stack.callback(pool.close)
        electrum = electrum_listener(db, **{k: v for k, v in options.items() if k.startswith("electrum")}, cluster=pool)
        sync = None
        if node is not None:
            args, env = _sync_args(rest_url, rpc_url, rpc_cookie, rpc_user, interval, zmq_url)
            sync = SyncChild(sync_command(db, args), env, log=_log)
        limit_values = {name: options.pop(name) for _, name, _, _ in _LIMIT_OPTIONS}
        server = Server(
            db, host, port, limits=Limits(**limit_values), cache_bytes=cache_mb * 2**20, relay=node if isinstance(node, RpcNode) else None,
            node=node, grpc_port=grpc_port, status_port=status_port, electrum=electrum, access_log=access_log, log=_log,
        )  # fmt: skip
        asyncio.run(serve(server, sync, log=_log))


def _log(line: str) -> None:
    click.echo(line, err=True)
