"""Scanning the tweak index on a real Dask cluster: a scheduler and two worker processes on 127.0.0.1.

The index is synced by the real sync from the kernel-validated sample chain; a `--dask` scan must print
exactly what the local scan prints, which is what the sender side recorded.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import distributed
import pytest

import index_support
import kernelchain as kc
import sp_scan.cli.index
from cli_support import ROOT
from sp_scan.cli.output import index_match_record
from sp_scan.errors import ClusterError, SchedulerAddressError
from sp_scan.index import Index, cluster
from sp_scan.scan import Receiver
from test_cli import assert_fails, invoke, json_lines
from test_index_wallets import WALLETS, expected_rows, write_wallets

KEY_ARGS = ["--spend-pubkey", kc.TEST_WALLET.spend_pubkey33.hex(), "--label", "1", "--label", "7"]


def local_cluster(**options) -> distributed.LocalCluster:
    """A scheduler and two single-threaded worker processes on 127.0.0.1 (about a second to start)."""
    return distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0", **options
    )


@pytest.fixture(scope="module")
def scheduler():
    """The address of a local cluster shared by this module's tests (none of which harms its workers)."""
    with local_cluster() as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def wallets(tmp_path_factory) -> Path:
    return write_wallets(tmp_path_factory.mktemp("cluster-wallets"))


def scan(db: Path, *args: str) -> str:
    result = invoke("index", "scan", "--db", str(db), "--json", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_dask_scan_of_many_wallets_prints_what_the_local_scan_prints(kernel_chain, kernel_index, scheduler, wallets):
    local = scan(kernel_index, "--wallets", str(wallets))
    assert json_lines(local) == expected_rows(kernel_chain)
    for blocks in ("1", "7"):
        assert scan(kernel_index, "--wallets", str(wallets), "--dask", scheduler, "--partition-blocks", blocks) == local


def test_a_dask_scan_of_one_wallet_with_labels_prints_what_the_local_scan_prints(kernel_chain, kernel_index, scheduler, wallets):
    key = str(wallets.parent / "keys" / "wallet.scan")
    local = scan(kernel_index, "--scan-key-file", key, *KEY_ARGS, "--from", "101")
    assert json_lines(local) == [f.to_json() for f in kernel_chain.found(start=101)]
    assert {r["label"] for r in json_lines(local)} == {None, 0, 1, 7}
    assert scan(kernel_index, "--scan-key-file", key, *KEY_ARGS, "--from", "101", "--dask", scheduler, "--partition-blocks", "3") == local


def test_a_worker_killed_mid_scan_has_its_partitions_run_again_with_nothing_missing_or_repeated(kernel_chain, kernel_index):
    real = [(w.receiver() if start == 0 else Receiver(w.scan_key32, w.spend_pubkey33, tuple(range(1, 8)))) for _, w, start in WALLETS]
    # Many keyless wallets make each one-block task take ~0.1 s, so the kill lands while tasks run.
    dummies = [Receiver(os.urandom(32), kc.OTHER_WALLET.spend_pubkey33) for _ in range(1000)]
    receivers = [*real, *dummies]
    starts = [start for _, _, start in WALLETS] + [None] * len(dummies)
    killed: list[tuple[str, tuple]] = []
    with local_cluster() as c, distributed.Client(c, set_as_default=False) as client, Index.open(kernel_index, readonly=True) as idx:
        pids = client.run(os.getpid)

        def kill_a_busy_worker(lo: int, hi: int) -> None:
            if killed:
                return
            held: dict = {}

            def busy() -> bool:  # a worker running this scan's tasks, or holding results not yet taken
                held.update({w: keys for w, keys in client.processing().items() if keys} or {w: keys for w, keys in client.has_what().items() if keys})
                return bool(held)

            index_support.wait_until(busy, what="a worker holding a task")
            victim = sorted(held)[0]
            os.kill(pids[victim], signal.SIGKILL)
            killed.append((victim, held[victim]))

        found = list(cluster.scan(client, idx, receivers, 101, starts=starts, partition_blocks=1, in_flight=4, progress=kill_a_busy_worker))
        stories = {key: client.story(key) for key in killed[0][1]}
    expected = expected_rows(kernel_chain, [(n, w, max(s, 101)) for n, w, s in WALLETS])
    assert [{"wallet": WALLETS[w][0], **index_match_record(m)} for w, m in found] == expected
    # The scheduler put at least one task the victim held back to processing on another worker.
    runs = {key: sum(1 for s in story if s[0] == "scheduler" and s[3] == "processing") for key, story in stories.items()}
    assert max(runs.values()) >= 2, stories


@pytest.mark.parametrize("address", ["192.0.2.7:8786", "tcp://192.0.2.7:8786", "tcp://scheduler.example:8786", "tcp://[2001:db8::1]:8786"])
def test_a_plaintext_scheduler_on_another_machine_is_refused_before_anything_is_sent(kernel_index, wallets, address, monkeypatch):
    clients = []
    monkeypatch.setattr(distributed, "Client", lambda *args, **kwargs: clients.append(args))  # nothing may connect
    message = assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask", address), "unencrypted", "tls://", "--insecure")
    assert clients == [] and kc.TEST_WALLET.scan_key32.hex() not in message


def test_scheduler_addresses_allowed_and_refused():
    for ok in ("tcp://127.0.0.1:8786", "localhost:8786", "tcp://[::1]:8786", "tls://192.0.2.7:8786", "tls://scheduler.example:8786"):
        assert cluster.check_address(ok).split("://")[1] == ok.split("://")[-1]
    assert cluster.check_address("192.0.2.7:8786", insecure=True) == "tcp://192.0.2.7:8786"
    for bad in ("ucx://127.0.0.1:8786", "tcp://127.0.0.1", "tcp://127.0.0.1:port", "tcp://127.0.0.1:8786/x", "tcp://192.0.2.7:8786"):
        with pytest.raises(SchedulerAddressError):
            cluster.check_address(bad)


def test_insecure_and_tls_options_are_checked_before_connecting(kernel_index, wallets):
    assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--insecure"), "go with --dask")
    assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask", "tls://127.0.0.1:1", "--dask-tls-ca", "ca.pem"), "together")
    tls = ["--dask-tls-ca", "a", "--dask-tls-cert", "b", "--dask-tls-key", "c"]
    assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask", "tcp://127.0.0.1:1", *tls), "go with a tls://")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, str]:
    """A throwaway CA and one certificate it signed (for 127.0.0.1), made with the openssl command."""
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run = lambda *args: subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=30)  # noqa: E731
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sp-scan test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    run("req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=sp-scan test node")
    (d / "ext.cnf").write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "node.pem"), "key": str(d / "node.key")}


def test_a_tls_cluster_scans_with_the_clients_certificate_and_refuses_without(kernel_index, wallets, certificates):
    ca, cert, key = certificates["ca"], certificates["cert"], certificates["key"]
    security = distributed.Security(
        tls_ca_file=ca, tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key,
        tls_client_cert=cert, tls_client_key=key, require_encryption=True,
    )  # fmt: skip
    local = scan(kernel_index, "--wallets", str(wallets))
    with local_cluster(protocol="tls://", security=security) as c:
        assert c.scheduler_address.startswith("tls://127.0.0.1:")
        tls = ["--dask-tls-ca", ca, "--dask-tls-cert", cert, "--dask-tls-key", key]
        assert scan(kernel_index, "--wallets", str(wallets), "--dask", c.scheduler_address, *tls) == local
        assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask", c.scheduler_address), "needs a CA file")


def test_a_scheduler_without_workers_is_an_error_not_a_hang():
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as c, distributed.Client(c, set_as_default=False) as client:
        with pytest.raises(ClusterError, match="no worker joined"):
            cluster.check_workers(client, timeout=0.2)


def test_dask_is_imported_only_by_a_dask_scan(kernel_index, wallets, monkeypatch):
    code = "import sys, sp_scan.cli, sp_scan.index, sp_scan.index.scan; sys.exit('distributed' in sys.modules or 'dask' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the dist extra were not installed
    monkeypatch.delitem(sys.modules, "sp_scan.index.cluster")
    monkeypatch.delattr("sp_scan.index.cluster")
    assert_fails(invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--dask", "tcp://127.0.0.1:1"), "pip install 'sp-scan[dist]'")


def test_ctrl_c_between_matches_of_a_dask_scan_is_one_line_and_cancels_before_the_client_closes(kernel_index, scheduler, wallets, monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)  # what a generator's cleanup raised, unseen otherwise

    def interrupted(match):
        raise KeyboardInterrupt

    monkeypatch.setattr("sp_scan.cli.output.index_match_record", interrupted)
    result = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--json", "--dask", scheduler, "--partition-blocks", "5")
    assert result.exit_code == 130 and result.stderr == "sp-scan: interrupted; resume with --from 100\n"  # the first match is at 101
    assert [u.exc_value for u in unraisable] == []


def test_the_cluster_errors_name_a_section_of_the_docs_that_exists():
    with pytest.raises(SchedulerAddressError) as info:
        cluster.check_address("tcp://192.0.2.7:8786")
    page, section = re.search(r"see (docs/[\w.]+): ([^)]+)\)", str(info.value)).groups()
    assert f"\n## {section}\n" in (ROOT / page).read_text()


def docs_worker_options() -> list[str]:
    """The options of docs/index.md's `dask worker` command, without its TLS files and with one thread."""
    text = (ROOT / "docs" / "index.md").read_text()
    command = re.search(r"^dask worker (.*?[^\\])$", text, re.M | re.S).group(1).replace("\\\n", " ")
    words, options = shlex.split(command)[1:], []
    while words:
        option = words.pop(0)
        value = words.pop(0) if words and not words[0].startswith("--") else None
        if not option.startswith("--tls"):
            options += [option, "1" if option == "--nthreads" else value] if value is not None else [option]
    return options


def test_the_documented_worker_command_keeps_the_workers_http_endpoint_on_loopback():
    assert "--dashboard-address" in docs_worker_options()
    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as c, distributed.Client(c, set_as_default=False) as client:
        worker = subprocess.Popen([sys.executable, "-m", "dask", "worker", c.scheduler_address, *docs_worker_options()], stderr=subprocess.DEVNULL)
        try:
            client.wait_for_workers(1, timeout=300)  # the event: the worker joined (the bound only turns a hang into a failure)
            hosts = client.run(lambda dask_worker: sorted({s.getsockname()[0] for s in dask_worker.http_server._sockets.values()}))
            port = client.run(lambda dask_worker: dask_worker.http_server.port)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    assert list(hosts.values()) == [["127.0.0.1"]], hosts  # /health and /metrics: not on 0.0.0.0
    assert all(p > 0 for p in port.values())


@pytest.mark.parametrize(("level", "shown"), [("error", False), ("warning", True)])
def test_dask_log_lines_of_a_worker_loss_follow_the_chosen_level_as_sp_scan_lines(kernel_index, wallets, monkeypatch, level, shown):
    original = sp_scan.cli.index._Shown.__call__
    local = scan(kernel_index, "--wallets", str(wallets))
    killed = []

    with local_cluster() as c, distributed.Client(c, set_as_default=False) as client:

        def progress_then_kill_a_worker(self, lo: int, hi: int) -> None:
            original(self, lo, hi)
            if killed:
                return
            pids = client.run(os.getpid)
            victim = sorted(pids)[0]
            seen = logging.handlers.BufferingHandler(1000)  # beside the scan's own handler until the scan ends
            logging.getLogger("distributed").addHandler(seen)
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)
            # The events: the scheduler saw the loss, and at the warning level the nanny's "Restarting worker" came.
            index_support.wait_until(lambda: victim not in client.scheduler_info()["workers"], what="the scheduler saw the worker lost")
            if shown:
                index_support.wait_until(lambda: any("Restarting worker" in r.getMessage() for r in seen.buffer), what="the nanny's warning")

        monkeypatch.setattr(sp_scan.cli.index._Shown, "__call__", progress_then_kill_a_worker)
        dasks_own = logging.handlers.BufferingHandler(1000)  # beside Dask's own stderr handler: what it would print
        logging.getLogger("distributed").addHandler(dasks_own)
        try:
                result = invoke("index", "scan", "--db", str(kernel_index), "--wallets", str(wallets), "--json", "--dask", c.scheduler_address,
                            "--partition-blocks", "10", "--dask-log-level", level)  # fmt: skip
        finally:
            logging.getLogger("distributed").removeHandler(dasks_own)
    assert result.exit_code == 0 and result.stdout == local and killed, result.stderr
    lines = result.stderr.splitlines()
    assert all(line.startswith("sp-scan: dask ") for line in lines), lines
    assert any("restarting worker" in line.lower() for line in lines) == shown, lines
    assert [r.getMessage() for r in dasks_own.buffer if "Restarting worker" in r.getMessage()] == []  # none through Dask's handlers
