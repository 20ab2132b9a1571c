"""The --dask options of `index scan` and `serve`: the scheduler's address, TLS files, --insecure, Dask's log level.

`sp_scan.index.cluster` (and with it Dask) is imported only when --dask is given.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import click

DASK_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

DASK_OPTIONS = [
    click.option("--dask", "dask_address", metavar="URL", help="Scan on the Dask cluster whose scheduler is at tcp://HOST:PORT (this machine) or tls://HOST:PORT."),
    click.option("--dask-tls-ca", metavar="F", help="CA certificate (PEM) that signed the cluster's certificates."),
    click.option("--dask-tls-cert", metavar="F", help="This client's certificate (PEM), signed by that CA."),
    click.option("--dask-tls-key", metavar="F", help="The private key (PEM) of --dask-tls-cert."),
    click.option("--insecure", is_flag=True, help="Allow --dask tcp:// to another machine: the scan keys cross the network in the clear."),
    click.option("--dask-log-level", type=click.Choice(DASK_LOG_LEVELS), default="error", show_default=True, help="Show Dask's own log lines from this level on (a lost worker logs warnings; its tasks run again)."),
]  # fmt: skip


def dask_options(f):
    """The --dask options, passed to the command as dask_address, dask_tls_ca, dask_tls_cert, dask_tls_key, insecure, dask_log_level."""
    for decorator in reversed(DASK_OPTIONS):
        f = decorator(f)
    return f


class DaskLines(logging.Handler):
    """Dask's log records as one line each: `sp-scan: dask LEVEL: message` (no traceback), to `write` (default: stderr)."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.write = write or (lambda line: click.echo(line, err=True))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write(f"sp-scan: dask {record.levelname.lower()}: {' '.join(record.getMessage().split())}")
        except Exception:  # noqa: BLE001  (logging's contract: a failing handler reports, never raises)
            self.handleError(record)


def cluster_module(address: str | None, tls_files: tuple[str | None, ...], insecure: bool):
    """sp_scan.index.cluster when --dask is given (imported only then), its address checked; else None.

    Raises:
        click.UsageError: TLS files or --insecure without --dask, TLS files not all three or with tcp://,
            Dask not installed; SchedulerAddressError as `cluster.check_address`.
    """
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


@contextlib.contextmanager
def dask_client(cluster, address: str, tls_files: tuple[str | None, ...], insecure: bool, log_level: str, write: Callable[[str], None] | None = None) -> Iterator:
    """A client of the scheduler at `address` while the block runs, Dask's log lines from `log_level` on
    going to `write` as `DaskLines`.

    Raises:
        SchedulerAddressError, OSError: as `cluster.connect` and `cluster.security`.
    """
    tls = cluster.security(*tls_files) if tls_files[0] else None
    with cluster.dask_logs(DaskLines(write), getattr(logging, log_level.upper())), cluster.connect(address, tls=tls, insecure=insecure) as client:
        yield client
