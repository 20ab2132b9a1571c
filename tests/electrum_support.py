"""Test support for the Electrum listener: ElectrumX as the backend, a raw JSON-RPC client, a server thread.

`ElectrumX` runs e-x (ElectrumX 2.x from PyPI) in a child process over the Core RPC stand-in
(cli_support.RpcHandler, which answers the calls ElectrumX makes) and waits until it has indexed the
chain's tip. `RawClient` speaks newline-delimited JSON-RPC over a plain socket and keeps the
notifications it reads while waiting for an answer. `ElectrumThread` runs an ElectrumServer on its
own event loop thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sp_scan.server.electrum import ElectrumServer

READY_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RawClient:
    """A newline-delimited JSON-RPC client over a TCP socket (or an already wrapped TLS socket)."""

    def __init__(self, port: int, timeout: float = 60.0, sock: socket.socket | None = None) -> None:
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rb")
        self.notifications: list[dict] = []
        self.answers: dict = {}
        self._id = 0

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_line(self, line: bytes) -> None:
        self.sock.sendall(line + b"\n")

    def send(self, method: str, params=(), id_: int | None = None) -> int:
        """Send a request; return its id."""
        if id_ is None:
            self._id += 1
            id_ = self._id
        self.send_line(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode())
        return id_

    def read(self) -> dict | None:
        """The next message, None when the server closed the connection."""
        line = self.file.readline()
        return json.loads(line) if line else None

    def answer(self, id_: int) -> dict:
        """The response to request `id_`; notifications and other answers read meanwhile are kept."""
        while id_ not in self.answers:
            message = self.read()
            assert message is not None, f"connection closed before the answer to {id_}"
            if "method" in message and "id" not in message:
                self.notifications.append(message)
            else:
                self.answers[message.get("id")] = message
        return self.answers.pop(id_)

    def call(self, method: str, params=()) -> dict:
        """Send a request and return its whole response object."""
        return self.answer(self.send(method, params))

    def result(self, method: str, params=()):
        response = self.call(method, params)
        assert "error" not in response, response
        return response["result"]

    def notification(self, method: str) -> dict:
        """The next notification of `method` (kept ones first)."""
        for i, message in enumerate(self.notifications):
            if message["method"] == method:
                return self.notifications.pop(i)
        while True:
            message = self.read()
            assert message is not None, f"connection closed while waiting for {method}"
            if message.get("method") == method and "id" not in message:
                return message
            self.notifications.append(message)

    def history(self, method: str = "blockchain.silentpayments.subscribe") -> list[dict]:
        """Silent-payments notifications up to and including the first with progress 1.0."""
        out = []
        while True:
            params = self.notification(method)["params"]
            out.append(params)
            if params["progress"] == 1.0:
                return out


class ElectrumThread:
    """An ElectrumServer on 127.0.0.1 run by its own event loop thread; `.port`, `.server`, `call(coro)`.

    `gate` goes to `ElectrumServer.start` (None: the server's own), the other arguments to `ElectrumServer`.
    """

    def __init__(self, db: Path, gate=None, **kwargs) -> None:
        self.server = ElectrumServer(db, "127.0.0.1", 0, **kwargs)
        self.gate = gate
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-electrum", daemon=True)

    @property
    def port(self) -> int:
        return self.server.port

    def call(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> ElectrumThread:
        self.thread.start()
        self.url = self.call(self.server.start(self.gate))
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call(self.server.close())
        except TimeoutError:
            self.call(_dump_tasks(), 5)
            raise
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def _dump_tasks() -> None:
    """Print every task's stack (what a server that does not close waits for)."""
    for task in asyncio.all_tasks():
        frames = [f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_code.co_name}:{f.f_lineno}" for f in task.get_stack(limit=12)]
        print("task", task.get_name(), task.get_coro().__qualname__, frames, file=sys.stderr)


class ElectrumX:
    """e-x (ElectrumX) in a child process, indexing the chain the RPC stand-in at `rpc_port` serves.

    Args:
        rpc_port: the stand-in's port (credentials user:pass).
        datadir: an empty directory for its database.
        tip: the height it must reach before `start` returns.
        padding_wait: seconds ElectrumX 2 holds a small answer back to pad it with the next ones (its
            traffic-analysis defence, 1.0 by default: a client making one call at a time waits that long
            for each); None leaves its default.
        missing_inputs: let blocks spend outputs the chain never created (bench.index's copies of a
            mainnet block do), each taken as an empty output of no script, instead of stopping.
    """

    def __init__(self, rpc_port: int, datadir: Path, tip: int, padding_wait: float | None = None, missing_inputs: bool = False) -> None:
        self.port = free_port()
        self.tip = tip
        self.padding_wait, self.missing_inputs = padding_wait, missing_inputs
        self.log = datadir / "electrumx.log"
        self.env = {
            **os.environ,
            "COIN": "Bitcoin", "NET": "regtest", "DB_ENGINE": "leveldb", "DB_DIRECTORY": str(datadir),
            "DAEMON_URL": f"http://user:pass@127.0.0.1:{rpc_port}/", "SERVICES": f"tcp://127.0.0.1:{self.port}", "REPORT_SERVICES": f"tcp://127.0.0.1:{self.port}",
            "ALLOW_ROOT": "1", "PEER_DISCOVERY": "off", "PEER_ANNOUNCE": "", "DAEMON_POLL_INTERVAL_BLOCKS": "200",
            "DAEMON_POLL_INTERVAL_MEMPOOL": "1000", "COST_SOFT_LIMIT": "0", "COST_HARD_LIMIT": "0", "MAX_SESSIONS": "2000",
            "INITIAL_CONCURRENT": "100", "LOG_LEVEL": "info", "CACHE_MB": "100",
        }  # fmt: skip
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self) -> ElectrumX:
        code = "from electrumx.cli.electrumx_server import main; main()"
        if self.padding_wait is not None:
            code = f"from electrumx.server.transport import PaddedRSTransport as T; T.WAIT_FOR_BUFFER_GROWTH_SECONDS = {self.padding_wait!r}; {code}"
        if self.missing_inputs:
            code = f"{_MISSING_INPUTS}\n{code}"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-c", code], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.wait_for(self.tip)
        return self

    def height(self) -> int | None:
        """The tip ElectrumX serves, None while it does not answer."""
        try:
            with RawClient(self.port, timeout=10) as client:
                client.result("server.version", ["probe", "1.4"])
                return client.result("blockchain.headers.subscribe")["height"]
        except (OSError, AssertionError, ValueError):
            return None

    def wait_for(self, height: int) -> None:
        """Wait until ElectrumX serves `height` (fails with its log if it exits or takes READY_TIMEOUT)."""
        deadline = time.monotonic() + READY_TIMEOUT
        while self.height() != height:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"ElectrumX did not reach height {height}:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_MISSING_INPUTS = """
import electrumx.server.block_processor as bp
_spend = bp.BlockProcessor.spend_utxo
def _spend_or_nothing(self, txid_rev, tx_idx):
    try:
        return _spend(self, txid_rev, tx_idx)
    except bp.ChainError:
        return bytes(bp.HASHX_LEN) + bp.pack_txnum(0) + bp.pack_satoshis_val(0)
bp.BlockProcessor.spend_utxo = _spend_or_nothing
"""


class Relay:
    """A TCP forwarder on 127.0.0.1 to `port`: `down()` cuts every connection and refuses new ones, `up()` ends that."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.refusing = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.refusing:
                    client.close()
                    continue
                backend = socket.create_connection(("127.0.0.1", self.target))
                self.pairs.append((client, backend))
            for a, b in ((client, backend), (backend, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self) -> None:
        with self.lock:
            self.refusing = True
            for pair in self.pairs:
                for s in pair:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            self.pairs.clear()

    def up(self) -> None:
        with self.lock:
            self.refusing = False

    def close(self) -> None:
        self.down()
        self.listener.close()
