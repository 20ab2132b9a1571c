"""Scanning an index on a Dask cluster: this process reads partitions, the workers scan them.

Only this module imports `distributed` (the `dist` extra, ``pip install 'sp-scan[dist]'``), and
sp_scan imports this module only where --dask is given (`index scan`, `serve`). Workers need sp-scan (same version) and nothing else:
each task carries its partition's packed buffers and the wallets, so no file is shared.

The wallets' scan keys travel inside every task (pickled `Receiver`s): the scheduler and each
worker hold them in memory while the scan runs, and anyone able to submit work to the cluster can
read a worker's memory. Hence `check_address`: plaintext only to a scheduler on this machine,
elsewhere TLS (mutual in Dask: the scheduler admits only peers whose certificate its CA signed)
unless the caller accepts the risk with `insecure`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import importlib.metadata
import ipaddress
import itertools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from urllib.parse import urlsplit

import distributed

from ..errors import ClusterError, SchedulerAddressError, SPError
from ..scan import Receiver
from ..types import IndexMatch
from .scan import DASK_PARTITION_BLOCKS, Partition, scan_partition_entries, scan_partition_wallets
from .tweak_index import Index

SCHEMES = ("tcp", "tls")
DOC_SECTION = ("docs/index.md", "Scanning on a cluster")
"""The page and section on clusters, TLS and worker commands, which messages point to."""
DASK_LOGGERS = ("distributed", "dask", "tornado", "bokeh")
"""The loggers (and their children) Dask writes to: `distributed` gives each its own stderr handler on import."""


def check_address(address: str, *, insecure: bool = False) -> str:
    """The scheduler address with its scheme, refused when plaintext would leave this machine.

    Args:
        address: tcp://HOST:PORT, tls://HOST:PORT or HOST:PORT (tcp); an IPv6 host in brackets.
        insecure: accept tcp:// to a host that is not loopback.

    Returns:
        The address with its scheme.

    Raises:
        SchedulerAddressError: another scheme, no host or port, or tcp:// to a host other than
            localhost or a loopback IP without `insecure`.
    """
    text = address.strip()
    if "://" not in text:
        text = "tcp://" + text
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in SCHEMES or not parts.hostname or port is None or parts.path or parts.query or parts.username:
        raise SchedulerAddressError(f"a scheduler address is tcp://HOST:PORT or tls://HOST:PORT, not {address!r}")
    if parts.scheme == "tcp" and not insecure and not _loopback(parts.hostname):
        raise SchedulerAddressError(
            f"{text}: the scan keys would cross the network unencrypted; use tls:// (see {DOC_SECTION[0]}: {DOC_SECTION[1]}) or --insecure"
        )
    return text


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost: it may resolve anywhere
        return False


@contextlib.contextmanager
def dask_logs(handler: logging.Handler, level: int) -> Iterator[None]:
    """While the block runs, Dask's own log records of at least `level` go to `handler`, and no others anywhere.

    `distributed` sends its records (INFO and up; on a worker loss, WARNINGs such as "Couldn't
    gather 1 keys, rescheduling") to stderr through handlers of its own; the caller chooses here.
    The loggers are put back as they were afterwards.
    """
    manager = logging.getLogger().manager
    names = [n for n in list(manager.loggerDict) if n.split(".")[0] in DASK_LOGGERS] + list(DASK_LOGGERS)
    loggers = {logging.getLogger(n) for n in names}
    saved = {lg: (lg.handlers[:], lg.level, lg.propagate) for lg in loggers}
    try:
        for lg in loggers:
            top = lg.name in DASK_LOGGERS
            lg.handlers = [handler] if top else []
            lg.setLevel(level if top else logging.NOTSET)
            lg.propagate = not top
        yield
    finally:
        for lg, (handlers, lvl, propagate) in saved.items():
            lg.handlers, lg.propagate = handlers, propagate
            lg.setLevel(lvl)


def security(ca_file: str, cert_file: str, key_file: str) -> distributed.Security:
    """TLS settings for a tls:// scheduler: the CA that signed the cluster's certificates, ours and its key.

    Raises:
        OSError: a file cannot be read.
    """
    for path in (ca_file, cert_file, key_file):
        with open(path, "rb"):
            pass
    return distributed.Security(tls_ca_file=ca_file, tls_client_cert=cert_file, tls_client_key=key_file, require_encryption=True)


def connect(address: str, *, tls: distributed.Security | None = None, insecure: bool = False, timeout: float = 10.0) -> distributed.Client:
    """A client of the scheduler at `address` (close it, or use it in `with`).

    Args:
        address: as `check_address` takes it.
        tls: for tls://; default: Dask's configuration (distributed.comm.tls.*).
        insecure: as `check_address`.
        timeout: seconds to wait for the scheduler.

    Raises:
        SchedulerAddressError: as `check_address`, or tls:// without certificates.
        OSError: the scheduler cannot be reached in time.
    """
    address = check_address(address, insecure=insecure)
    if address.startswith("tls://"):
        tls = tls or distributed.Security()
        if not (tls.tls_ca_file and tls.tls_client_cert):
            raise SchedulerAddressError(f"{address} needs a CA file, a certificate and its key (or distributed.comm.tls in the Dask configuration)")
    return distributed.Client(address, security=tls, timeout=timeout, set_as_default=False)


def check_workers(client: distributed.Client, timeout: float = 60.0) -> int:
    """Wait for a worker, check that every worker runs this sp-scan; return the cluster's worker threads.

    Raises:
        ClusterError: no worker within `timeout` seconds, or a worker without this version of sp-scan.
    """
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise ClusterError(f"no worker joined the scheduler within {timeout:g} s") from None
    ours = importlib.metadata.version("sp-scan")
    for worker, version in sorted(client.run(importlib.metadata.version, "sp-scan", on_error="return").items()):
        if isinstance(version, BaseException):
            raise ClusterError(f"worker {worker} cannot run sp-scan ({type(version).__name__}): install sp-scan there")
        if version != ours:
            raise ClusterError(f"worker {worker} runs sp-scan {version}, this is {ours}")
    return sum(client.nthreads().values())


def scan(
    client: distributed.Client,
    index: Index,
    receivers: Sequence[Receiver],
    start: int | None = None,
    end: int | None = None,
    *,
    starts: Sequence[int | None] | None = None,
    threads: int = 1,
    partition_blocks: int = DASK_PARTITION_BLOCKS,
    in_flight: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    mempool: bool = False,
) -> Iterator[tuple[int, IndexMatch]]:
    """`Index.scan_wallets` on a cluster: one task per partition, results in height order.

    Partitions are read here and shipped inside their tasks (no shared filesystem). A task whose
    worker is lost is run again on another (Dask allows each task `distributed.scheduler.allowed-failures`
    such losses); its results are taken once, so nothing is missing or repeated.

    Args:
        client: from `connect`.
        index: the index to scan (read in this process only).
        receivers, start, end, starts: as `Index.scan_wallets`.
        threads: native threads per task (workers usually run one task per core).
        partition_blocks: blocks per task.
        in_flight: most tasks submitted and not yet finished, which bounds the partitions held in
            memory by the scheduler and workers (default: twice the cluster's worker threads).
        progress: called with (first, last) height of each partition of blocks once its matches are yielded.
        mempool: then the mempool's matches (height None), its partition one more task (as `Index.partitions`).

    Returns:
        (wallet's position in receivers, match), in height, block, vout, then wallet order, as
        `Index.scan_wallets` yields them.

    Raises:
        HeightError: start..end is not inside the indexed heights.
        ClusterError: as `check_workers`, or a task lost with its workers too often or cancelled.
        SPError: a task's own error (e.g. InvalidKeyError for a damaged index).
    """
    partitions = index.partitions(start, end, partition_blocks, mempool=mempool)  # checks the heights before any worker is asked
    first = next(partitions, None)
    slots = check_workers(client)
    if first is None:
        return
    in_flight = max(1, in_flight or 2 * slots)
    run = uuid.uuid4().hex[:12]  # task keys name heights only, never anything derived from a key
    todo = enumerate(itertools.chain([first], partitions))
    ranges: dict[int, tuple[int, int, bool]] = {}
    submitted: dict[distributed.Future, int] = {}
    finished = distributed.as_completed(loop=client.loop)

    def submit_next() -> None:
        for i, (lo, hi, partition) in itertools.islice(todo, 1):
            name = "mempool" if partition.mempool else f"{lo}-{hi}"
            future = client.submit(scan_partition_wallets, partition, receivers, threads, starts, key=f"sp-scan-{run}-{name}", pure=False)
            ranges[i] = (lo, hi, partition.mempool)
            submitted[future] = i
            finished.add(future)

    for _ in range(in_flight):
        submit_next()
    results: dict[int, list[tuple[int, IndexMatch]]] = {}
    emitted = 0
    try:
        for future in finished:
            i = submitted.pop(future)
            results[i] = _result(future, ranges[i][:2])
            future.release()
            submit_next()
            while emitted in results:
                yield from results.pop(emitted)
                lo, hi, is_mempool = ranges.pop(emitted)
                if progress is not None and not is_mempool:
                    progress(lo, hi)
                emitted += 1
    finally:
        if submitted:
            client.cancel(list(submitted))


Outcome = Callable[[list | None, BaseException | None], None]
"""Called on a Dask thread with (`scan_partition_entries`'s result, None) or (None, the error)."""


class Pool:
    """A cluster for a server whose scans come and go: partitions sent one task at a time, each
    task's outcome handed to a callback, the cluster's size watched in the background.

    Args:
        client: from `connect` (the caller closes it after `close`).
        threads: native threads per task.
        refresh: seconds between looks at the cluster's workers.
    """

    def __init__(self, client: distributed.Client, threads: int = 1, refresh: float = 1.0) -> None:
        self.client, self.threads, self.address = client, threads, client.scheduler.address
        self.workers = self.worker_threads = 0
        self._run, self._serial = uuid.uuid4().hex[:12], itertools.count()
        self._side = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sp-scan-dask-cancel")
        self._closing = threading.Event()
        self._refresh()
        self._watcher = threading.Thread(target=self._watch, args=(refresh,), name="sp-scan-dask-workers", daemon=True)
        self._watcher.start()

    def submit(self, partition: Partition, receivers: Sequence[Receiver], starts: Sequence[int | None], done: Outcome) -> distributed.Future:
        """Scan `partition` for `receivers` (`scan_partition_entries`) on the cluster; `done` gets the outcome:
        the error is ClusterError when the task was lost with its workers too often or cancelled (the
        scheduler gone), else the task's own SPError.

        Raises:
            ClusterError: the task cannot be sent (the client is closed).
        """
        key = f"sp-scan-{self._run}-{next(self._serial)}-{partition.start}-{partition.end}"  # heights only, nothing derived from a key
        try:
            future = self.client.submit(scan_partition_entries, partition, list(receivers), self.threads, list(starts), key=key, pure=False)
        except Exception as exc:  # noqa: BLE001  (a closed client raises whatever its state gives)
            raise ClusterError(f"cannot send a task: {exc}") from None
        heights = (partition.start, partition.end)
        future.add_done_callback(lambda f: done(*_outcome(f, heights)))
        return future

    def cancel(self, futures: Sequence[distributed.Future]) -> None:
        """Cancel tasks without waiting (their callbacks still run: the caller ignores them)."""
        if futures and not self._closing.is_set():
            self._side.submit(_cancel_quietly, self.client, list(futures))

    def close(self) -> None:
        """Stop watching the cluster and drop what is not yet sent (without waiting for a scheduler that is gone)."""
        self._closing.set()
        self._side.shutdown(wait=False, cancel_futures=True)

    def _watch(self, every: float) -> None:
        while not self._closing.wait(every):
            self._refresh()

    def _refresh(self) -> None:
        try:
            if self.client.status != "running":  # reconnecting to a scheduler gone, or closed: none to ask
                raise ConnectionError
            info = self.client.scheduler_info(n_workers=0)
            self.workers, self.worker_threads = info.get("n_workers", 0), info.get("total_threads", 0)
        except Exception:  # noqa: BLE001  (a scheduler gone: no workers)
            self.workers = self.worker_threads = 0


def _cancel_quietly(client: distributed.Client, futures: list[distributed.Future]) -> None:
    with contextlib.suppress(Exception):
        client.cancel(futures)


def _outcome(future: distributed.Future, heights: tuple[int, int]) -> tuple[list | None, BaseException | None]:
    try:
        return _result(future, heights), None
    except (ClusterError, SPError) as exc:
        return None, exc
    except Exception as exc:  # noqa: BLE001  (a comm error while gathering: the cluster is failing)
        return None, ClusterError(f"heights {heights[0]}..{heights[1]}: {type(exc).__name__}: {exc}")


def _result(future: distributed.Future, heights: tuple[int, int]) -> list[tuple[int, IndexMatch]]:
    try:
        return future.result()
    except distributed.KilledWorker:
        raise ClusterError(f"heights {heights[0]}..{heights[1]}: the task was lost with each worker that ran it") from None
    except concurrent.futures.CancelledError:
        raise ClusterError(f"heights {heights[0]}..{heights[1]}: the task was cancelled (scheduler restarted or gone?)") from None
