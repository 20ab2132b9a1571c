"""`sp-scan serve` as a command: syncing beside the server, clean stops, one-line errors, and a bounded load test."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

import kernelchain
from index_support import wait_until
from node_mempool import NodeMempool, wait_for
from serving import get, ok, synced_index
from sp_scan.index import Index
from sp_scan.server import Server, SyncChild
from sp_scan.server import serve as serve_index

TIP = kernelchain.SAMPLE_TIP
FOREVER = [sys.executable, "-c", "import time; time.sleep(3600)"]
"""A sync child that never ends by itself: a stop that waited for it would hit FAILSAFE."""
FAILSAFE = 120
"""Seconds after which a wait for an event fails instead of hanging (never a measured window)."""


def serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sp_scan.cli", "serve", *args], stderr=subprocess.PIPE, text=True)


def base_url(proc: subprocess.Popen) -> str:
    """The URL `sp-scan serve` announces on its first stderr line."""
    line = proc.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", line)
    assert found, line + proc.stderr.read()
    return found.group(0)


def wait_for_height(url: str, proc: subprocess.Popen, height: int) -> None:
    """Poll /block-height until the server (and the sync beside it) reaches `height`."""
    wait_until(lambda: get(f"{url}/block-height")[2] == {"block_height": height}, proc, f"the server reached height {height}")


def stop(proc: subprocess.Popen, signum: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


@pytest.fixture(scope="module")
def index_db(kernel_rest, tmp_path_factory):
    return synced_index(tmp_path_factory.mktemp("serve-cli") / "index.db", kernel_rest.url)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_with_a_node_creates_the_index_keeps_it_in_step_and_stops_cleanly(kernel_copy, kernel_chain, tmp_path, signum):
    db = tmp_path / "new.db"
    pool = NodeMempool(kernel_copy)
    with kernelchain.rest_server(kernel_copy, mempool=pool) as node:
        proc = serve("--db", str(db), "--port", "0", "--rest", node.url, "--interval", "0.1")
        try:
            url = base_url(proc)
            wait_for_height(url, proc, TIP)
            assert ok(f"{url}/tweak-index/101") == [t.tweak33.hex() for t in kernel_chain.tweaks(101)]
            unconfirmed = kernel_copy.transaction("unconfirmed", [kernel_copy.reserve.pop()], [("wallet", None)])
            pool.accept(unconfirmed.tx.serialize())  # the sync beside the server keeps the mempool too
            with Index.open(db, readonly=True) as idx:
                wait_for("the mempool tx in the index", lambda: [t.tweak33 for t in idx.mempool_tweaks().txs] == [unconfirmed.tweak33])
            assert ok(f"{url}/block-height") == {"block_height": TIP}  # the BlindBit routes stay block-only
            new = kernel_copy.mine([unconfirmed])  # the sync beside the server polls and commits it
            pool.chain_moved()
            wait_for_height(url, proc, TIP + 1)
            assert ok(f"{url}/block-hash/{TIP + 1}") == {"block_hash": new.hash32[::-1].hex()}
            assert ok(f"{url}/tweak-index/{TIP + 1}") == [unconfirmed.tweak33.hex()]
        finally:
            code, err = stop(proc, signum)
    assert code == 0, err
    assert "sp-scan serve: stopping" in err
    assert "stopped; the index is at height 111" in err or "interrupted" in err  # the sync child's own last word


def test_serve_over_rpc_passes_the_password_to_its_sync_in_the_environment_not_argv(kernel_chain, tmp_path):
    secret = "s3cret-rpc-password"
    with kernelchain.rpc_server(kernel_chain, credentials=f"alice:{secret}", mempool=NodeMempool(kernel_chain)) as node:
        proc = serve("--db", str(tmp_path / "rpc.db"), "--port", "0", "--rpc", node.url, "--rpc-user", f"alice:{secret}", "--interval", "0.1")
        try:
            wait_for_height(base_url(proc), proc, TIP)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            argvs = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in children]
            sync_argv = next(a for a in argvs if b"sync" in a)
            assert b"alice" in sync_argv and not any(secret.encode() in arg for arg in sync_argv)
        finally:
            code, err = stop(proc)
    assert code == 0, err
    assert secret not in err


def test_a_sync_child_stopped_while_it_is_being_started_is_terminated_not_waited_for():
    async def scenario() -> int | None:
        child = SyncChild(FOREVER, log=lambda line: None)
        child.start()
        await asyncio.sleep(0)  # the child is being spawned when the stop comes
        try:
            await asyncio.wait_for(child.stop(), FAILSAFE)
        finally:
            if child.running():
                child.process.kill()
                await child.process.wait()
        return child.process.returncode

    assert asyncio.run(scenario()) == -signal.SIGTERM


def test_a_stop_while_waiting_for_the_sync_to_create_the_index_ends_serving_and_terminates_the_sync(tmp_path):
    async def scenario() -> int | None:
        child = SyncChild(FOREVER, log=lambda line: None)  # never creates the index
        stop = asyncio.Event()

        async def stop_once_the_sync_runs() -> None:
            while not child.running():
                await asyncio.sleep(0.01)
            stop.set()

        stopper = asyncio.create_task(stop_once_the_sync_runs())
        try:
            await asyncio.wait_for(serve_index(Server(tmp_path / "new.db", port=0), child, log=lambda line: None, stop=stop), FAILSAFE)
        finally:
            stopper.cancel()
            if child.running():
                child.process.kill()
                await child.process.wait()
        return child.process.returncode

    assert asyncio.run(scenario()) == -signal.SIGTERM
    assert not (tmp_path / "new.db").exists()


def test_serve_without_an_index_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(tmp_path / "none.db"), "--port", "0"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("sp-scan: error: ") and proc.stderr.count("\n") == 1 and "none.db" in proc.stderr


def test_serve_without_httptools_says_to_install_the_serve_extra_in_one_line(index_db):
    hide = "import sys; sys.modules['httptools'] = None; from sp_scan.cli import main; main()"  # as if not installed
    proc = subprocess.run([sys.executable, "-c", hide, "serve", "--db", str(index_db), "--port", "0"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("sp-scan: error: ") and proc.stderr.count("\n") == 1 and "pip install 'sp-scan[serve]'" in proc.stderr


def test_serve_without_aiorpcx_serves_http_and_grpc_and_electrum_port_says_to_install_the_serve_extra(index_db):
    hide = "import sys; sys.modules['aiorpcx'] = None; from sp_scan.cli import main; main()"  # as if not installed
    plain = subprocess.Popen([sys.executable, "-c", hide, "serve", "--db", str(index_db), "--port", "0", "--grpc-port", "0"], stderr=subprocess.PIPE, text=True)
    assert ok(f"{base_url(plain)}/block-height") == {"block_height": TIP}  # sp_scan.server never imports aiorpcx
    assert stop(plain) == (0, "sp-scan serve: stopping\n")
    proc = subprocess.run([sys.executable, "-c", hide, "serve", "--db", str(index_db), "--port", "0", "--electrum-port", "0"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("sp-scan: error: ") and proc.stderr.count("\n") == 1 and "pip install 'sp-scan[serve]'" in proc.stderr


def test_serve_on_a_busy_port_is_one_line_and_exit_2(index_db):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(index_db), "--port", str(port)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "sp-scan: error: " in proc.stderr and "Traceback" not in proc.stderr


def test_serve_refuses_rest_and_rpc_together(index_db):
    proc = subprocess.run(
        [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(index_db), "--rest", "http://127.0.0.1:1", "--rpc", "http://127.0.0.1:1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2 and "--rest or --rpc" in proc.stderr


# ---- a bounded load test on loopback ----
LOAD_CLIENTS, LOAD_REQUESTS = 200, 10


def load_paths() -> list[str]:
    paths = ["/info", "/block-height"]
    for h in range(100, TIP + 1):
        paths += [f"/block-hash/{h}", f"/tweak-index/{h}?dustLimit=0", f"/tweak-index/{h}?dustLimit=20000", f"/tweaks/{h}?dustLimit=0"]
        paths += [f"/filter/new-utxos/{h}", f"/filter/spent/{h}", f"/utxos/{h}", f"/spent-index/{h}"]
    return paths + ["/tweaks/999", "/tweaks/x", "/nope"]


async def fetch_all(url: str, plan: list[list[str]]) -> list[list[tuple[str, int, bytes]]]:
    """Each client of `plan` sends its paths one after another; all clients at once."""
    connector = aiohttp.TCPConnector(limit=len(plan))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def client(paths: list[str]) -> list[tuple[str, int, bytes]]:
            out = []
            for path in paths:
                async with session.get(url + path, headers={"Accept-Encoding": "gzip"}) as response:
                    out.append((path, response.status, await response.read()))
            return out

        return await asyncio.gather(*(client(paths) for paths in plan))


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used so far: other load on the machine does not count."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_200_concurrent_clients_get_the_single_client_answers(index_db):
    proc = serve("--db", str(index_db), "--port", "0", "--per-ip-rate", "0")  # every client is 127.0.0.1
    try:
        url = base_url(proc)
        paths = load_paths()
        single = {path: (status, body) for (path, status, body) in asyncio.run(fetch_all(url, [paths]))[0]}
        rng = random.Random(200)
        plan = [[rng.choice(paths) for _ in range(LOAD_REQUESTS)] for _ in range(LOAD_CLIENTS)]
        before = cpu_seconds(proc.pid)
        answers = [a for client in asyncio.run(fetch_all(url, plan)) for a in client]
        spent = cpu_seconds(proc.pid) - before
        assert len(answers) == LOAD_CLIENTS * LOAD_REQUESTS
        assert [(p, s, b) for p, s, b in answers if (s, b) != single[p]] == []
        assert sum(s == 200 for _, s, _ in answers) > 0.9 * len(answers)
        assert spent < 0.005 * len(answers), spent  # answers are built once: ~0.1 ms of the server's CPU each
        assert json.loads(single["/block-height"][1]) == {"block_height": TIP}
    finally:
        code, err = stop(proc)
    assert code == 0, err
