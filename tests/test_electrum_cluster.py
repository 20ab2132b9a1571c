"""The Electrum listener's subscription passes on a real Dask cluster (`sp-scan serve --dask`).

Clusters: a `LocalCluster` of two single-threaded worker processes on 127.0.0.1, and `dask scheduler`
+ `dask worker` processes. Every history must equal what the sender recorded (which the local pass
reports: tests/test_electrum.py), with workers and the scheduler killed mid-pass; kills are made
while the scan thread is inside a task's submission, so the pass cannot end before them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import distributed
import pytest
from coincurve import PrivateKey

from electrum_support import ElectrumThread, free_port
from index_support import wait_until
from sp_scan.index import cluster
from test_electrum import SP, check_history, expected, flat, keys, negotiated
from test_index_cluster import certificates  # noqa: F401  (a fixture)

LABELS = [1, 7]


def local_cluster() -> distributed.LocalCluster:
    return distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0")


@pytest.fixture(scope="module")
def pool():
    """A Pool on a LocalCluster shared by the tests that harm none of its workers."""
    with local_cluster() as c, distributed.Client(c, set_as_default=False) as client:
        p = cluster.Pool(client)
        yield p
        p.close()


def subscribe(port: int, start=0) -> list[dict]:
    """One subscription's history notifications up to progress 1.0 (checked against Frigate's rules)."""
    with negotiated(port) as c:
        reply = c.result(SP, [*keys(), start, LABELS])
        notes = c.history()
        check_history(notes, reply)
        return notes


def test_a_subscription_scanned_on_the_cluster_gets_the_history_of_the_local_pass(kernel_index, kernel_chain, pool):
    with ElectrumThread(kernel_index, cluster=pool, partition_blocks=7) as server:
        notes = subscribe(server.port)
        ranged = subscribe(server.port, "100-105")
        status = server.server.state.scans.cluster_status()
    assert flat(notes) == expected(kernel_chain)
    assert flat(ranged) == expected(kernel_chain, start=100, end=105)
    assert status["partitions_done"] >= 16 and status["workers"] == 2 and not status["fell_back"]


def test_50_subscriptions_at_once_each_get_their_history_in_shared_tasks(kernel_index, kernel_chain, pool):
    want = expected(kernel_chain)
    others = [PrivateKey() for _ in range(25)]  # half the subscribers are other wallets: they find nothing
    results: list = [None] * 50
    barrier = threading.Barrier(50)

    def run(i: int) -> None:
        with negotiated(server.port) as c:
            barrier.wait()
            params = [*keys(), 0, LABELS] if i % 2 == 0 else [others[i // 2].secret.hex(), others[i // 2].public_key.format().hex(), 0, []]
            reply = c.result(SP, params)
            notes = c.history()
            check_history(notes, reply)
            results[i] = flat(notes)

    with ElectrumThread(kernel_index, cluster=pool, partition_blocks=10) as server:
        before = server.server.state.scans.cluster_status()["partitions_done"]
        threads = [threading.Thread(target=run, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        tasks = server.server.state.scans.cluster_status()["partitions_done"] - before
    assert results[0::2] == [want] * 25 and results[1::2] == [[]] * 25
    assert tasks < 50 * 12 // 2  # several subscribers per task: far fewer tasks than subscribers × partitions


def test_a_subscriber_that_disconnects_cancels_its_tasks(kernel_index, pool):
    client = pool.client
    gate = distributed.Event(f"gate-{os.getpid()}", client=client)
    blockers = [client.submit(gate.wait, key=f"blocker-{i}", pure=False) for i in range(2)]  # both workers busy: no task of the pass ends
    wait_until(lambda: sum(len(k) for k in client.processing().values()) == 2, what="both workers blocked")
    sent: list = []
    original = pool.submit

    def submit(*args):
        sent.append(original(*args))
        return sent[-1]

    pool.submit = submit
    try:
        with ElectrumThread(kernel_index, cluster=pool, partition_blocks=1) as server:
            scans = server.server.state.scans
            with negotiated(server.port) as c:
                c.result(SP, [*keys(), 0, LABELS])
                wait_until(lambda: len(sent) >= 4, what="the first tasks sent")
            wait_until(lambda: scans.watch_count == 0 and scans.cluster_status()["tasks_in_flight"] == 0, what="the watch dropped")
            wait_until(lambda: all(f.status == "cancelled" for f in sent), what="its tasks cancelled")
            assert scans.cluster_status()["partitions_done"] == 0 and len(sent) == 4
    finally:
        del pool.submit
        gate.set()
        client.gather(blockers)


def kill_when(pool: cluster.Pool, nth: int, kill) -> list:
    """Make the pool's `nth` submission call `kill()` first (on the scan thread, which waits meanwhile)."""
    calls, original = [], pool.submit

    def submit(*args):
        calls.append(None)
        if len(calls) == nth:
            kill()
        return original(*args)

    pool.submit = submit
    return calls


def test_a_worker_killed_mid_pass_has_its_tasks_run_again_and_every_history_is_whole(kernel_index, kernel_chain):
    killed: list = []
    with local_cluster() as c, distributed.Client(c, set_as_default=False) as client:
        pids = client.run(os.getpid)
        pool = cluster.Pool(client)
        gate = distributed.Event(f"gate-{os.getpid()}", client=client)
        original, calls = pool.submit, []

        def submit_then_kill_its_worker(*args):
            """At the pass's 6th task: both workers blocked, the task sent, the worker it waits on killed, then unblocked."""
            calls.append(None)
            if len(calls) != 6:
                return original(*args)
            blockers = [client.submit(gate.wait, key=f"blocker-{w}", workers=[w], allow_other_workers=True, pure=False) for w in pids]
            wait_until(lambda: all(any(k.startswith("blocker") for k in keys) for keys in client.processing().values()), what="both workers blocked")
            future = original(*args)
            held: dict = {}
            wait_until(lambda: held.update({w: keys for w, keys in client.processing().items() if future.key in keys}) or held, what="the task on a worker")
            victim = next(iter(held))
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(future.key)
            wait_until(lambda: victim not in client.scheduler_info()["workers"], what="the scheduler saw the worker lost")
            gate.set()
            del blockers
            return future

        pool.submit = submit_then_kill_its_worker
        try:
            with ElectrumThread(kernel_index, cluster=pool, partition_blocks=2) as server:
                notes = [subscribe(server.port) for _ in range(2)]
                status = server.server.state.scans.cluster_status()
            story = client.story(killed[0])
        finally:
            pool.close()
    assert [flat(n) for n in notes] == [expected(kernel_chain)] * 2
    assert killed and not status["fell_back"]
    # The scheduler ran the task again on the other worker.
    assert sum(1 for s in story if s[0] == "scheduler" and s[3] == "processing") >= 2, story


class DaskProcesses:
    """`dask scheduler` and one `dask worker` (one thread) as child processes on 127.0.0.1."""

    def __init__(self, tmp: Path) -> None:
        dask = str(Path(sys.executable).parent / "dask")
        self.address = f"tcp://127.0.0.1:{free_port()}"
        port = self.address.rsplit(":", 1)[1]
        common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True, "cwd": tmp}
        self.scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", port, "--dashboard-address", "127.0.0.1:0"], **common)
        for line in self.scheduler.stderr:
            if "Scheduler at:" in line:
                break
        else:
            raise AssertionError("dask scheduler exited before it listened")
        threading.Thread(target=self.scheduler.stderr.read, daemon=True).start()
        self.worker = subprocess.Popen([dask, "worker", self.address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"], **common)
        threading.Thread(target=self.worker.stderr.read, daemon=True).start()

    def close(self) -> None:
        for p in (self.worker, self.scheduler):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_the_scheduler_killed_mid_pass_falls_back_to_local_cores_with_one_log_line_and_no_lost_or_repeated_entry(kernel_index, kernel_chain, tmp_path, caplog):
    procs = DaskProcesses(tmp_path)
    try:
        client = cluster.connect(procs.address)
        cluster.check_workers(client)
        pool = cluster.Pool(client)
        with ElectrumThread(kernel_index, cluster=pool, partition_blocks=2) as server:
            before = subscribe(server.port)  # the whole pass on the cluster
            scans = server.server.state.scans
            assert scans.cluster_status()["partitions_done"] >= 56 and not scans.fell_back

            def kill_the_scheduler() -> None:
                procs.scheduler.kill()
                procs.scheduler.wait()

            kill_when(pool, 8, kill_the_scheduler)
            with caplog.at_level(logging.WARNING, logger="sp_scan.server.electrum"):
                after = [subscribe(server.port) for _ in range(2)]  # the first sees the kill, the second starts after it
            status = scans.cluster_status()
        pool.close()
        client.close(timeout=5)
    finally:
        procs.close()
    assert [flat(n) for n in [before, *after]] == [expected(kernel_chain)] * 3
    assert status["fell_back"]
    lines = [r.getMessage() for r in caplog.records if "Dask cluster" in r.getMessage()]
    assert len(lines) == 1 and "scanning on this machine" in lines[0], lines


def test_sp_scan_serve_dask_scans_the_subscriptions_on_dask_processes_and_shows_the_cluster_in_status_and_metrics(kernel_index, kernel_chain, tmp_path):
    procs = DaskProcesses(tmp_path)
    serve = None
    try:
        serve = subprocess.Popen(
            [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--electrum-port", "0",
             "--status-port", "0", "--dask", procs.address],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        port = int(re.search(r"tcp://127\.0\.0\.1:(\d+) \(electrum\)", serve.stderr.readline()).group(1))
        status_url = re.search(r"status (http://\S+)", serve.stderr.readline()).group(1).rstrip("/")
        notes = subscribe(port)
        status = json.loads(urllib.request.urlopen(f"{status_url}/status", timeout=30).read())["cluster"]
        metrics = urllib.request.urlopen(f"{status_url}/metrics", timeout=30).read().decode()
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            _, err = serve.communicate(timeout=60)
        procs.close()
    assert flat(notes) == expected(kernel_chain)
    assert serve.returncode == 0, err
    assert status["scheduler"] == procs.address and status["workers"] == 1 and status["partitions_done"] == 6 and not status["fell_back"]
    assert "sp_scan_dask_workers 1.0" in metrics and "sp_scan_dask_partitions_total 6.0" in metrics and "sp_scan_dask_tasks_in_flight 0.0" in metrics


def test_sp_scan_serve_dask_speaks_tls_to_a_tls_scheduler_with_the_given_certificates(kernel_index, kernel_chain, certificates):
    ca, cert, key = certificates["ca"], certificates["cert"], certificates["key"]
    security = distributed.Security(
        tls_ca_file=ca, tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key,
        tls_client_cert=cert, tls_client_key=key, require_encryption=True,
    )  # fmt: skip
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                  protocol="tls://", security=security) as c:  # fmt: skip
        serve = subprocess.Popen(
            [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--electrum-port", "0",
             "--dask", c.scheduler_address, "--dask-tls-ca", ca, "--dask-tls-cert", cert, "--dask-tls-key", key],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            port = int(re.search(r"tcp://127\.0\.0\.1:(\d+) \(electrum\)", serve.stderr.readline()).group(1))
            notes = subscribe(port)
        finally:
            serve.send_signal(signal.SIGTERM)
            _, err = serve.communicate(timeout=60)
    assert c.scheduler_address.startswith("tls://127.0.0.1:")
    assert flat(notes) == expected(kernel_chain) and serve.returncode == 0, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dask", "tcp://127.0.0.1:1"], "it goes with --electrum-port"),
        (["--electrum-port", "0", "--dask", "tcp://192.0.2.7:8786"], "the scan keys would cross the network unencrypted"),
        (["--electrum-port", "0", "--dask", "tcp://127.0.0.1:1", "--dask-tls-ca", "ca.pem"], "together"),
        (["--electrum-port", "0", "--insecure"], "go with --dask"),
    ],
    ids=["no-electrum", "plaintext-remote", "tls-files", "insecure-alone"],
)
def test_bad_dask_options_of_serve_are_one_line_and_exit_2(kernel_index, args, message):
    from click.testing import CliRunner

    from sp_scan.cli import app

    result = CliRunner().invoke(app, ["serve", "--db", str(kernel_index), *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_cluster_left_without_workers_mid_pass_is_left_for_local_cores(kernel_index, kernel_chain, tmp_path, caplog, monkeypatch):
    from sp_scan.server.electrum import passes

    monkeypatch.setattr(passes, "LOST_AFTER", 0.0)  # fall back at the first turn that sees no worker
    procs = DaskProcesses(tmp_path)
    try:
        client = cluster.connect(procs.address)
        cluster.check_workers(client)
        pool = cluster.Pool(client, refresh=0.05)

        def kill_the_only_worker() -> None:
            procs.worker.kill()
            procs.worker.wait()

        kill_when(pool, 4, kill_the_only_worker)
        with caplog.at_level(logging.WARNING, logger="sp_scan.server.electrum"), ElectrumThread(kernel_index, cluster=pool, partition_blocks=2) as server:
            notes = subscribe(server.port)
            status = server.server.state.scans.cluster_status()
        pool.close()
        client.close(timeout=5)
    finally:
        procs.close()
    assert flat(notes) == expected(kernel_chain)
    assert status["fell_back"] and status["workers"] == 0
    lines = [r.getMessage() for r in caplog.records if "Dask cluster" in r.getMessage()]
    assert len(lines) == 1 and "no worker for 0 s" in lines[0], lines


def test_a_scheduler_gone_while_no_pass_runs_leaves_the_next_subscription_to_local_cores(kernel_index, kernel_chain, tmp_path, caplog, monkeypatch):
    from sp_scan.server.electrum import passes

    monkeypatch.setattr(passes, "LOST_AFTER", 0.0)  # a client reconnecting counts as no worker: fall back at once
    procs = DaskProcesses(tmp_path)
    try:
        client = cluster.connect(procs.address)
        cluster.check_workers(client)
        pool = cluster.Pool(client, refresh=0.05)
        with ElectrumThread(kernel_index, cluster=pool, partition_blocks=2) as server:
            procs.scheduler.kill()
            procs.scheduler.wait()
            with caplog.at_level(logging.WARNING, logger="sp_scan.server.electrum"):
                notes = subscribe(server.port)
            status = server.server.state.scans.cluster_status()
        pool.close()
        client.close(timeout=5)
    finally:
        procs.close()
    assert flat(notes) == expected(kernel_chain)
    assert status["fell_back"] and status["workers"] == 0
    assert len([r for r in caplog.records if "Dask cluster" in r.getMessage()]) == 1
