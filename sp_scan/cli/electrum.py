"""`sp-scan serve`'s Electrum options (--electrum-*): Sparrow's and Cake's server beside the BlindBit API.

Connections and requests of Electrum clients are held to serve's --max-connections, --per-ip-*
and --write-timeout like those of the other listeners; `--electrum-limit` sets the caps only this
listener has.
"""

from __future__ import annotations

import os

import click

LIMIT_NAMES = {
    "labels": ("max_labels", "labels per silent-payments subscription (default 10)"),
    "subscriptions": ("max_subscriptions", "silent-payments subscriptions per connection (default 100)"),
    "subscriptions-per-ip": ("max_subscriptions_per_ip", "subscriptions, scripthash ones included, per IPv4 address or IPv6 /64 (default 1000; --per-ip-exempt networks exempt)"),
    "subscriptions-total": ("max_subscriptions_total", "subscriptions of every client together (default 100000)"),
    "idle-timeout": ("idle_timeout", "seconds a connection may send nothing before it is closed (default 600)"),
    "in-flight": ("max_in_flight", "requests of one connection unanswered before its next line is read (default 20)"),
    "unsent-bytes": ("max_unsent", "bytes waiting for one connection's socket before its next line is read or answer built (default 1048576)"),
}  # fmt: skip
SHARED = {"connections": "--max-connections", "connections-per-ip": "--per-ip-connections"}
"""Caps the Electrum listener had of its own, now serve's for every listener."""


def _limit(ctx, param, values) -> dict[str, int]:
    limits = {}
    for value in values:
        name, sep, number = value.partition("=")
        if name in SHARED:
            raise click.BadParameter(f"{value!r}: every listener's connections count together now: use {SHARED[name]}")
        if not sep or name not in LIMIT_NAMES or not number.isdigit() or int(number) < 1:
            raise click.BadParameter(f"{value!r}: NAME=N with N >= 1 and NAME one of {', '.join(LIMIT_NAMES)}")
        limits[LIMIT_NAMES[name][0]] = int(number)
    return limits


ELECTRUM_OPTIONS = [
    click.option("--electrum-port", type=click.IntRange(0, 65535), default=None, metavar="N", help="Also serve the Electrum protocol (Sparrow's and Cake's silent-payments methods) on this port (0: any free port)."),
    click.option("--electrum-host", default="127.0.0.1", show_default=True, help="Address the Electrum listener binds."),
    click.option("--electrum-backend", metavar="URL", help="tcp://HOST:PORT or ssl://HOST:PORT of the Electrum server (electrs, Fulcrum, ElectrumX) that answers every other method."),
    click.option("--electrum-tls-cert", type=click.Path(exists=True, dir_okay=False), metavar="FILE", help="PEM certificate (chain): the Electrum listener speaks TLS (with --electrum-tls-key)."),
    click.option("--electrum-tls-key", type=click.Path(exists=True, dir_okay=False), metavar="FILE", help="PEM private key of --electrum-tls-cert."),
    click.option("--electrum-threads", type=click.IntRange(min=1), default=None, metavar="N", help="Native threads per subscription scan [default: the CPUs]."),
    click.option("--electrum-limit", "electrum_limits", multiple=True, callback=_limit, metavar="NAME=N", help="Change a cap of the Electrum listener's own (connections and requests: the --max-connections and --per-ip-* options): " + "; ".join(f"{k}: {v[1]}" for k, v in LIMIT_NAMES.items()) + "."),
]  # fmt: skip


def electrum_options(f):
    """The --electrum-* options, passed to the command as keyword arguments."""
    for decorator in reversed(ELECTRUM_OPTIONS):
        f = decorator(f)
    return f


def electrum_listener(db, electrum_port, electrum_host, electrum_backend, electrum_tls_cert, electrum_tls_key, electrum_threads, electrum_limits, cluster=None):
    """The Electrum listener the options ask for (an `ElectrumServer`, not started), None without --electrum-port;
    `cluster` (a `sp_scan.index.cluster.Pool`) scans its subscriptions' histories.

    Raises:
        click.UsageError: a TLS file without the other, options without --electrum-port, a malformed
            backend URL, aiorpcx not installed.
    """
    if (electrum_tls_cert is None) != (electrum_tls_key is None):
        raise click.UsageError("--electrum-tls-cert and --electrum-tls-key go together")
    if electrum_port is None:
        if electrum_backend or electrum_tls_cert or electrum_limits:
            raise click.UsageError("the --electrum-* options need --electrum-port")
        return None
    try:
        from sp_scan.server.electrum import ElectrumLimits, ElectrumServer
    except ImportError as exc:
        if exc.name != "aiorpcx":
            raise
        raise click.UsageError("--electrum-port needs aiorpcx: pip install 'sp-scan[serve]'") from None

    tls = (electrum_tls_cert, electrum_tls_key) if electrum_tls_cert else None
    try:
        return ElectrumServer(db, electrum_host, electrum_port, electrum_backend, tls, ElectrumLimits(**electrum_limits), electrum_threads or os.cpu_count() or 1, cluster=cluster)
    except ValueError as exc:
        raise click.UsageError(f"--electrum-backend: {exc}") from None
