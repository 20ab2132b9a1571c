"""Test support for the CLI: local Core-like HTTP servers and chains they serve."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

import blockfactory as bf
from bitcoin.core import CTransaction
from bitcoin.core.serialize import SerializationError
from sp_scan.wire import parse_spent

ROOT = Path(__file__).resolve().parent.parent


# --- Core-like servers (127.0.0.1 only, one thread per request, stopped by the fixture) ---


class ChainView(Protocol):
    """What the servers read: the active chain by height and any stored block by hash (32 bytes, internal order)."""

    def best(self) -> tuple[int, bytes]:
        """(height, hash32) of the tip."""

    def hash_at(self, height: int) -> bytes | None:
        """The active chain's hash at `height`, None when there is none."""

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        """(height, raw block, spent outputs in REST .bin form or None if unavailable), None if unknown."""


class Chain:
    """A short chain of test blocks by height, each built from a slice of the vectors' receiving cases.

    `blocks` gives the chain's blocks instead (heights from 0, each linking to the one before).
    """

    def __init__(self, length: int = 6, per_block: int = 5, blocks: list[bf.TestBlock] | None = None) -> None:
        if blocks is None:
            cases = bf.receiving_cases()
            blocks, prev = [], b"\x00" * 32
            for h in range(length):
                chosen = [cases[(h * per_block + i) % len(cases)] for i in range(per_block)]
                blocks.append(bf.build(chosen, height=h, prev=prev))
                prev = blocks[-1].header.GetHash()
        self.blocks = blocks
        self.by_hash = {tb.header.GetHash(): (h, tb) for h, tb in enumerate(self.blocks)}

    @property
    def tip(self) -> int:
        return len(self.blocks) - 1

    def best(self) -> tuple[int, bytes]:
        return self.tip, self.blocks[-1].header.GetHash()

    def hash_at(self, height: int) -> bytes | None:
        return self.blocks[height].header.GetHash() if 0 <= height <= self.tip else None

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        if hash32 not in self.by_hash:
            return None
        height, tb = self.by_hash[hash32]
        return height, tb.raw, tb.spent_bytes

    def expected_tweaks(self, start: int, stop: int) -> list[dict]:
        """What the vectors say `tweaks` prints for heights start..stop."""
        out = []
        for tb in self.blocks[start : stop + 1]:
            for tx, case in zip(tb.txs[1:], tb.cases):
                if case["expected"]["tweak"]:
                    out.append({"txid": tx.GetTxid()[::-1].hex(), "tweak": case["expected"]["tweak"]})
        return out


def spending_chain(length: int, fork: Chain | None = None, fork_height: int = 0, salt: int = 0) -> Chain:
    """A chain of blocks paying the vectors' first wallet, where every third block spends earlier taproot outputs.

    A spending block spends all taproot outputs of one earlier tx (cut through; which one depends on
    `salt`) and the largest taproot output of another, one with more taproot outputs when there is one
    (not cut through). With `fork`, the chain is fork's blocks below `fork_height`, then new blocks (different
    for another `salt`) up to `length` - 1.
    """
    cases = bf.wallet_cases()
    blocks = list(fork.blocks[:fork_height]) if fork else []
    for h in range(len(blocks), length):
        prev = blocks[-1].header.GetHash() if blocks else b"\x00" * 32
        nonce = h + (salt << 16)
        if h % 3 == 2:
            outputs = [o for tb in blocks[max(h - 3, 0) : h] for o in bf.taproot_outputs(tb)]
            txids = list(dict.fromkeys(o[0] for o in outputs))
            cut = txids[salt % len(txids)]
            whole = [o for o in outputs if o[0] == cut]
            many = [t for t in txids if t != cut and sum(o[0] == t for o in outputs) > 1]
            partly = (many or [t for t in txids if t != cut])[0]
            other = max((o for o in outputs if o[0] == partly), key=lambda o: o[2].amount)
            txs = [bf.spend_tx(h, whole), bf.spend_tx(h + 1, [other])]
            blocks.append(bf.assemble([t for t, _ in txs], [p for _, p in txs], h, prev, nonce))
        else:
            chosen = [cases[(3 * h + i + salt) % len(cases)] for i in range(3)]
            blocks.append(bf.build(chosen, height=h, prev=prev, nonce=nonce))
    return Chain(blocks=blocks)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        pass  # a client that hangs up (Ctrl-C tests) is not a server failure


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answering(self) -> bool:
        """False once the server was told to stop answering: the connection is then closed unanswered."""
        with self.server.lock:
            budget = self.server.budget
            if budget is not None:
                self.server.budget = budget - 1
        if budget is not None and budget <= 0:
            self.close_connection = True
            return False
        return True


def _hash32(param: str) -> bytes | None:
    """The internal-order hash of a 64-digit display hex string, or None."""
    if len(param) != 64:
        return None
    try:
        return bytes.fromhex(param)[::-1]
    except ValueError:
        return None


class RestHandler(_Base):
    """Serves /rest/ paths as Core's rest.cpp does (bodies, content types, error texts)."""

    def error(self, status: int, message: str) -> None:
        self.reply(status, (message + "\r\n").encode(), "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        if not self.answering():
            return
        chain: ChainView = self.server.chain
        self.server.requests.append(self.path)
        time.sleep(self.server.delay)
        path = self.path.split("?", 1)[0]
        if path == "/rest/chaininfo.json":
            height, hash32 = chain.best()
            info = {"chain": "regtest", "blocks": height, "headers": height, "bestblockhash": hash32[::-1].hex()}
            return self.reply(200, (json.dumps(info) + "\n").encode(), "application/json")
        for prefix in ("/rest/blockhashbyheight/", "/rest/block/", "/rest/spenttxouts/"):
            if path.startswith(prefix):
                param, _, fmt = path[len(prefix) :].rpartition(".")
                if fmt not in ("bin", "hex", "json"):
                    return self.error(404, "output format not found (available: .bin, .hex, .json)")
                return getattr(self, prefix.split("/")[2])(chain, param, fmt)
        self.error(404, "not found")

    def blockhashbyheight(self, chain: ChainView, param: str, fmt: str) -> None:
        if not param.isdigit():
            return self.error(400, f"Invalid height: {param}")
        hash32 = chain.hash_at(int(param))
        if hash32 is None:
            return self.error(404, "Block height out of range")
        if fmt == "bin":
            return self.reply(200, hash32, "application/octet-stream")
        if fmt == "hex":
            return self.reply(200, (hash32[::-1].hex() + "\n").encode(), "text/plain")
        self.reply(200, (json.dumps({"blockhash": hash32[::-1].hex()}) + "\n").encode(), "application/json")

    def _lookup(self, chain: ChainView, param: str):
        hash32 = _hash32(param)
        if hash32 is None:
            return self.error(400, f"Invalid hash: {param}")
        found = chain.lookup(hash32)
        if found is None:
            self.error(404, f"{param} not found")
        elif found[0] < self.server.pruned_below:
            self.error(404, f"{param} not available (pruned data)")  # Core's rest.cpp
            return None
        return found

    def block(self, chain: ChainView, param: str, fmt: str) -> None:
        found = self._lookup(chain, param)
        if found is None:
            return
        if fmt == "json":
            return self.error(404, "json not served by this test server")
        self._data(found[1], fmt)

    def spenttxouts(self, chain: ChainView, param: str, fmt: str) -> None:
        found = self._lookup(chain, param)
        if found is None:
            return
        if found[2] is None:
            return self.error(404, f"{param} undo not available")
        if fmt == "json":
            return self.reply(200, bf.spenttxouts_json(parse_spent(found[2])).encode(), "application/json")
        self._data(found[2], fmt)

    def _data(self, data: bytes, fmt: str) -> None:
        if fmt == "bin":
            self.reply(200, data, "application/octet-stream")
        else:
            self.reply(200, (data.hex() + "\n").encode(), "text/plain")


class RpcHandler(_Base):
    """A JSON-RPC 1.0 endpoint with Basic auth, answering as Core does for the calls sp-scan makes."""

    def do_POST(self) -> None:  # noqa: N802
        chain: ChainView = self.server.chain
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self.answering():
            return
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.server.requests.append("401")
            return self.reply(401, b"", "text/html")
        time.sleep(self.server.delay)
        request = json.loads(body)
        self.server.requests.append(request["method"])
        try:
            result = self.dispatch(chain, request["method"], request["params"])
        except LookupError as exc:
            code, message = exc.args
            reply = {"result": None, "error": {"code": code, "message": message}, "id": request["id"]}
            return self.reply(404 if code == -32601 else 500, (json.dumps(reply) + "\n").encode(), "application/json")
        reply = bf.dumps({"result": result, "error": None, "id": request["id"]}) + "\n"
        self.reply(200, reply.encode(), "application/json")

    def dispatch(self, chain: ChainView, method: str, params: list) -> object:
        if method == "getblockcount":
            return chain.best()[0]
        if method == "getblockchaininfo":
            height, hash32 = chain.best()
            return {"chain": "regtest", "blocks": height, "headers": height, "bestblockhash": hash32[::-1].hex()}
        if method == "getblockhash":
            hash32 = chain.hash_at(params[0])
            if hash32 is None:
                raise LookupError(-8, "Block height out of range")
            return hash32[::-1].hex()
        if method == "getblock":
            hash32 = _hash32(params[0])
            if hash32 is None:
                raise LookupError(-8, f"blockhash must be of length 64 (not {len(params[0])}, for '{params[0]}')")
            found = chain.lookup(hash32)
            if found is None:
                raise LookupError(-5, "Block not found")
            height, raw, spent = found
            if height < self.server.pruned_below:
                raise LookupError(-1, "Block not available (pruned data)")
            if params[1] == 0:
                return raw.hex()
            if spent is None:
                raise LookupError(-1, "Can't read undo data from disk")
            return bf.block_json(raw, parse_spent(spent), height)
        if method == "sendrawtransaction":
            try:
                tx = CTransaction.deserialize(bytes.fromhex(params[0]))
            except (ValueError, TypeError, SerializationError):
                raise LookupError(-22, "TX decode failed") from None
            self.server.relayed.append(params[0])
            return tx.GetTxid()[::-1].hex()
        if method == "getmempoolinfo":
            return {"loaded": True, "size": len(self.server.relayed), "bytes": sum(len(h) // 2 for h in self.server.relayed)}
        raise LookupError(-32601, "Method not found")


class NodeServer:
    """Run a handler over a ChainView on 127.0.0.1 in a background thread; `url` to reach it, `stop()` to end it.

    With `pruned_below`, blocks below that height answer as a pruned Core's do.

    The chain is read on every request, so blocks mined or reorganised while a
    client syncs are served as a node would serve them.
    """

    def __init__(self, handler: type[_Base], chain: ChainView, credentials: str = "", delay: float = 0.0, pruned_below: int = 0) -> None:
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.chain = chain
        self.httpd.pruned_below = pruned_below  # blocks below it answer as a pruned node's do
        self.httpd.credentials = credentials
        self.httpd.delay = delay
        self.httpd.requests = []
        self.httpd.relayed = []  # raw tx hex that sendrawtransaction accepted
        self.httpd.lock = threading.Lock()
        self.httpd.budget = None
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def stop_answering(self, after: int = 0) -> None:
        """Answer `after` more requests, then close every connection unanswered (a node that stopped answering)."""
        with self.httpd.lock:
            self.httpd.budget = after

    def resume_answering(self) -> None:
        """Answer every request again."""
        with self.httpd.lock:
            self.httpd.budget = None

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> NodeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port_url() -> str:
    """A 127.0.0.1 URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
